"""Load-time fusion of recurrent cells: an unrolled LSTM or GRU timestep runs as
``torchedge_fused::lstm_cell`` / ``gru_cell``'s kernel.

``torch.export`` writes each timestep of ``nn.LSTM`` as the hidden projection (``addmm``), its
``add`` to the step's input gates, a ``split_with_sizes_copy`` in four, three sigmoids, two tanhs
and the products and sums of the new cell and hidden state; ``nn.GRU`` as a split of the step's
input gates, the hidden projection and its split in three, two sigmoid gates, the ``tanh``
candidate and the interpolation ``(hidden - n) * z + n``: about fifteen kernels on a few hundred
values each, where calling them costs more than their arithmetic. The fused kernels run the same
operations in the same order (`torchedge.kernels.optimized.fused_recurrent`), so the results have
the same bits. A first step whose hidden projection constant folding already computed fuses
without the projection (LSTM) or stays as written (GRU: its three gates are separate
constants). The steps' slices of the layer's input projection (one GEMM over all steps) come
long before the cells and stay: memory planning reuses the projection's rows, and most slices',
before the cells read them.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchedge.kernels.optimized.fused import FLOATS
from torchedge.kernels.optimized.fused_recurrent import gru_step, lstm_step
from torchedge.kernels.registry import output_shapes
from torchedge.runtime.fusion.dataflow import Dataflow
from torchedge.runtime.fusion.matching import labelled_producer, replaceable, value_of
from torchedge.runtime.steps import KERNEL, Step

__all__ = ["RECURRENT_ANCHORS", "recurrent_cell"]

_SPLITS = ("aten::split_with_sizes_copy.out", "aten::split_copy.Tensor_out")
_SIGMOID, _TANH, _MUL, _ADD, _SUB = (f"aten::{op}.out" for op in ("sigmoid", "tanh", "mul", "add", "sub"))
RECURRENT_ANCHORS = (_MUL, _ADD)  # an LSTM step ends in a product (its new hidden state), a GRU step in a sum


def recurrent_cell(flow: Dataflow, pc: int):
    """The LSTM step whose new hidden state ``mul`` ``pc`` writes, or the GRU step whose ``add`` it is."""
    return _lstm(flow, pc) if flow.steps[pc].label == _MUL else _gru(flow, pc)


def _operands(flow: Dataflow, pc: int | None, first, second) -> tuple[int, int] | None:
    """The producers of a two-operand step's operands, labelled ``first`` and ``second`` (one
    label or a tuple) in either order (a ``sub`` in its own order); with ``second`` None, the
    producer of the ``first`` operand and the other operand's value index. An ``add`` or ``sub``
    must have ``alpha`` 1."""
    if pc is None:
        return None
    step = flow.steps[pc]
    if step.label in (_ADD, _SUB) and value_of(flow, step.args[2]) != 1:
        return None
    for a, b in ((0, 1),) if step.label == _SUB else ((0, 1), (1, 0)):
        p = labelled_producer(flow, pc, a, first)
        if p is None:
            continue
        if second is None:
            return p, step.args[b]
        q = labelled_producer(flow, pc, b, second)
        if q is not None:
            return p, q
    return None


def _chunks(flow: Dataflow, split: int, count: int) -> list[int] | None:
    """The value indices of split ``split``'s results when it cuts its input's last dim into
    ``count`` equal chunks."""
    source, sizes, dim, out = (value_of(flow, i) for i in flow.steps[split].args)
    width = source.shape[-1] if source.ndim else 0
    sizes = [sizes] * count if isinstance(sizes, int) else list(sizes)  # split_copy's one size, or each chunk's
    if width % count or sizes != [width // count] * count or dim not in (-1, source.ndim - 1):
        return None
    items = list(flow.values.schema[flow.steps[split].args[3]].items)
    return items if len(items) == count and len(out) == count else None


def _reads(flow: Dataflow, pc: int, split: int, chunk: int) -> bool:
    """Whether step ``pc`` reads the split's result ``chunk`` as one of its two operands."""
    return any(arg == chunk and flow.producer(pc, arg) == split for arg in flow.steps[pc].args[:2])


def _projection(flow: Dataflow, pc: int, position: int) -> int | None:
    """The ``addmm(bias, hidden, weight)`` (beta and alpha 1, a 1-d bias) that wrote argument
    ``position`` of ``pc``."""
    product = labelled_producer(flow, pc, position, "aten::addmm.out")
    if product is None:
        return None
    bias, _, _, beta, alpha, _ = (value_of(flow, i) for i in flow.steps[product].args)
    return product if beta == 1 and alpha == 1 and bias.ndim == 1 else None


def _lstm(flow: Dataflow, pc: int):
    """``σ(o) * tanh(σ(f) * cell + σ(i) * tanh(g))`` back to the split of ``hidden gates + input gates``."""
    outer = _operands(flow, pc, _SIGMOID, _TANH)
    if outer is None:
        return []
    output_gate, cell_tanh = outer
    new_cell = labelled_producer(flow, cell_tanh, 0, _ADD)
    products = _operands(flow, new_cell, _MUL, _MUL)
    if new_cell is None or products is None:
        return []
    for forget_mul, input_mul in (products, products[::-1]):
        candidate, forget = _operands(flow, input_mul, _SIGMOID, _TANH), _operands(flow, forget_mul, _SIGMOID, None)
        if candidate is not None and forget is not None:
            break
    else:
        return []
    split = labelled_producer(flow, output_gate, 0, _SPLITS)
    chunks = None if split is None else _chunks(flow, split, 4)
    activations = (candidate[0], forget[0], candidate[1], output_gate)  # i, f, g, o
    if split is None or chunks is None or not all(_reads(flow, a, split, c) for a, c in zip(activations, chunks)):
        return []
    gates = labelled_producer(flow, split, 0, _ADD)
    if gates is None or value_of(flow, flow.steps[gates].args[2]) != 1:
        return []
    group = {pc, *outer, new_cell, *products, *candidate, forget[0], split, gates}
    sums = flow.steps[gates].args[:2]
    # with both sums projections (an ``nn.LSTMCell`` projects its input each step), the later one,
    # next to the cell: the other ran before the group (which one is the state's does not matter)
    product = max((p for p in (_projection(flow, gates, i) for i in (0, 1)) if p is not None), default=None)
    side = 0 if product is None or flow.producer(gates, sums[0]) == product else 1
    reads = [(gates, sums[1 - side]), (gates, sums[side]), (forget_mul, forget[1])]  # input gates, hidden gates, cell
    if product is not None:
        group.add(product)
        bias, hidden, weight = flow.steps[product].args[:3]
        reads[1:2] = [(product, bias)]
        reads += [(product, hidden), (product, weight)]
    outputs = [(pc, flow.steps[pc].args[-1]), (new_cell, flow.steps[new_cell].args[-1])]
    return _fused(flow, group, "lstm_cell", reads, outputs)


def _gru(flow: Dataflow, pc: int):
    """``(hidden - n) * z + n`` with ``n = tanh(x_n + h_n * r)``, ``r`` and ``z`` the sigmoids of
    ``h_r + x_r`` and ``h_z + x_z``, back to the splits of the hidden and the input gates."""
    ends = _operands(flow, pc, _MUL, _TANH)
    parts = None if ends is None else _operands(flow, ends[0], _SUB, _SIGMOID)
    if ends is None or parts is None:
        return []
    (interpolated, candidate), (difference, update) = ends, parts
    hidden, subtracted, alpha, _ = flow.steps[difference].args
    if value_of(flow, alpha) != 1 or flow.producer(difference, subtracted) != candidate:
        return []
    candidate_add = labelled_producer(flow, candidate, 0, _ADD)
    gated_and_x = _operands(flow, candidate_add, _MUL, None)
    gated = None if gated_and_x is None else _operands(flow, gated_and_x[0], _SPLITS, _SIGMOID)
    if candidate_add is None or gated_and_x is None or gated is None:
        return []
    hidden_split, reset = gated
    reset_add, update_add = labelled_producer(flow, reset, 0, _ADD), labelled_producer(flow, update, 0, _ADD)
    resets, updates = _operands(flow, reset_add, _SPLITS, _SPLITS), _operands(flow, update_add, _SPLITS, _SPLITS)
    if reset_add is None or update_add is None or resets is None or updates is None or hidden_split not in resets:
        return []
    input_split = resets[1] if resets[0] == hidden_split else resets[0]
    h, x = _chunks(flow, hidden_split, 3), _chunks(flow, input_split, 3)
    if h is None or x is None or input_split == hidden_split or set(updates) != {hidden_split, input_split}:
        return []
    roles = [(reset_add, hidden_split, h[0]), (reset_add, input_split, x[0]), (update_add, hidden_split, h[1])]
    roles += [(update_add, input_split, x[1]), (gated_and_x[0], hidden_split, h[2]), (candidate_add, input_split, x[2])]
    if not all(_reads(flow, *role) for role in roles):
        return []
    group = {pc, interpolated, candidate, difference, update, candidate_add, gated_and_x[0], reset}
    group |= {hidden_split, input_split, reset_add, update_add}
    reads = [(input_split, flow.steps[input_split].args[0]), (hidden_split, flow.steps[hidden_split].args[0])]
    reads.append((difference, hidden))
    product = _projection(flow, hidden_split, 0)
    if product is not None and flow.same_bytes(flow.steps[product].args[1], hidden):
        group.add(product)  # the projected state is the one carried on
        bias, projected, weight = flow.steps[product].args[:3]
        reads[1:2] = [(product, bias)]
        reads += [(product, weight), (product, projected)]
    return _fused(flow, group, "gru_cell", reads, [(pc, flow.steps[pc].args[-1])])


def _fused(flow: Dataflow, group: set[int], name: str, reads: list, outputs: list):
    """One step running the ``name`` kernel on ``reads`` (input gates, hidden gates, the state
    and, with a projection, the projected hidden state and its weight) into ``outputs``, once the
    group is proved replaceable and the kernel's shape function gives the outputs' shapes."""
    inputs, results = [value for _, value in reads], [value for _, value in outputs]
    arrays = [value_of(flow, i) for i in inputs + results]
    written = [value_of(flow, w.value) for pc in group for w in flow.writes[pc]]  # intermediates too
    if {a.dtype for a in arrays + written} != {arrays[0].dtype} or arrays[0].dtype not in FLOATS:
        return []
    if not replaceable(flow, group, outputs, reads):
        return []
    cell = _Cell(name, len(inputs) > 3, arrays[0].shape[-1] // (4 if name == "lstm_cell" else 3))
    shapes = output_shapes(f"torchedge_fused::{name}.out", list(cell.arguments(arrays)))
    if [tuple(s) for s in shapes] != [a.shape for a in arrays[len(inputs) :]]:
        return []  # (the shape function also checks what the kernel checks of its arguments)
    # No scratch memory where planning put an output over an input: the kernels read every input
    # but the state before they write anything, and the state only in the one ufunc call that
    # writes their first output (NumPy copies an input that overlaps the output of its call).
    label = f"torchedge_fused::{name}.out (fused at load)"
    return [(group, Step(KERNEL, cell, tuple(inputs + results), results[0], label))]


@dataclass(frozen=True, eq=False)
class _Cell:
    """The fused step's call: its arguments are the group's inputs (see `_fused`), then its
    outputs; the kernel's checks ran at load, so each run goes straight to its arithmetic."""

    name: str
    projected: bool  # the hidden state and its weight are among the inputs
    size: int  # the hidden size

    def arguments(self, arrays) -> tuple:
        """The kernel's arguments (the step index -1: the input gates are the step's own)."""
        if self.name == "lstm_cell":
            gates_and_cell, outs = arrays[:3], arrays[-2:]
            hidden, weight = arrays[3:5] if self.projected else (None, None)
            return (*gates_and_cell, hidden, weight, -1, *outs)
        return (*arrays[:3], arrays[3] if self.projected else None, -1, arrays[-1])

    def __call__(self, *arrays) -> None:
        arithmetic = lstm_step if self.name == "lstm_cell" else gru_step
        arithmetic(*self.arguments(arrays), size=self.size)
