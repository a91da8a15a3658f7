"""Choose fused kernels ahead of time: chains of core ATen operators become one torchedge operator.

Opt-in, for programs that run on torchedge's own runtime: the fused operators live in the
private ``torchedge_fused`` namespace, which the real ExecuTorch does not have, so a program
that uses them fails to load there naming the missing operator (and `to_executorch` refuses
it up front when ``ExecutorchBackendConfig(kernel_set=...)`` names an ExecuTorch build)::

    config = ExecutorchBackendConfig(passes=[FuseKernelsPass()])
    program = to_edge(exported).to_executorch(config)

Five fusions (all but ``copies`` for float32 and float64 only), all on by default, where they
pay:

* **attention**: the math decomposition of ``scaled_dot_product_attention`` (scale q and kᵀ,
  expand, bmm, add the mask, softmax, the safe-softmax masking of fully masked rows, expand,
  bmm: about 17 instructions and as many intermediate tensors) becomes
  ``torchedge_fused::attention(q, k, v, mask, scale)``; where q, k and v come from (..., S, H, D)
  projections through permutes only it reads, and its result goes straight back the same way
  (once the copies fusion has collapsed the chains there), ``attention_interleaved`` reads and
  writes that layout in place and the four copies go.
* **conv_bn_act**: ``constant_pad_nd`` (zeros) before and a ``relu``, ``hardtanh`` or ``clamp``
  after a convolution fold into ``torchedge_fused::conv_bn_act``: the padding into the
  convolution's own (any amount per side), the clamp into a pass over its output (batch norms
  are folded into constant weights before, by `conv_folding`).
* **linear_act**: ``addmm`` / ``mm`` followed (through a reshape) by ``relu``, ``gelu``
  (exact) or ``silu`` (also as ``x * sigmoid(x)``, core ATen's form) becomes
  ``torchedge_fused::linear_act``: the activation runs in place on the product, while it is
  still in the cache, instead of reading it back from memory into a buffer of its own (the
  transformer models and the mlp gain end to end: see `benchmarks/`).
* **recurrent**: each unrolled ``nn.LSTM`` / ``nn.GRU`` timestep (the step's input slice, the
  hidden projection, a split, sigmoids, tanhs, products and sums: about sixteen kernels on a
  few hundred elements) becomes ``torchedge_fused::lstm_cell`` / ``gru_cell``, bit-identical
  to the chain.
* **copies**: a chain of ``permute_copy``, ``clone`` and same-shape ``view_copy`` nodes, each
  feeding only the next (the head moves around attention), becomes one ``permute_copy`` of the
  composed permutation, and a ``clone`` of a fresh value nothing else reads is dropped
  (`collapse_copies`): the same elements, one copy instead of several.

Each fused operator has an out variant, so `OutVariantPass`, memory planning and the emitter
treat it like any other operator; the operators are defined in `fused_operators`. The
attention, convolution, linear and recurrent rules are written once in `torchedge.fusion.rules`
(applied here by `fusion_matching.apply_rule`, each group's last node first, and at load by
`torchedge.runtime.fusion`); copies have their pass (`collapse_copies`), and `fuse_attention`'s
`interleave_heads` moves attention's heads.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from torchedge.exir.pass_base import PassBase, PassResult
from torchedge.exir.passes.collapse_copies import COPIES, collapse_copies
from torchedge.exir.passes.fuse_attention import interleave_heads
from torchedge.exir.passes.fused_operators import fused_ops
from torchedge.exir.passes.fusion_matching import FxGraph, apply_rule
from torchedge.fusion.options import FusionOptions
from torchedge.fusion.rules import RULES

__all__ = ["FuseKernelsPass", "fusion_passes"]

FX = FxGraph()


class FuseKernelsPass(PassBase):
    """Replace operator chains by torchedge's fused kernels (see the module docstring).

    ``attention``, ``conv``, ``linear``, ``recurrent`` and ``copies`` switch each fusion on or off;
    ``disabled`` names rules of `torchedge.fusion.rules.RULES` not to apply, as at load.
    """

    def __init__(
        self,
        attention: bool = True,
        conv: bool = True,
        linear: bool = True,
        recurrent: bool = True,
        copies: bool = True,
        disabled: Iterable[str] = (),
    ):
        super().__init__()
        self.attention, self.conv, self.linear, self.recurrent = attention, conv, linear, recurrent
        self.copies = copies
        names = frozenset([disabled] if isinstance(disabled, str) else disabled)
        self.disabled = FusionOptions("all", names).disabled  # (checks the names)

    def _on(self, rule) -> bool:
        """Whether the switches leave the rule ``rule`` on (``attention``: every attention rule;
        ``linear``, ``conv``, ``recurrent``: the linear, convolution and recurrent rules)."""
        family = {
            "attention": self.attention,
            "linear": self.linear,
            "convolution": self.conv,
            "recurrent": self.recurrent,
        }
        return rule.name not in self.disabled and next((on for n, on in family.items() if n in rule.name), True)

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        ops = fused_ops()
        graph = graph_module.graph
        modified = False
        rules = [r for r in RULES if r.arguments is not None and "aot" in r.stages and self._on(r)]
        for node in reversed(list(graph.nodes)):  # a group's root first: its last node
            if node._erased or node.op != "call_function":
                continue  # erased by an earlier fusion
            for rule in rules:
                if FX.operator(node) in rule.anchors and apply_rule(graph, rule, node, ops):
                    modified = True
                    break
        for node in list(graph.nodes):
            if self.copies and not node._erased and node.op == "call_function" and node.target in COPIES:
                modified |= collapse_copies(graph, node)
        for node in list(graph.nodes):
            if self.attention and not node._erased and node.target is ops["attention"]:
                modified |= interleave_heads(graph, node, ops)
        if modified:
            graph.lint()
        return PassResult(graph_module, modified)


def fusion_passes(config) -> list:
    """The fusion passes `to_executorch` runs for ``config``: `FuseKernelsPass` when the config
    asks for fused kernels (``fuse_kernels=True``) and targets torchedge's own runtime."""
    if config.fuse_kernels and config.kernel_set is None:
        return [FuseKernelsPass()]
    return []
