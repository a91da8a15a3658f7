"""Graph inputs/outputs planned or supplied by the caller (ExecuTorch's alloc_graph_input/output)."""

import numpy as np
import pytest
import torch

from tests.conftest import assert_matches, executorch_run, torch_outputs, torchedge_compile
from torchedge.errors import InputError
from torchedge.exir import ExecutorchBackendConfig
from torchedge.exir.memory_planning.planning_pass import MemoryPlanningPass
from torchedge.runtime import Runtime
from torchedge.serialize import deserialize_pte


class TwoOutputs(torch.nn.Module):
    def forward(self, x):
        y = torch.relu(x) * 2
        return y.reshape(-1), torch.sigmoid(y) + x


def _compile(plan_inputs: bool, plan_outputs: bool):
    model, inputs = TwoOutputs().eval(), (torch.randn(3, 4),)
    config = ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(alloc_graph_input=plan_inputs, alloc_graph_output=plan_outputs)
    )
    return model, inputs, torchedge_compile(model, inputs, config)


@pytest.mark.parametrize("plan_inputs, plan_outputs", [(True, True), (False, True), (True, False), (False, False)])
def test_io_planning_options(plan_inputs, plan_outputs):
    model, inputs, program = _compile(plan_inputs, plan_outputs)
    plan = deserialize_pte(program.buffer).program.execution_plan[0]
    assert (plan.values[plan.inputs[0]].val.allocation_info is not None) == plan_inputs
    # Output 0 is a view of an intermediate and stays planned; output 1 follows the option.
    assert (plan.values[plan.outputs[1]].val.allocation_info is not None) == plan_outputs
    expected = torch_outputs(model, inputs)
    method = Runtime.get().load_program(program.buffer).load_method()
    assert_matches(method.execute([inputs[0].numpy()]), expected)
    assert_matches(executorch_run(program.buffer, inputs), expected)


def test_caller_provided_output_buffers_are_written_in_place():
    model, inputs, program = _compile(True, False)
    method = Runtime.get().load_program(program.buffer).load_method()
    buffer = np.zeros((3, 4), np.float32)
    outputs = method.execute([inputs[0].numpy()], outputs=[None, buffer])
    assert outputs[1] is buffer
    assert_matches([buffer], torch_outputs(model, inputs)[1:])
    with pytest.raises(InputError, match="expected float32"):
        method.execute([inputs[0].numpy()], outputs=[None, np.zeros((4, 3), np.float32)])
    planned = np.zeros(12, np.float32)  # a planned output: copied into the array given for it
    assert method.execute([inputs[0].numpy()], outputs=[planned, None])[0] is planned
    assert_matches([planned], torch_outputs(model, inputs)[:1])
    with pytest.raises(InputError, match=r"output buffer 0: the output is float32\[12\], the buffer float32\[5\]"):
        method.execute([inputs[0].numpy()], outputs=[np.zeros(5, np.float32), None])


def test_caller_inputs_are_bound_each_run_never_overwritten():
    model, _, program = _compile(False, True)
    method = Runtime.get().load_program(program.buffer).load_method()
    first, second = np.ones((3, 4), np.float32), np.full((3, 4), -2.0, np.float32)
    method.execute([first])
    assert_matches(method.execute([second]), torch_outputs(model, (torch.from_numpy(second),)))
    np.testing.assert_array_equal(first, np.ones((3, 4), np.float32))  # the caller's earlier input is untouched
