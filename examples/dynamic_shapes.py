"""One program for every batch size up to a bound: export with torch.export.Dim.

python examples/dynamic_shapes.py
"""

import numpy as np
import torch
from torch.export import Dim

from torchedge.exir import to_edge
from torchedge.runtime import Runtime


def main() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2)).eval()
    exported = torch.export.export(model, (torch.randn(4, 16),), dynamic_shapes=({0: Dim("batch", min=1, max=64)},))
    method = Runtime.get().load_program(to_edge(exported).to_executorch().buffer).load_method()
    print("input:", method.meta.inputs[0])  # shape is the upper bound, dynamic=True
    for batch in (1, 7, 64):
        x = torch.randn(batch, 16)
        (out,) = method.execute([x.numpy()])
        error = np.abs(out - model(x).detach().numpy()).max()
        print(f"batch {batch:2d}: output {out.shape}, max |torchedge - eager| = {error:.2e}")
        assert out.shape == (batch, 2) and error < 1e-5


if __name__ == "__main__":
    main()
