"""In-place sharing: only for kernels proven correct with out aliasing self, and end to end."""

import numpy as np
import pytest
import torch

from tests.conftest import assert_matches, executorch_run, torch_outputs, torchedge_compile, torchedge_run
from torchedge.exir.ir import op_name
from torchedge.exir.memory_planning.inplace import INPLACE_SAFE_OPS
from torchedge.kernels.registry import get_kernel
from torchedge.schema.program import Tensor
from torchedge.serialize import deserialize_pte


def _sample_args(op, x):
    """Arguments for each schema slot, with ``x`` as self and the out aliasing ``x``."""
    values = []
    for arg in op._schema.arguments:
        t = str(arg.type)
        if arg.name == "self":
            values.append(x)
        elif arg.name == "out":
            values.append("OUT")
        elif t == "Tensor":
            values.append(torch.rand(x.shape[-1]) + 0.5)  # broadcast other operand
        elif arg.name in ("min", "min_val"):
            values.append(-0.5)
        elif arg.name in ("max", "max_val"):
            values.append(0.7)
        elif t in ("Scalar", "number"):
            values.append(1.5)
        elif arg.has_default_value():
            values.append(arg.default_value)
        else:
            raise AssertionError(f"no sample for {arg}")
    return values


@pytest.mark.parametrize("op", sorted(INPLACE_SAFE_OPS, key=op_name), ids=op_name)
def test_kernel_is_correct_with_out_aliasing_self(op):
    x = torch.rand(3, 4, 5) * 4 - 2
    if "conj" in op_name(op):  # eager's conjugates take complex tensors
        x = torch.complex(x, x.flip(-1))
    args = _sample_args(op, x)
    expected = op(
        **{a.name: (torch.empty_like(x) if isinstance(v, str) else v) for a, v in zip(op._schema.arguments, args)}
    )
    aliased = x.numpy().copy()
    np_args = [
        aliased if isinstance(v, str) or v is x else (v.numpy() if isinstance(v, torch.Tensor) else v) for v in args
    ]
    get_kernel(op_name(op)).fn(*np_args)
    np.testing.assert_allclose(aliased, expected.numpy(), rtol=1e-5, atol=1e-6)


class Chain(torch.nn.Module):
    def forward(self, x):
        y = torch.relu(x * 2.0) + 1.0
        return torch.sigmoid(y).neg()


def test_chain_runs_in_one_buffer():
    model, inputs = Chain().eval(), (torch.randn(64, 64),)
    program = torchedge_compile(model, inputs)
    nbytes = 64 * 64 * 4
    assert program.memory_plans["forward"].planned_buffer_sizes == [nbytes]
    plan = deserialize_pte(program.buffer).program.execution_plan[0]
    offsets = {
        ev.val.allocation_info.memory_offset_low
        for ev in plan.values
        if isinstance(ev.val, Tensor) and ev.val.allocation_info is not None
    }
    assert offsets == {0}
    expected = torch_outputs(model, inputs)
    assert_matches(torchedge_run(program.buffer, inputs), expected)
    assert_matches(executorch_run(program.buffer, inputs), expected)
