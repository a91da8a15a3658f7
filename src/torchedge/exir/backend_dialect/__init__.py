"""The backend dialect: Edge programs with backend operators, operators that stand for a pattern
of Edge operators on a target (see docs/backend-dialect.md).

`ops` binds patterns to operators (`bind_pattern_to_op`); `replacement` puts the operators in the
patterns' place (`BackendOpReplacement`, `to_backend_dialect`); `quant_fusion` does it for the
quantized chains of PT2E programs (`QuantFusion`); `verifier` checks the dialect (`verify_backend`).
"""

from torchedge.exir.backend_dialect.ops import bind_pattern_to_op
from torchedge.exir.backend_dialect.quant_fusion import QuantFusion
from torchedge.exir.backend_dialect.replacement import BackendOpReplacement, to_backend_dialect
from torchedge.exir.backend_dialect.verifier import verify_backend

__all__ = ["bind_pattern_to_op", "BackendOpReplacement", "to_backend_dialect", "QuantFusion", "verify_backend"]
