"""The zoo's models quantized (static int8 PT2E, per channel, `XNNPACKQuantizer`), lowered with
`XnnpackPartitioner`, on torchedge's XNNPACK interpreter and on ExecuTorch's XNNPACK.

mlp and cnn run in CI; mobilenet_v2, resnet18, llama, vit and bert (a minute or more each to
quantize and lower) with ``TORCHEDGE_XNNPACK_MODELS=all``.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.runtime")
pytest.importorskip("executorch.backends.xnnpack.quantizer.xnnpack_quantizer")
pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")

from tests.backends.test_xnnpack_quantized import ALL_MODELS, D, _datatypes, _lower_pt2e  # noqa: E402
from tests.conftest import executorch_run, torchedge_run  # noqa: E402

# Zoo models, static int8 (per channel). Bit-identical to ExecuTorch, except vit and bert: their
# float GELU and softmax nodes (XNNPACK's polynomial approximations, not libm's) differ from
# torchedge's in the last bits, and the quantizing convert after each may then round to the
# neighbouring code; there torchedge must stay closer to ExecuTorch than ExecuTorch is to the
# float model.
FAST_ZOO = ["mlp+cnn"]  # one program holding both: lowering dominates the time
SLOW_ZOO = ["mobilenet_v2", "resnet18", "llama", "vit", "bert"]
NOT_BIT_EXACT = {"vit", "bert"}


class _Side(torch.nn.Module):
    """Zoo models side by side: each takes its own inputs, in turn."""

    def __init__(self, models, arities):
        super().__init__()
        self.models, self.arities = torch.nn.ModuleList(models), arities

    def forward(self, *inputs):
        outputs, start = [], 0
        for model, arity in zip(self.models, self.arities):
            outputs.append(model(*inputs[start : start + arity]))
            start += arity
        return tuple(outputs)


def _zoo(name: str):
    from torchedge.models import load_model

    loaded = [load_model(part) for part in name.split("+")]
    if len(loaded) == 1:
        return loaded[0][0].eval(), tuple(loaded[0][1])
    model = _Side([m.eval() for m, _ in loaded], [len(i) for _, i in loaded])
    return model, tuple(x for _, inputs in loaded for x in inputs)


def _both_runs(model, inputs, quantized_type, dynamic: bool) -> list:
    """(torchedge's, ExecuTorch's) output pairs of the model quantized and lowered to XNNPACK."""
    buffer = _lower_pt2e(model, inputs, dynamic=dynamic)
    assert quantized_type in _datatypes(buffer), "nothing was quantized"
    arrays = [i.numpy() for i in inputs]
    got, want = torchedge_run(buffer, arrays), executorch_run(buffer, arrays)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
    return list(zip(got, want))


@pytest.mark.parametrize("name", FAST_ZOO + SLOW_ZOO)
def test_zoo_model_quantized_matches_executorch(name):
    if name in SLOW_ZOO and not ALL_MODELS:
        pytest.skip("lowering takes long: set TORCHEDGE_XNNPACK_MODELS=all")
    model, inputs = _zoo(name)
    for g, w in _both_runs(model, inputs, D.xnn_datatype_qint8, dynamic=False):
        if name not in NOT_BIT_EXACT:
            assert np.array_equal(g, w), f"{name}: {int(np.sum(g != w))} of {w.size} values differ"
            continue
        with torch.no_grad():
            reference = model(*inputs)
        reference = (reference if isinstance(reference, torch.Tensor) else reference[0]).numpy()
        assert np.abs(g - w).max() < np.abs(w - reference).max()


# Dynamic int8 (per channel weights, activations quantized per row at run time): only linear
# layers are quantized, so the convolutional models stay float. mlp matches ExecuTorch within
# float rounding. On llama, vit and bert the outputs differ by up to 1.4e-2, 1.1e-2 and 6.2e-4 of
# their magnitude (measured): not yet traced to a node; the suspects are XNNPACK's float
# approximations (softmax, GELU, SiLU) feeding the run-time quantization, where a last-bit
# difference can move a row's parameters or a value to the neighbouring code. There torchedge must
# stay closer to ExecuTorch than ExecuTorch is to the float model.
DYNAMIC_FAST = ["mlp"]
DYNAMIC_SLOW = ["llama", "vit", "bert"]


@pytest.mark.parametrize("name", DYNAMIC_FAST + DYNAMIC_SLOW)
def test_zoo_model_dynamically_quantized_matches_executorch(name):
    if name in DYNAMIC_SLOW and not ALL_MODELS:
        pytest.skip("lowering takes long: set TORCHEDGE_XNNPACK_MODELS=all")
    model, inputs = _zoo(name)
    for g, w in _both_runs(model, inputs, D.xnn_datatype_qdint8, dynamic=True):
        error = np.abs(g.astype(np.float64) - w).max()
        if name in DYNAMIC_FAST:
            assert error <= 1e-5 * np.abs(w).max(), f"{name}: error {error:.2e}"
            continue
        with torch.no_grad():
            reference = model(*inputs)
        reference = (reference if isinstance(reference, torch.Tensor) else reference[0]).numpy()
        assert error < np.abs(w - reference).max(), f"{name}: error {error:.2e}"
