"""A 4-bit linear whose integer weight a portable node also reads stays on ONNX Runtime: the
lowbit operator has no portable kernel, and its delegate stores the weight packed for MatMulNBits
(other bytes than the portable node's). Reference: torchao eager and PyTorch eager."""

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("torchao")
torch = pytest.importorskip("torch")

from torchedge.backends.onnxruntime import OnnxRuntimePartitioner  # noqa: E402
from torchedge.backends.onnxruntime.lowbit import use_lowbit_linears  # noqa: E402
from torchedge.cli.recipes import quantize_model  # noqa: E402
from torchedge.exir import to_edge_transform_and_lower  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402


class _LinearAndWeightRemainder(torch.nn.Module):
    """A quantized linear, and its integer weight modulo an input (an operator the ONNX lowering
    does not translate, so it runs portable on the same weight)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(64, 96, bias=False)

    def forward(self, x, divisor):
        return self.linear(x), torch.remainder(self.linear.qdata, divisor)


def test_a_lowbit_linear_stays_delegated_when_its_weight_is_also_read_portably():
    model = _LinearAndWeightRemainder().eval()
    quantize_model(model, "8da4w", 32)
    x, divisor = torch.randn(1, 5, 64), torch.tensor(3, dtype=torch.int8)
    with torch.no_grad():
        expected = model.linear(x)
    assert use_lowbit_linears(model) == 1
    ep = torch.export.export(model, (x, divisor))
    program = to_edge_transform_and_lower(ep, partitioner=[OnnxRuntimePartitioner()]).to_executorch()
    assert program.buffer.count(b"MatMulNBits") == 1
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    out, remainder = method.execute([x.numpy(), divisor.numpy()])
    np.testing.assert_array_equal(remainder, torch.remainder(model.linear.qdata, divisor).numpy())
    error = np.abs(out - expected.numpy())
    assert error.max() <= 0.05 * float(np.abs(expected.numpy()).max())  # int8 activation rounding
