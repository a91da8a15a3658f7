"""Load-time fusion: a loaded program's instruction groups run as torchedge's fused kernels.

A `.pte` made for ExecuTorch holds core ATen operators only: attention as seventeen
instructions, activations and paddings as instructions of their own, max pooling that writes
indices nobody reads, heads moved by four copies. `fuse_steps` finds such groups in a loaded
method's compiled steps and replaces each by one step, so the same file runs portable in
ExecuTorch and fused here, with no ``fuse_kernels=True`` program to make and ship.

Which rules run is `torchedge.fusion.FusionOptions`' choice (a level, rules switched off by
name); the rules of `torchedge.fusion.rules` (patterns, and matchers for what a pattern cannot
write) are applied by `patterns`, each under its rule's name:

* **attention** (rules `attention`, exact, and `fast_attention`, level ``all``): the math
  decomposition of ``scaled_dot_product_attention`` (q and kᵀ scaled, plain copies, ``bmm``, the
  additive mask, ``_softmax``, the safe-softmax masking of fully masked rows, ``bmm`` with the
  values) becomes ``torchedge_fused::attention_exact``'s kernel (the same bits) or, at level
  ``all``, ``torchedge_fused::attention``'s (faster, within the bound its rule states); the
  masking steps alone, where attention's products run in delegates (`safe_softmax_rows`),
  become ``torchedge_fused::safe_softmax_rows``'s kernel;
* **recurrent cells** (`recurrent`): an unrolled ``nn.LSTM`` / ``nn.GRU`` timestep (the hidden
  projection, the gates' split, sigmoids, tanhs, products and sums) becomes
  ``torchedge_fused::lstm_cell`` / ``gru_cell``'s kernel;
* **inverted residual blocks** (`inverted_residual`, level ``all``): a 1x1 expansion, a depthwise convolution
  and a 1x1 projection (their paddings and clamps; ``convolution`` or ``conv_bn_act``) on small
  planes become ``torchedge_fused::inverted_residual``'s channels-last kernel;
* **convolution blocks** (`convolution_block`): zeros from a ``constant_pad_nd`` before a ``convolution``
  become its own padding, per side, and a clamp after it runs in place on its result
  (``torchedge_fused::conv_bn_act``'s kernel);
* **linear layers** (``linear_act``, and ``linear_silu`` at level ``all``): ``addmm`` /
  ``mm`` and ``relu``, exact ``gelu`` or silu become ``torchedge_fused::linear_act``'s kernel;
* **max pooling without indices** (`max_pool_values`): ``max_pool2d_with_indices`` /
  ``max_pool3d_with_indices`` whose indices nothing reads run ``torchedge_fused::max_pool_values``;
* **chains of copies** (`copy_chain`): consecutive ``permute_copy`` / plain copies, each reading
  only what the one before wrote, become one copy of a strided view
  (``torchedge_fused::strided_copy``) wherever the reshapes between them are views.

After the rules, identity copies that none took go where the step that wrote their source can
write their destination itself (`copy_elision`).

A group is replaced only where the method's dataflow (`dataflow`) proves that nothing outside it
reads what the group's other steps wrote and that it reads its inputs before anything in it
overwrites them (`matching.replaceable`); its steps are consecutive (no-ops aside), every kernel
in it is one of torchedge's own (not a user's replacement), and a group matches only the exact
operator arguments the fused kernel computes. A result that memory planning placed over one of
the group's inputs goes through a scratch buffer (unless the fused kernel reads that input in
full first: the rule's ``reads_first``). Rules match each group from its last step, the
latest groups first. The fused step takes the first step's place and the others become no-ops,
so jump targets and instruction numbers stay put; its label names the operators it replaced. A
rule that raises is a bug and its error propagates: a rule that does not apply declines by
returning no group.
"""

from __future__ import annotations

from torchedge.fusion.options import FusionOptions
from torchedge.kernels.registry import registering_module
from torchedge.runtime.fusion.copy_elision import PLAIN_COPIES, elide_copies
from torchedge.runtime.fusion.dataflow import Dataflow
from torchedge.runtime.fusion.patterns import pattern_rule
from torchedge.runtime.steps import KERNEL, NOP, Step

__all__ = ["Dataflow", "FusionOptions", "fuse_steps", "replaced_instructions"]


def fuse_steps(flow: Dataflow, options: FusionOptions | None = None) -> list[Step]:
    """The steps of ``flow``'s method with every group it can prove safe replaced by a fused step,
    by the rules ``options`` enables (default: `FusionOptions()`)."""
    steps = list(flow.steps)
    taken: set[int] = set()
    for rule in (options or FusionOptions()).rules():  # the larger groups first: attention's copies are its own
        if "load" not in rule.stages:
            continue
        anchors, apply = rule.anchors, pattern_rule(rule)
        for pc in reversed(range(len(steps))):  # a group's root first: its last step
            step = flow.steps[pc]
            if step.kind != KERNEL or pc in taken or not _anchored(step.label, anchors) or not _portable(step.label):
                continue
            for group, fused in apply(flow, pc):
                if taken.intersection(group) or not all(_portable(flow.steps[i].label) for i in group):
                    continue
                taken.update(group)
                first = min(group)
                for i in group:
                    steps[i] = Step(NOP, label=f"{flow.steps[i].label} (fused into instruction {first} by {rule.name})")
                steps[first] = fused
    if any(step.kind == KERNEL and step.label in PLAIN_COPIES for step in steps):
        return elide_copies(flow.of(steps))
    return steps


def replaced_instructions(steps: list[Step]) -> dict[int, tuple[str, list[int]]]:
    """For each fused step of ``steps`` (from `fuse_steps`): the name of its rule and the
    instructions it runs in their place (itself first)."""
    replaced: dict[int, tuple[str, list[int]]] = {}
    for pc, step in enumerate(steps):
        if step.kind == NOP and step.label.endswith(")") and " (fused into instruction " in step.label:
            first, _, rule = step.label.rsplit(" (fused into instruction ", 1)[1][:-1].partition(" by ")
            replaced.setdefault(int(first), (rule, [int(first)]))[1].append(pc)
    return replaced


def _portable(label: str) -> bool:
    """Whether ``label``'s kernel is one of torchedge's own (not a user's replacement)."""
    return registering_module(label).startswith("torchedge.kernels.")


def _anchored(label: str, anchors) -> bool:
    return label in anchors or label.split(".", 1)[0] in anchors
