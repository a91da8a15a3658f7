"""Graph passes. Each is a small `PassBase` subclass with one job."""

from torchedge.exir.pass_base import PassBase, PassResult, run_passes
from torchedge.exir.passes.out_variant import OutVariantPass
from torchedge.exir.passes.remove_asserts import RemoveAssertsPass
from torchedge.exir.passes.scalar_to_tensor import ScalarToTensorPass
from torchedge.exir.passes.share_views import ShareViewsPass
from torchedge.exir.passes.view_to_copy import ViewToCopyPass

__all__ = [
    "PassBase",
    "PassResult",
    "run_passes",
    "OutVariantPass",
    "RemoveAssertsPass",
    "ScalarToTensorPass",
    "ShareViewsPass",
    "ViewToCopyPass",
]
