"""Load-time fusion: a loaded program's instruction groups run as torchedge's fused kernels.

A `.pte` made for ExecuTorch holds core ATen operators only: attention as seventeen
instructions, activations and paddings as instructions of their own, max pooling that writes
indices nobody reads, heads moved by four copies. `fuse_steps` finds such groups in a loaded
method's compiled steps and replaces each by one step, so the same file runs portable in
ExecuTorch and fused here, with no ``fuse_kernels=True`` program to make and ship:

* **attention** (`attention`): the math decomposition of ``scaled_dot_product_attention`` (q and
  kᵀ scaled, plain copies, ``bmm``, the additive mask, ``_softmax``, the safe-softmax masking of
  fully masked rows, ``bmm`` with the values) becomes ``torchedge_fused::attention``'s kernel;
* **recurrent cells** (`recurrent`): an unrolled ``nn.LSTM`` / ``nn.GRU`` timestep (the hidden
  projection, the gates' split, sigmoids, tanhs, products and sums) becomes
  ``torchedge_fused::lstm_cell`` / ``gru_cell``'s kernel;
* **inverted residual blocks** (`convolutions`): a 1x1 expansion, a depthwise convolution and a
  1x1 projection (their paddings and clamps; ``convolution`` or ``conv_bn_act``) on small planes
  become `inverted_residual`'s channels-last kernel;
* **convolution blocks** (`convolutions`): zeros from a ``constant_pad_nd`` before a ``convolution``
  become its own padding, per side, and a clamp after it runs in place on its result;
* **linear layers** (`layers`): ``addmm`` / ``mm`` and ``relu``, exact ``gelu`` or silu become
  ``torchedge_fused::linear_act``'s kernel;
* **max pooling without indices** (`layers`): ``max_pool2d_with_indices`` /
  ``max_pool3d_with_indices`` whose indices nothing reads run `max_pool_values`;
* **chains of copies** (`copies`): consecutive ``permute_copy`` / plain copies, each reading
  only what the one before wrote, become one copy of a strided view wherever the reshapes
  between them are views.

A group is replaced only where the method's dataflow (`dataflow`) proves that nothing outside
it reads what the group's other steps wrote and that it reads its inputs before anything in it
overwrites them (`matching.replaceable`); its steps are consecutive (no-ops aside), every
kernel in it is the portable library's own (not a user's replacement), and a group matches only
the exact operator arguments the fused kernel computes. A result that memory planning placed
over one of the group's inputs goes through a scratch buffer. The fused step takes the first
step's place and the others become no-ops, so jump targets and instruction numbers stay put;
its label names the operators it replaced.
"""

from __future__ import annotations

from torchedge.errors import TorchEdgeError
from torchedge.kernels.registry import registering_module
from torchedge.runtime.fusion.attention import fused_attention
from torchedge.runtime.fusion.convolutions import CONVOLUTIONS, convolution_block, inverted_residual_block
from torchedge.runtime.fusion.copies import PERMUTE, copy_chain
from torchedge.runtime.fusion.dataflow import Dataflow
from torchedge.runtime.fusion.layers import LINEAR_ACTIVATIONS, linear_activation, max_pool_values_only
from torchedge.runtime.fusion.matching import PLAIN_COPIES
from torchedge.runtime.fusion.recurrent import RECURRENT_ANCHORS, recurrent_cell
from torchedge.runtime.steps import KERNEL, NOP, Step

__all__ = ["Dataflow", "fuse_steps"]


def fuse_steps(flow: Dataflow) -> list[Step]:
    """The steps of ``flow``'s method with every group it can prove safe replaced by a fused step."""
    steps = list(flow.steps)
    taken: set[int] = set()
    for labels, rule in _RULES:  # the larger groups first: attention's copies are its own
        for pc, step in enumerate(flow.steps):
            if step.kind != KERNEL or step.label not in labels or pc in taken or not _portable(step.label):
                continue
            try:
                found = rule(flow, pc)
            except (TorchEdgeError, TypeError, ValueError, AttributeError, IndexError):
                continue  # arguments no rule expects (a malformed program): run as written, its kernels judge them
            for group, fused in found:
                if taken.intersection(group) or not all(_portable(flow.steps[i].label) for i in group):
                    continue
                taken.update(group)
                first = min(group)
                for i in group:
                    steps[i] = Step(NOP, label=f"{flow.steps[i].label} (fused into instruction {first})")
                steps[first] = fused
    return steps


def _portable(label: str) -> bool:
    return registering_module(label).startswith("torchedge.kernels.portable.")


# (anchor operators, rule): each rule tries the steps of its operators, the rules in this order.
_RULES = [
    (("aten::bmm.out",), fused_attention),
    (RECURRENT_ANCHORS, recurrent_cell),
    (CONVOLUTIONS, inverted_residual_block),
    (("aten::convolution.out",), convolution_block),
    (tuple(LINEAR_ACTIVATIONS), linear_activation),
    (("aten::max_pool2d_with_indices.out", "aten::max_pool3d_with_indices.out"), max_pool_values_only),
    ((PERMUTE, *PLAIN_COPIES), copy_chain),
]
