"""XNNPACK delegate payloads (``XnnpackBackend``) interpreted in NumPy.

ExecuTorch's `XnnpackPartitioner` lowers subgraphs to an XNNPACK graph serialized as a flatbuffer
(`schema.fbs`, file identifier ``XN01``) behind a small header. This package reads that payload
and runs it node by node with NumPy; no XNNPACK library is needed. Importing
`torchedge.backends.xnnpack.runtime` registers the backend.

Modules, in processing order: `header` (the payload header), `schema` (the graph as plain
dataclasses), `payload_tables` (their flatbuffer wire description), `graph` (values and nodes
as an execution plan, with `fusion`, the fusion rules' adapter over the nodes, and
`buffer_reuse`, buffers of dead values taken by later ones), `nodes_*` (node implementations by
family), `plan` (a laid-out graph run on a call's arguments, in place where they fit), `runtime`
(the backend).
Quantized values (static int8, dynamic int8 rows, 4-bit weights) have their parameters and
arithmetic in `quantization` and their node builders in `nodes_quantized` (products, pooling,
binary, data movement) and `nodes_quantized_unary` (converts, clamps, lookup-table activations).
"""
