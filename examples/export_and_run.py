"""Compile a PyTorch model to a .pte, run it with the NumPy-only runtime, compare with eager.

python examples/export_and_run.py
"""

import numpy as np
import torch

from torchedge.exir import to_edge
from torchedge.runtime import Runtime


class TinyNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.head(torch.relu(self.conv(x)).mean(dim=(2, 3)))


def main() -> None:
    model, example = TinyNet().eval(), (torch.randn(1, 3, 16, 16),)
    program = to_edge(torch.export.export(model, example)).to_executorch()
    program.save("tinynet.pte")  # the file ExecuTorch's runtime loads as well

    method = Runtime.get().load_program("tinynet.pte").load_method("forward")  # NumPy only from here
    (logits,) = method.execute([example[0].numpy()])
    expected = model(*example).detach().numpy()
    print(
        f"tinynet.pte: {len(program.buffer):,} bytes; max |torchedge - eager| = {np.abs(logits - expected).max():.2e}"
    )
    assert np.allclose(logits, expected, atol=1e-5)


if __name__ == "__main__":
    main()
