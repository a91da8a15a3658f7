"""Channels-last tensors keep their dim order into the .pte; layout conversions become dim-order copies."""

import torch

from tests.conftest import assert_matches, executorch_run, torch_outputs, torchedge_compile, torchedge_run
from torchedge.schema.program import Tensor
from torchedge.serialize import deserialize_pte


class ChannelsLastConv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        y = x.to(memory_format=torch.channels_last)
        y = torch.relu(self.conv(y))
        return y.contiguous() * 2.0


def test_channels_last_round_trip_on_both_runtimes():
    model, inputs = ChannelsLastConv().eval(), (torch.randn(2, 3, 8, 8),)
    program = torchedge_compile(model, inputs)
    plan = deserialize_pte(program.buffer).program.execution_plan[0]
    ops = {f"{o.name}.{o.overload}" for o in plan.operators}
    assert "dim_order_ops::_to_dim_order_copy.out" in ops
    orders = {tuple(ev.val.dim_order) for ev in plan.values if isinstance(ev.val, Tensor) and len(ev.val.sizes) == 4}
    assert (0, 2, 3, 1) in orders and (0, 1, 2, 3) in orders
    expected = torch_outputs(model, inputs)
    assert_matches(torchedge_run(program.buffer, inputs), expected)
    assert_matches(executorch_run(program.buffer, inputs), expected)
