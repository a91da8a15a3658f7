"""Every kernel call torchedge emits passes as many arguments as ExecuTorch's own emitter does.

ExecuTorch's runtime checks the length of each call's argument stack against the operator as
it registered it (``Expected 5args received 4`` aborts the program). The reference is
ExecuTorch's emitter on the same exported programs: for every operator both emit, the argument
counts must agree, and the programs must run on ExecuTorch's runtime.
"""

from __future__ import annotations

import pytest
import torch

from torchedge.exir import to_edge


class MultiOutput(torch.nn.Module):
    """Operators with several outs, a Tensor[] out, optional and list arguments."""

    def forward(self, x, idx):
        a, b, c = torch.split(x, [1, 2, 3], dim=1)
        first, second = torch.chunk(x, 2, dim=0)
        values, indices = torch.topk(x, 2, dim=1)
        largest, where = torch.max(x, dim=1)
        var, mean = torch.var(x, dim=1), torch.mean(x, dim=1)
        normed = torch.nn.functional.layer_norm(x, (6,))
        rows = torch.unbind(x, dim=0)
        picked = torch.index_select(x, 0, idx)
        return (
            a * 2 + c.sum(1, keepdim=True),
            b.mean(),
            first - second,
            values + indices,
            largest + where,
            var + mean,
            normed.clamp(-1, 1),
            rows[0] + rows[-1],
            picked.cumsum(1),
            torch.cat([x, x], 0).permute(1, 0).contiguous().view(-1)[:5],
            torch.where(x > 0, x, torch.zeros_like(x)).argmax(),
        )


class Convolutional(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(4)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.norm(self.conv(x))), 2)
        return torch.nn.functional.adaptive_avg_pool2d(y, 1).flatten(1), torch.nn.functional.interpolate(
            y, scale_factor=2
        )


PROGRAMS = {
    "multi_output": (MultiOutput, (torch.randn(4, 6), torch.tensor([0, 2]))),
    "convolutional": (Convolutional, (torch.randn(1, 3, 8, 8),)),
}


def _arities(program) -> dict[str, set[int]]:
    found: dict[str, set[int]] = {}
    for plan in program.execution_plan:
        for chain in plan.chains:
            for instruction in chain.instructions:
                call = instruction.instr_args
                if hasattr(call, "op_index") and call.op_index is not None and hasattr(call, "args"):
                    op = plan.operators[call.op_index]
                    found.setdefault(f"{op.name}.{op.overload}", set()).add(len(call.args))
    return found


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_argument_counts_match_executorch(name):
    from executorch.exir import to_edge as et_to_edge
    from executorch.runtime import Runtime as ETRuntime

    make, inputs = PROGRAMS[name]
    torch.manual_seed(0)
    model = make().eval()
    ep = torch.export.export(model, inputs)
    ours = to_edge(ep).to_executorch()
    theirs = et_to_edge(torch.export.export(model, inputs)).to_executorch()
    ours_arity, their_arity = _arities(ours.program), _arities(theirs.executorch_program)
    shared = sorted(set(ours_arity) & set(their_arity))
    assert len(shared) >= 5, f"too few operators in common to compare: {shared}"
    differing = {op: (ours_arity[op], their_arity[op]) for op in shared if ours_arity[op] != their_arity[op]}
    assert not differing, f"argument counts (torchedge, ExecuTorch) differ: {differing}"
    method = ETRuntime.get().load_program(ours.buffer).load_method("forward")
    with torch.no_grad():
        expected = model(*inputs)
    for got, want in zip(method.execute(list(inputs)), expected):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
