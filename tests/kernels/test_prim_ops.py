"""Primitive operators: symbolic-size arithmetic and et_view."""

import math
import operator

import numpy as np
import pytest

from torchedge.errors import KernelError
from torchedge.kernels.registry import get_kernel


def call(op, *args):
    return get_kernel(op).fn(*args)


PAIRS = [(7, 2), (-7, 2), (7, -2), (6, 3), (7.5, 2), (-7.5, 2.0), (3, 0.5), (True, False)]


@pytest.mark.parametrize(
    "name,fn",
    [
        ("add", operator.add),
        ("sub", operator.sub),
        ("mul", operator.mul),
        ("eq", operator.eq),
        ("gt", operator.gt),
        ("lt", operator.lt),
        ("ge", operator.ge),
        ("le", operator.le),
        ("sym_max", max),
        ("sym_min", min),
        ("floordiv", operator.floordiv),
        ("truediv", operator.truediv),
    ],
)
def test_binary_scalar_ops_follow_python(name, fn):
    for a, b in PAIRS:
        if name in ("floordiv", "truediv") and b == 0:
            continue
        got = call(f"executorch_prim::{name}.Scalar", a, b)
        assert got == fn(a, b) and type(got) is type(fn(a, b)), (name, a, b, got)


def test_division_and_modulo_corner_cases():
    assert call("executorch_prim::mod.Scalar", -7, 3) == 2  # Python (sympy) semantics
    assert call("executorch_prim::truediv.Scalar", 1, 0) == math.inf
    assert math.isnan(call("executorch_prim::truediv.Scalar", 0, 0))
    assert call("executorch_prim::floordiv.Scalar", -3.0, 0) == -math.inf
    with pytest.raises(KernelError):
        call("executorch_prim::floordiv.Scalar", 3, 0)


def test_unary_scalar_ops():
    assert call("executorch_prim::neg.Scalar", 4) == -4
    assert call("executorch_prim::ceil.Scalar", 2.1) == 3
    assert call("executorch_prim::trunc.Scalar", -2.7) == -2
    assert call("executorch_prim::sym_float.Scalar", 3) == 3.0
    assert call("executorch_prim::sym_not.Scalar", True) is False
    assert call("executorch_prim::sym_ite.Scalar", False, 1, 2) == 2


def test_sizes():
    x = np.zeros((2, 3, 4), np.float32)
    assert call("aten::sym_size.int", x, 1) == 3
    assert call("aten::sym_size.int", x, -1) == 4
    assert call("aten::sym_numel", x) == 24
    assert call("aten::_local_scalar_dense", np.array([2.5])) == 2.5
    with pytest.raises(KernelError):
        call("aten::sym_size.int", x, 3)


def test_et_view_returns_a_view():
    base = np.arange(24, dtype=np.float32)
    out = np.empty((4, 6), np.float32)
    view = call("executorch_prim::et_view.default", base, (4, -1), out)
    assert view.shape == (4, 6) and np.shares_memory(view, base)
    base[0] = 100
    assert view[0, 0] == 100


def test_et_view_refuses_to_copy():
    base = np.arange(24, dtype=np.float32).reshape(4, 6).T
    with pytest.raises(KernelError):
        call("executorch_prim::et_view.default", base, (24,), np.empty(24, np.float32))
