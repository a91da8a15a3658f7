"""``POST /v1/run``: a method's inputs from a request body, its outputs back as JSON or ``.npz``.

Inputs, in one of three bodies:

* JSON ``{"method": "forward", "inputs": [...]}``: ``inputs`` a list (positional) or an object
  naming them ``input_0``, ``input_1``, ... (the names `torchedge run --inputs` reads from an
  ``.npz``); each input a nested list of numbers (cast to the method's dtype for that input) or a
  number for a scalar input;
* an ``.npy`` file (one input) or an ``.npz`` file (arrays ``input_0``, ... or np.savez's
  ``arr_0``, ...), the method in the query (``?method=forward``); arrays keep their dtype, which
  must be the method's.

Outputs: ``{"method", "outputs": [{"name": "output_0", "dtype", "shape", "data"}, ...]}``, or an
``.npz`` (``output_0``, ...) when the request asks for ``application/x-npz`` (``Accept`` header or
``?format=npz``). Shapes are checked against the method's signature before it runs.
"""

from __future__ import annotations

import io
import json
import re
import zipfile

import numpy as np

from torchedge.generation.serving.protocol import APIError, bad, parse_json

__all__ = ["decode_inputs", "encode_outputs_json", "encode_outputs_npz", "check_inputs"]

_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = b"PK\x03\x04"


def decode_inputs(body: bytes, content_type: str, query_method: str | None) -> tuple[str, list | dict]:
    """(method name, inputs as a list or a {name: value} dict) from a request body."""
    kind = content_type.split(";")[0].strip().lower()
    if body.startswith(_NPY_MAGIC) or body.startswith(_ZIP_MAGIC) or kind in ("application/x-npy", "application/x-npz"):
        return query_method or "forward", _read_numpy(body)
    if kind not in ("", "application/json", "text/json") and not kind.endswith("+json"):
        raise APIError(
            415,
            f"unsupported Content-Type '{kind}': send JSON, an .npy or an .npz body",
            None,
            "unsupported_media_type",
        )
    request = parse_json(body)
    method = request.get("method", query_method or "forward")
    if not isinstance(method, str):
        raise bad("'method' must be a method name (a string)", "method")
    if "inputs" not in request:
        raise bad(
            "'inputs' is required: a list of arrays, or an object {input_0: ..., ...}",
            "inputs",
            "missing_required_parameter",
        )
    inputs = request["inputs"]
    if not isinstance(inputs, (list, dict)):
        raise bad("'inputs' must be a list of arrays, or an object {input_0: ..., ...}", "inputs")
    return method, inputs


def _read_numpy(body: bytes) -> list | dict:
    try:
        data = np.load(io.BytesIO(body), allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        raise bad(f"the body is not a readable .npy or .npz file: {e}", "inputs", "invalid_array") from None
    if isinstance(data, np.ndarray):
        return [data]
    with data:
        return {name: data[name] for name in data.files}


def _order(inputs: list | dict, count: int) -> list[tuple[str, object]]:
    """(where, value) pairs in input order; names input_N (or arr_N) give the positions."""
    if isinstance(inputs, list):
        return [(f"inputs[{i}]", value) for i, value in enumerate(inputs)]
    named: dict[int, tuple[str, object]] = {}
    for name, value in inputs.items():
        match = re.fullmatch(r"(?:input_|arr_)(\d+)", name)
        if match is None:
            raise bad(f"input '{name}' is not named input_0 ... input_{count - 1}", f"inputs.{name}")
        position = int(match.group(1))
        if position in named:
            raise bad(f"input {position} is given twice", f"inputs.{name}")
        named[position] = (f"inputs.{name}", value)
    missing = [f"input_{i}" for i in range(len(named)) if i not in named]
    if missing:
        raise bad(f"missing input(s) {', '.join(missing)}", "inputs")
    return [named[i] for i in sorted(named)]


def check_inputs(inputs: list | dict, meta) -> list:
    """The method's inputs, each checked against ``meta`` (a `MethodMeta`): count, dtype, shape."""
    expected = list(meta.inputs)
    ordered = _order(inputs, len(expected))
    if len(ordered) != len(expected):
        raise bad(
            f"method '{meta.name}' takes {len(expected)} input(s), got {len(ordered)}", "inputs", "wrong_input_count"
        )
    return [_check_one(where, value, want, meta.name) for (where, value), want in zip(ordered, expected)]


def _check_one(where: str, value, want, method: str):
    if not hasattr(want, "shape"):  # a scalar input: want is its Python type (int, float, bool)
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value.item()
        if isinstance(value, (list, dict, str)) or value is None:
            raise bad(f"{where}: method '{method}' takes a {want.__name__} scalar here", where, "wrong_input_type")
        return value
    dtype = np.dtype(want.dtype)
    if isinstance(value, np.ndarray):
        array = value
        if array.dtype != dtype:
            raise bad(f"{where}: expected a {dtype} array, got {array.dtype}", where, "wrong_dtype")
    else:
        try:
            raw = np.asarray(value)
        except ValueError as e:  # ragged nested lists
            raise bad(f"{where}: not a rectangular array of numbers ({e})", where, "invalid_array") from None
        if raw.dtype.kind not in "biuf":
            raise bad(f"{where}: expected numbers for a {dtype} tensor, got {raw.dtype} values", where, "invalid_array")
        if dtype.kind in "iu" and raw.dtype.kind == "f" and not np.all(np.mod(raw, 1) == 0):
            raise bad(f"{where}: expected integers for a {dtype} tensor, got fractions", where, "wrong_dtype")
        array = raw.astype(dtype)
    shape, bound = tuple(array.shape), tuple(want.shape)
    lowest = tuple(getattr(want, "min_shape", None) or (0,) * len(bound))
    fits = len(shape) == len(bound) and (
        shape == bound if not want.dynamic else all(lo <= s <= hi for s, lo, hi in zip(shape, lowest, bound))
    )
    if not fits:
        what = f"shape {list(bound)}" if not want.dynamic else f"a shape within {list(lowest)} .. {list(bound)}"
        raise bad(f"{where}: method '{method}' expects {what}, got {list(shape)}", where, "wrong_shape")
    return np.ascontiguousarray(array)


def _plain(output) -> np.ndarray:
    """A NumPy array of a standard dtype (bfloat16 and the other ml_dtypes floats widened to float32)."""
    array = np.asarray(output)
    if array.dtype.kind == "V" or array.dtype.type.__module__.startswith("ml_dtypes"):
        array = array.astype(np.float32)
    return array


def encode_outputs_json(method: str, outputs: list) -> bytes:
    items = []
    for i, output in enumerate(outputs):
        array = _plain(output)
        items.append(
            {"name": f"output_{i}", "dtype": str(array.dtype), "shape": list(array.shape), "data": array.tolist()}
        )
    return json.dumps({"method": method, "outputs": items}, allow_nan=True).encode()


def encode_outputs_npz(outputs: list) -> bytes:
    buffer = io.BytesIO()
    arrays = {f"output_{i}": _plain(output) for i, output in enumerate(outputs)}
    np.savez(buffer, **arrays)  # type: ignore[arg-type]  # numpy's stub takes allow_pickle for **kwds
    return buffer.getvalue()
