"""Draw a memory plan with matplotlib (``pip install 'torchedge[plot]'``).

One figure per planned memory id: instructions left to right (a tensor's bar spans its
lifetime, from the instruction that first names it to the last), byte offsets bottom to
top, one colour per lifetime class (method input, output, mutable state, intermediate), each
bar named by what owns it (`block_label`), and a dashed line at the plan's lower bound (the most
bytes live at once).
"""

from __future__ import annotations

from torchedge.runtime.memory_report import MemoryUsage, PlannedTensor
from torchedge.schema.program import DelegateCall, KernelCall, Tensor

__all__ = ["LIFETIME_CLASSES", "lifetime_class", "block_label", "draw_plan", "save_plan"]

# Class -> colour (matplotlib's colour-blind-safe "tab" palette).
LIFETIME_CLASSES = {
    "input": "tab:blue",
    "output": "tab:orange",
    "input and output": "tab:purple",
    "mutable state": "tab:red",
    "intermediate": "tab:green",
}


def lifetime_class(tensor: PlannedTensor, plan, num_instructions: int) -> str:
    """Which of `LIFETIME_CLASSES` a planned tensor belongs to."""
    value = plan.values[tensor.value_index].val
    info = value.extra_tensor_info if isinstance(value, Tensor) else None
    if isinstance(value, Tensor) and (value.data_buffer_idx > 0 or (info is not None and info.fully_qualified_name)):
        return "mutable state"
    is_input, is_output = tensor.start == -1, tensor.end == num_instructions
    if is_input and is_output:
        return "input and output"
    return "input" if is_input else "output" if is_output else "intermediate"


def block_label(tensor: PlannedTensor, plan) -> str:
    """What owns a planned tensor: ``input 0``, a mutable buffer's name, or the operator (or
    delegate) of the first instruction naming it, which writes it; ``vN`` is its value index."""
    value = plan.values[tensor.value_index].val
    info = value.extra_tensor_info if isinstance(value, Tensor) else None
    if info is not None and info.fully_qualified_name:
        return info.fully_qualified_name
    inputs = list(plan.inputs or [])
    if tensor.start == -1 and tensor.value_index in inputs:
        return f"input {inputs.index(tensor.value_index)}"
    instructions = plan.chains[0].instructions if plan.chains else []
    if 0 <= tensor.start < len(instructions):
        args = instructions[tensor.start].instr_args
        if isinstance(args, KernelCall):
            op = plan.operators[args.op_index]
            return f"v{tensor.value_index} {op.name.split('::')[-1]}"
        if isinstance(args, DelegateCall):
            return f"v{tensor.value_index} {plan.delegates[args.delegate_index].id}"
    return f"v{tensor.value_index}"


def _unit(size: int) -> tuple[str, int]:
    for name, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= 4 * scale:
            return name, scale
    return "bytes", 1


def draw_plan(plan, usage: MemoryUsage):
    """A matplotlib `Figure` of one memory id of one method's plan."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    instructions = len(plan.chains[0].instructions) if plan.chains else 0
    unit, scale = _unit(max(usage.size, 1))
    figure = Figure(figsize=(10, 5), dpi=100, layout="constrained")
    axes = figure.add_subplot()
    seen: list[str] = []
    for tensor in usage.tensors:
        kind = lifetime_class(tensor, plan, instructions)
        seen.append(kind)
        bar = axes.add_patch(_rectangle(tensor, scale, LIFETIME_CLASSES[kind]))
        _name(axes, bar, block_label(tensor, plan))
    bound = axes.axhline(usage.lower_bound / scale, color="black", linestyle="--", linewidth=1)
    bound.set_label("lower bound (most bytes live at once)")
    axes.set_xlim(-1.5, instructions + 0.5)
    axes.set_ylim(0, max(usage.size, 1) / scale)
    axes.set_xlabel("instruction (-1: inputs before the first; last: outputs after the method)")
    axes.set_ylabel(f"offset in memory id {usage.mem_id} ({unit})")
    axes.set_title(  # two short lines: one would run past the figure beside the legend
        f"method '{plan.name}', memory id {usage.mem_id}\n{usage.size:,} bytes planned, "
        f"lower bound {usage.lower_bound:,} ({usage.utilisation:.0%} utilised)",
        fontsize="medium",
    )
    classes = [kind for kind in LIFETIME_CLASSES if kind in seen]
    handles = [Patch(facecolor=LIFETIME_CLASSES[kind], edgecolor="black", label=kind) for kind in classes]
    axes.legend(handles=[*handles, bound], loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    return figure


def _name(axes, bar, label: str) -> None:
    """``label`` at the middle of ``bar``, clipped to it (a thin bar shows what fits)."""
    x, y = bar.get_x() + bar.get_width() / 2, bar.get_y() + bar.get_height() / 2
    text = axes.text(x, y, label, ha="center", va="center", fontsize="x-small", clip_on=True)
    text.set_clip_path(bar)


def _rectangle(tensor: PlannedTensor, scale: int, color: str):
    from matplotlib.patches import Rectangle

    start, end = tensor.start, tensor.end
    return Rectangle(
        (start - 0.5, tensor.offset / scale),
        end - start + 1,
        max(tensor.nbytes, 1) / scale,
        facecolor=color,
        edgecolor="black",
        linewidth=0.5,
        alpha=0.85,
    )


def save_plan(plan, usage: MemoryUsage, path) -> None:
    """Draw one memory id's plan into a PNG file."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    figure = draw_plan(plan, usage)
    FigureCanvasAgg(figure).print_png(path)
