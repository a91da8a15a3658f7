"""Steps that read only constants run once, at load (`torchedge.runtime.folding`).

Every case runs the same `.pte` with folding (the default) and without (``fold=False``: each
run computes every step, the program's own semantics), three times on different inputs: the
outputs must have the same bits, and match PyTorch eager (or ExecuTorch's runtime). The labels
of the folded steps show which steps were computed at load."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from tests.conftest import assert_matches, executorch_compile, executorch_run, torch_outputs
from torchedge.kernels.optimized.tuning import set_tuning
from torchedge.runtime import Runtime
from torchedge.runtime.folding import FOLDED


def _methods(buffer: bytes):
    program = Runtime.get().load_program(buffer)
    return program.load_method("forward"), program.load_method("forward", fold=False)


def _folded(method) -> list[str]:
    """The operators of the folded steps, in program order (``aten::arange``, ...)."""
    return [s.label[: -len(FOLDED)].split(".")[0] for s in method._steps if s.label.endswith(FOLDED)]


def _same_bits_three_times(folded, plain, inputs_of_run) -> list:
    """Run both methods on three different inputs; the outputs must be bit-identical."""
    outputs = []
    for run in range(3):
        arrays = [t.numpy() for t in inputs_of_run(run)]
        got, want = folded.execute(arrays), plain.execute(arrays)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
        outputs.append(got)
    return outputs


class Positions(nn.Module):
    """Learned positions and a causal mask built from constants (arange, comparisons, where)."""

    def __init__(self, length=6, width=4):
        super().__init__()
        self.table = nn.Embedding(length, width)

    def forward(self, x):
        positions = torch.arange(x.shape[1])
        bias = torch.where(positions[None, :] <= positions[:, None], 0.0, float("-inf"))
        scores = x @ x.transpose(-1, -2) + bias
        return scores.softmax(-1) @ (x + self.table(positions))


def _positions_inputs(run: int):
    return (torch.randn(1, 6, 4, generator=torch.Generator().manual_seed(run)),)


def test_constant_steps_of_a_portable_program_run_once_with_the_same_bits():
    torch.manual_seed(0)
    model = Positions().eval()
    buffer = executorch_compile(model, _positions_inputs(0))
    folded, plain = _methods(buffer)
    ops = _folded(folded)
    assert {"aten::arange", "aten::embedding", "aten::where"} <= set(ops)
    assert not {"aten::bmm", "aten::add", "aten::_softmax"} & set(ops)  # these read the input
    assert _folded(plain) == []
    outputs = _same_bits_three_times(folded, plain, _positions_inputs)
    for run, got in enumerate(outputs):
        assert_matches(got, torch_outputs(model, _positions_inputs(run)), 1e-5)


def test_fuse_false_runs_every_step():
    torch.manual_seed(0)
    buffer = executorch_compile(Positions().eval(), _positions_inputs(0))
    assert _folded(Runtime.get().load_program(buffer).load_method("forward", fuse=False)) == []


class Counter(nn.Module):
    """A step reading only mutable state (``steps * 2``) and one reading only constants (``arange``)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.zeros(3))

    def forward(self, x):
        before = self.steps * 2.0
        self.steps.add_(1.0)
        return x + before + torch.arange(3.0)


def test_steps_reading_an_input_or_mutable_state_run_each_time():
    inputs = (torch.ones(3),)
    buffer = executorch_compile(Counter(), inputs)
    folded, plain = _methods(buffer)
    assert _folded(folded) == ["aten::arange"]
    outputs = [got[0] for got in _same_bits_three_times(folded, plain, lambda run: inputs)]
    # ExecuTorch's program leaves the buffer's first state to the runtime: each run adds 2 to the output
    np.testing.assert_array_equal(np.diff(outputs, axis=0), np.full((2, 3), 2.0, np.float32))


class Broadcast(nn.Module):
    """A constant-only result much larger than the constants it is computed from."""

    def forward(self, x):
        return x + torch.arange(64.0).expand(64, 64)


def test_a_result_larger_than_the_limit_is_computed_each_run():
    inputs = (torch.randn(64, 64),)
    buffer = executorch_compile(Broadcast(), inputs)
    assert "aten::expand_copy" in _folded(_methods(buffer)[0])
    set_tuning("folded_result_extra_bytes", 64 * 4)  # the arange fits, its 64x64 expansion does not
    try:
        folded, plain = _methods(buffer)
    finally:
        set_tuning("folded_result_extra_bytes", None)
    assert _folded(folded) == ["aten::arange"]
    _same_bits_three_times(
        folded, plain, lambda run: (torch.randn(64, 64, generator=torch.Generator().manual_seed(run)),)
    )


def test_profiling_runs_the_folded_program():
    torch.manual_seed(0)
    buffer = executorch_compile(Positions().eval(), _positions_inputs(0))
    traced = Runtime.get().load_program(buffer, enable_etdump=True).load_method("forward")
    assert "aten::arange" in _folded(traced)
    _same_bits_three_times(traced, _methods(buffer)[1], _positions_inputs)


def test_masks_and_positions_of_executorchs_xnnpack_lowerings_are_computed_at_load(xnnpack_lowering):
    import torchedge.backends.xnnpack.runtime  # noqa: F401  (registers XnnpackBackend)

    buffer, inputs = xnnpack_lowering
    folded, plain = _methods(buffer)
    ops = _folded(folded)
    assert "aten::arange" in ops and "aten::where" in ops
    assert len(ops) >= 20
    outputs = _same_bits_three_times(folded, plain, lambda run: inputs)
    assert_matches(outputs[-1], executorch_run(buffer, [t.numpy() for t in inputs]), 1e-4)


class NoisyRelu(nn.Module):
    """Training-mode rrelu writes its noise tensor, which a constant-only step makes, in place."""

    def forward(self, x):
        return torch.ops.aten.rrelu_with_noise(x, torch.zeros(x.shape), 0.1, 0.3, True)


def test_a_tensor_a_running_kernel_writes_in_place_is_not_folded():
    from torchedge.exir import to_edge

    x = torch.linspace(-2.0, 2.0, 20)
    buffer = to_edge(torch.export.export(NoisyRelu(), (x,))).to_executorch().buffer
    folded, plain = _methods(buffer)
    assert _folded(folded) == _folded(plain) == []  # the zeros are written by rrelu at every run
    for _ in range(3):
        out = folded.execute([x.numpy()])[0]
        negative = x.numpy() <= 0
        np.testing.assert_array_equal(out[~negative], x.numpy()[~negative])
        slopes = out[negative] / x.numpy()[negative]  # drawn from [lower, upper)
        assert np.all((slopes >= 0.1 - 1e-6) & (slopes <= 0.3 + 1e-6))
