"""Example inputs for ``torch.export`` with ``--dynamic`` dimensions: checked against the inputs and
resized into their ranges."""

from __future__ import annotations

from torchedge.errors import ExportError

__all__ = ["dynamic_example"]


def _check_dynamic(dynamic: list, inputs: list) -> None:
    """Every ``--dynamic`` names an input the model takes and a dimension that input has."""
    for d in dynamic:
        spec = f"--dynamic {d.input}:{d.dim}:{d.min}:{d.max}"
        if d.input >= len(inputs):
            raise ExportError(f"{spec}: no input {d.input}, the model takes {len(inputs)} input(s)")
        shape = getattr(inputs[d.input], "shape", None)
        if shape is None:
            raise ExportError(f"{spec}: input {d.input} is a {type(inputs[d.input]).__name__}, not a tensor")
        if d.dim >= len(shape):
            raise ExportError(
                f"{spec}: input {d.input} has {len(shape)} dimension(s) (shape {list(shape)}), no dimension {d.dim}"
            )


def dynamic_example(dynamic: list, inputs) -> tuple:
    """``inputs`` with each ``--dynamic`` dimension resized into its range (torch.export traces one
    size in range and specialises sizes 0 and 1); a dimension the inputs lack is an `ExportError`."""
    from torchedge.devtools.dynamic_inputs import resize_along

    inputs = list(inputs)
    _check_dynamic(dynamic, inputs)
    for d in dynamic:
        example = inputs[d.input].shape[d.dim]
        if not max(d.min, 2) <= example <= d.max:
            inputs[d.input] = resize_along(inputs[d.input], d.dim, min(max(d.min, 2), d.max))
    return tuple(inputs)
