"""torchao's 8da8w linear layers (`Int8DynamicActivationIntxWeightConfig`, int8 weights per output
channel) lowered by torchedge's XNNPACK partitioner, compared with the same model lowered by
ExecuTorch's own partitioner: the same XNNPACK nodes and value kinds, outputs on ExecuTorch's
runtime and torchedge's equal to ExecuTorch's lowering run on ExecuTorch, and eager's within the
activations' quantization error. The LLM export tests (tests/generation) run such layers in a Llama."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.runtime")
quant_api = pytest.importorskip("torchao.quantization.quant_api")

from tests.backends.test_xnnpack_aot_quantized import _calls, _summary  # noqa: E402
from tests.conftest import executorch_run, torchedge_run  # noqa: E402
from torchedge.backends.xnnpack.aot import XnnpackPartitioner  # noqa: E402
from torchedge.exir import to_edge_transform_and_lower  # noqa: E402


@pytest.mark.parametrize("shape", [(5, 128), (1, 5, 128)])
def test_8da8w_lowering_matches_executorch(shape):
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner as ETX
    from executorch.exir import to_edge_transform_and_lower as et_lower
    from torchao.quantization.granularity import PerAxis

    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 64, bias=False)).eval()
    config = quant_api.Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int8, weight_granularity=PerAxis(0))
    quant_api.quantize_(model, config)
    inputs = (torch.randn(*shape, generator=torch.Generator().manual_seed(1)),)
    ours = to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[XnnpackPartitioner()])
    theirs = et_lower(torch.export.export(model, inputs), partitioner=[ETX()])
    ours_pte, theirs_pte = ours.to_executorch().buffer, theirs.to_executorch().buffer
    arrays = [inputs[0].numpy()]
    want = executorch_run(theirs_pte, arrays)[0]
    scale = float(np.max(np.abs(want)))
    for got in (executorch_run(ours_pte, arrays)[0], torchedge_run(ours_pte, arrays)[0]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale)
    with torch.no_grad():
        np.testing.assert_allclose(want, model(*inputs).numpy(), atol=0.02 * scale)
    assert _calls(ours_pte)[1] == 1 and _calls(ours_pte)[0] <= _calls(theirs_pte)[0]
    nodes, constants, kinds = _summary(ours_pte)
    if len(shape) == 2:
        assert (nodes, constants, kinds) == _summary(theirs_pte)
    else:  # [1, tokens, dim]: the rows flattened around the layers (ExecuTorch keeps three dims)
        assert (constants, kinds) == _summary(theirs_pte)[1:]
    assert nodes.count("XNNFullyConnected") == nodes.count("XNNConvert") == 2
