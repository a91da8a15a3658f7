"""AOT half of the XNNPACK backend (needs torch): `XnnpackPartitioner` and `XnnpackBackend`.

``preprocess`` writes payloads in ExecuTorch 1.5.1's format (the ``XH00`` header, the ``XN01``
XNNGraph flatbuffer, the constant data), which ExecuTorch's XNNPACK runtime and torchedge's
interpreter (`torchedge.backends.xnnpack.runtime`) both run. Modules: `builder` (the graph under
construction and its bytes), `lowering` (the operator registry, layouts, the walk), ``ops_*``
(the translations; `ops_quantized`: PT2E static and dynamic int8 patterns and torchao's 8da4w
linear layers, as ExecuTorch lowers them), `partitioner` (the partitioner and the backend).
"""

from torchedge.backends.xnnpack.aot.partitioner import XnnpackBackend, XnnpackPartitioner

__all__ = ["XnnpackBackend", "XnnpackPartitioner"]
