"""Delegate a model to the ONNX Runtime backend (needs `pip install torchedge[onnxruntime]`).

python examples/delegate_onnxruntime.py
"""

import numpy as np
import torch

from torchedge.backends.onnxruntime import OnnxRuntimePartitioner
from torchedge.exir import to_edge_transform_and_lower
from torchedge.runtime import Runtime


def main() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 10)).eval()
    example = (torch.randn(8, 32),)
    program = to_edge_transform_and_lower(
        torch.export.export(model, example), partitioner=[OnnxRuntimePartitioner(intra_op_threads=1)]
    ).to_executorch()
    plan = program.program.execution_plan[0]
    print(f"delegates: {[d.id for d in plan.delegates]}; portable operators left: {len(plan.operators)}")
    method = Runtime.get().load_program(program.buffer).load_method()
    (out,) = method.execute([example[0].numpy()])
    error = np.abs(out - model(*example).detach().numpy()).max()
    print(f"max |torchedge + ONNX Runtime - eager| = {error:.2e}")
    assert error < 1e-5


if __name__ == "__main__":
    main()
