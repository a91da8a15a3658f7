"""Quantize a model to int8 with PT2E (torchao) and compile it: int8 weights stay int8.

python examples/quantize_pt2e.py
"""

import numpy as np
import torch
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
    X86InductorQuantizer,
    get_default_x86_inductor_quantization_config,
)

from torchedge.exir import to_edge
from torchedge.runtime import Runtime


def main() -> None:
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3), torch.nn.ReLU(), torch.nn.Conv2d(16, 8, 3)).eval()
    example = (torch.randn(1, 3, 24, 24),)
    quantizer = X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config())
    prepared = prepare_pt2e(torch.export.export(model, example).module(), quantizer)
    for _ in range(8):  # calibrate on representative inputs
        prepared(torch.randn(1, 3, 24, 24))
    quantized = convert_pt2e(prepared)

    int8 = to_edge(torch.export.export(quantized, example)).to_executorch()
    fp32 = to_edge(torch.export.export(model, example)).to_executorch()
    method = Runtime.get().load_program(int8.buffer).load_method()
    x = torch.randn(1, 3, 24, 24)
    (out,) = method.execute([x.numpy()])
    reference = quantized(x).detach().numpy()  # the quantized model in PyTorch
    error = np.abs(out - reference).max()
    print(
        f".pte: int8 {len(int8.buffer):,} bytes vs float {len(fp32.buffer):,}; "
        f"max |torchedge - PyTorch int8| = {error:.2e}, "
        f"vs float model {np.abs(out - model(x).detach().numpy()).max():.2e}"
    )
    assert error <= 0.05 * np.abs(reference).max()


if __name__ == "__main__":
    main()
