"""The Edge operator namespace: ``from torchedge.exir.dialects import ops as exir_ops``.

>>> edge.aten.sigmoid.default.name()
'aten::sigmoid'
"""

from torchedge.exir.dialects.edge_op import EdgeOps

__all__ = ["edge"]

edge = EdgeOps()
