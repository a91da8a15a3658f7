"""In-place kernels (``copy_``, ``index_put_``) and scatter-like out kernels whose ``out`` is
``self``'s own memory, as stateful programs (mutable buffers, KV caches) call them, against
PyTorch eager over the dtypes models use.

An in-place kernel updates ``self`` and returns None; an aliased out kernel must give the
functional result while writing only the region that changes (checked by counting the
elements the kernel module's ``write`` copies, never by timing).
"""

import numpy as np
import pytest
import torch

from tests.kernels.harness import (
    ALL,
    BF16,
    F16,
    F32,
    F64,
    FLOATS,
    I8,
    I32,
    I64,
    INTS,
    U8,
    B,
    assert_close,
    rand,
    to_kernel_arg,
    to_numpy,
)
from torchedge.errors import KernelError
from torchedge.kernels.portable import scatter, slicing
from torchedge.kernels.portable.common import aliases
from torchedge.kernels.registry import get_kernel

aten = torch.ops.aten
LOW_PRECISION = {F16: 1e-2, BF16: 2e-2}


def _name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _tol(dtype) -> dict:
    tol = LOW_PRECISION.get(dtype)
    return {"rtol": tol, "atol": tol} if tol else {}


def _buffer(tensor: torch.Tensor) -> np.ndarray:
    """A writable NumPy copy of ``tensor``: the planned memory an in-place kernel updates."""
    return to_numpy(tensor)


def _run_inplace(op: str, self: torch.Tensor, *args) -> np.ndarray:
    """Run the in-place kernel ``op`` on a copy of ``self`` and return that (updated) copy."""
    buffer = _buffer(self)
    kernel = get_kernel(op)
    assert kernel.fn(buffer, *[to_kernel_arg(a) for a in args]) is None
    return buffer


def _run_aliased(op: str, self: torch.Tensor, *args, alias=lambda buffer: buffer) -> np.ndarray:
    """Run the out kernel ``op`` with ``out`` aliasing ``self`` (``alias(self)``) and return self."""
    buffer = _buffer(self)
    assert get_kernel(op).fn(buffer, *[to_kernel_arg(a) for a in args], alias(buffer)) is None
    return buffer


# ---- copy_ --------------------------------------------------------------------------------


def test_inplace_kernels_take_their_schema_arguments():
    assert get_kernel("aten::copy_").num_args == 3  # self, src, non_blocking
    assert get_kernel("aten::index_put_").num_args == 4  # self, indices, values, accumulate


def _copy_source(dst, src, shape):
    """Source values a cast to ``dst`` keeps defined (no negative floats into uint8)."""
    low = 0.0 if dst == U8 else -3.0
    return rand(*shape, dtype=src, low=low, high=3.0)


@pytest.mark.parametrize("dst", ALL, ids=_name)
@pytest.mark.parametrize("src", ALL, ids=_name)
def test_copy_inplace_casts_like_torch(dst, src):
    self, source = rand(2, 3, 4, dtype=dst), _copy_source(dst, src, (2, 3, 4))
    got = _run_inplace("aten::copy_", self, source, False)
    assert_close(got, to_numpy(self.clone().copy_(source)), what=f"copy_ {_name(src)} -> {_name(dst)}")


@pytest.mark.parametrize("shape", [(3, 1), (4,), (1, 1, 4), (), (2, 3, 4)], ids=str)
@pytest.mark.parametrize("dtype", [F32, I64, BF16], ids=_name)
def test_copy_inplace_broadcasts_src(shape, dtype):
    self, source = rand(2, 3, 4, dtype=dtype), rand(*shape, dtype=F64)
    got = _run_inplace("aten::copy_", self, source, True)  # non_blocking changes nothing
    assert_close(got, to_numpy(self.clone().copy_(source)))


def test_copy_inplace_writes_through_a_noncontiguous_self():
    self, source = rand(4, 3), rand(4, 1, dtype=I32)
    buffer = np.empty((3, 4), np.float32)
    view = buffer.T  # what self looks like in transposed planned memory
    get_kernel("aten::copy_").fn(view, to_kernel_arg(source), False)
    assert_close(buffer.T, to_numpy(self.clone().copy_(source)))


@pytest.mark.parametrize(
    "self_shape, src_shape", [((2, 4), (3,)), ((3,), (1, 3)), ((), (1,)), ((2, 3), (2, 1, 3))], ids=str
)
def test_copy_inplace_refuses_src_that_does_not_broadcast_to_self(self_shape, src_shape):
    self, source = rand(*self_shape), rand(*src_shape)
    with pytest.raises(RuntimeError):
        self.clone().copy_(source)
    with pytest.raises(KernelError, match="cannot be broadcast"):
        _run_inplace("aten::copy_", self, source, False)
    with pytest.raises(KernelError, match="cannot be broadcast"):
        _run_aliased("aten::copy.out", self, source, False)


def test_inplace_kernels_refuse_a_read_only_self():
    constant = to_kernel_arg(rand(2, 3))  # read-only, as the runtime hands out constants
    with pytest.raises(KernelError, match="read-only"):
        get_kernel("aten::copy_").fn(constant, np.ones(3, np.float32), False)
    with pytest.raises(KernelError, match="read-only"):
        get_kernel("aten::index_put_").fn(constant, [np.array([0])], np.ones(3, np.float32), False)


# ---- index_put_ ---------------------------------------------------------------------------

H, S, D = 4, 16, 8  # a (1, H, S, D) KV cache


def _put_ref(self, indices, values, accumulate):
    return aten.index_put_(self.clone(), indices, values, accumulate)


def _kv_positions():
    return {
        "one": torch.tensor([5]),
        "span": torch.arange(3, 7),
        "negative": torch.tensor([-1, -S]),
        "int32": torch.tensor([0, 15], dtype=I32),
    }


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("dtype", [F32, F16, BF16, F64, I64, I8], ids=_name)
@pytest.mark.parametrize("where", list(_kv_positions()))
def test_index_put_inplace_updates_a_kv_cache(where, dtype, accumulate):
    cache, idx = rand(1, H, S, D, dtype=dtype), _kv_positions()[where]
    values = rand(1, H, len(idx), D, dtype=dtype)
    indices = [None, None, idx]
    got = _run_inplace("aten::index_put_", cache, indices, values, accumulate)
    assert_close(got, to_numpy(_put_ref(cache, indices, values, accumulate)), **_tol(dtype))


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("dtype", ALL, ids=_name)
def test_index_put_inplace_with_masks_and_broadcast_values(dtype, accumulate):
    cache = rand(1, H, S, D, dtype=dtype)
    for indices, value_shape in [
        ([None, None, rand(S, dtype=B)], (D,)),  # a mask along the sequence
        ([rand(1, H, dtype=B)], (1, S, D)),  # a mask over the leading dims
        ([None, torch.tensor([[0], [3]]), torch.tensor([1, 2])], (D,)),
    ]:
        values = rand(*value_shape, dtype=dtype)
        got = _run_inplace("aten::index_put_", cache, indices, values, accumulate)
        assert_close(got, to_numpy(_put_ref(cache, indices, values, accumulate)), **_tol(dtype))


@pytest.mark.parametrize("dtype", ALL, ids=_name)
def test_index_put_inplace_accumulates_duplicates(dtype):
    cache, idx = rand(1, H, S, D, dtype=dtype), torch.tensor([2, 2, 9, 2])
    values = rand(1, H, 4, D, dtype=dtype)
    got = _run_inplace("aten::index_put_", cache, [None, None, idx], values, True)
    assert_close(got, to_numpy(_put_ref(cache, [None, None, idx], values, True)), **_tol(dtype))


@pytest.mark.parametrize("dtype", [F16, BF16], ids=_name)
def test_index_put_inplace_accumulates_16bit_floats_in_their_own_dtype(dtype):
    """ATen's CPU kernel rounds after every addition: 3000 x 0.1 stops growing at 256 in float16."""
    self, idx, values = torch.zeros(3, dtype=dtype), torch.zeros(3000, dtype=I64), torch.full((3000,), 0.1, dtype=dtype)
    got = _run_inplace("aten::index_put_", self, [idx], values, True)
    np.testing.assert_array_equal(got.astype(np.float32), _put_ref(self, [idx], values, True).float().numpy())


_BAD_PUTS = {  # (indices, values shape, values dtype, message)
    "past-the-end": ([None, None, torch.tensor([S])], (1, H, 1, D), F32, "out of bounds"),
    "before-the-start": ([None, None, torch.tensor([-S - 1])], (1, H, 1, D), F32, "out of bounds"),
    "values-misfit": ([None, None, torch.tensor([1, 2])], (1, H, 3, D), F32, "do not fit"),
    "values-dtype": ([None, None, torch.tensor([1])], (1, H, 1, D), F64, "dtype"),
    "mask-misfit": ([None, None, torch.ones(S - 1, dtype=B)], (D,), F32, "mask"),
    "too-many-indices": ([None, None, None, None, torch.tensor([0])], (1,), F32, "too many indices"),
    "all-none": ([None, None], (1, H, S, D), F32, "at least one index"),
}


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("case", list(_BAD_PUTS))
def test_index_put_inplace_refuses_bad_indices_and_leaves_self_alone(case, accumulate):
    indices, shape, dtype, message = _BAD_PUTS[case]
    cache, values = rand(1, H, S, D), rand(*shape, dtype=dtype)
    if case != "all-none":  # torch takes all-None indices as a plain copy; the kernel contract refuses them
        with pytest.raises((RuntimeError, IndexError)):
            _put_ref(cache, indices, values, accumulate)
    buffer = _buffer(cache)
    with pytest.raises(KernelError, match=message):
        get_kernel("aten::index_put_").fn(buffer, to_kernel_arg(indices), to_kernel_arg(values), accumulate)
    np.testing.assert_array_equal(buffer, to_numpy(cache))
    with pytest.raises(KernelError, match=message):
        _run_aliased("aten::index_put.out", cache, indices, values, accumulate)


# ---- out kernels whose out is self --------------------------------------------------------

_ALIASES = {"same-object": lambda buffer: buffer, "same-memory-view": lambda buffer: buffer[...]}


def _aliased_cases(dtype):
    """(op, self, arguments before out, functional reference) for each scatter-like kernel."""
    cache = rand(1, H, S, D, dtype=dtype)
    rows = rand(1, H, 2, D, dtype=dtype)
    idx = torch.tensor([7, -2])
    yield "aten::index_put.out", cache, ([None, None, idx], rows, False), aten.index_put.default
    yield "aten::index_put.out", cache, ([None, None, torch.tensor([3, 3])], rows, True), aten.index_put.default
    yield "aten::slice_scatter.out", cache, (rows, 2, 5, 7, 1), aten.slice_scatter.default
    yield "aten::slice_scatter.out", cache, (rand(1, H, 3, D, dtype=dtype), -2, -6, None, 2), aten.slice_scatter.default
    yield "aten::select_scatter.out", cache, (rand(1, H, D, dtype=dtype), 2, -1), aten.select_scatter.default
    yield "aten::select_scatter.out", rand(3, dtype=dtype), (rand(1, dtype=dtype)[0], 0, 1), aten.select_scatter.default
    # float32 into the cache's dtype: non-negative, as C leaves eager's -1.5 -> uint8 undefined
    yield "aten::copy.out", cache, (rand(S, 1, dtype=F32, low=0.0), False), aten.copy.default


@pytest.mark.parametrize("alias", list(_ALIASES))
@pytest.mark.parametrize("dtype", ALL, ids=_name)
def test_aliased_out_gives_the_functional_result(dtype, alias):
    for op, self, args, ref in _aliased_cases(dtype):
        got = _run_aliased(op, self, *args, alias=_ALIASES[alias])
        assert_close(got, to_numpy(ref(self, *args)), what=op, **_tol(dtype))


def test_aliases_means_exactly_the_same_memory():
    a = np.zeros((4, 4), np.float32)
    assert aliases(a, a) and aliases(a[...], a) and aliases(a.reshape(4, 4), a)
    assert not aliases(a.copy(), a)
    assert not aliases(a.T, a)  # same start, other strides
    assert not aliases(a[:2], a) and not aliases(a[1:], a[:3])
    assert not aliases(a.view(np.int32), a)  # same bytes, another dtype


@pytest.fixture
def written(monkeypatch):
    """The element counts of every copy the scatter and slicing kernels make through ``write``."""
    sizes = []

    def counting_write(out, value):
        sizes.append(int(np.size(out)))
        return real_write(out, value)

    real_write = scatter.write
    monkeypatch.setattr(scatter, "write", counting_write)
    monkeypatch.setattr(slicing, "write", counting_write)
    return sizes


def test_aliased_index_put_touches_only_the_indexed_rows(written):
    cache, indices, rows = rand(1, H, S, D), [None, None, torch.tensor([4])], rand(1, H, 1, D)
    got = _run_aliased("aten::index_put.out", cache, indices, rows, False)
    assert written == []  # self is not copied into out: only cache[:, :, 4] was assigned
    assert_close(got, to_numpy(aten.index_put(cache, indices, rows)))
    out = np.empty((1, H, S, D), np.float32)  # the control: a separate out gets all of self copied in
    get_kernel("aten::index_put.out").fn(to_kernel_arg(cache), to_kernel_arg(indices), to_kernel_arg(rows), False, out)
    assert written == [cache.numel()]


@pytest.mark.parametrize(
    "op, args",
    [("aten::slice_scatter.out", (rand(1, H, 2, D), 2, 5, 7, 1)), ("aten::select_scatter.out", (rand(1, H, D), 2, 9))],
    ids=["slice", "select"],
)
def test_aliased_slice_and_select_scatter_write_only_the_new_rows(written, op, args):
    cache = rand(1, H, S, D)
    got = _run_aliased(op, cache, *args)
    assert written == [args[0].numel()]
    ref = aten.slice_scatter.default if op == "aten::slice_scatter.out" else aten.select_scatter.default
    assert_close(got, to_numpy(ref(cache, *args)))


@pytest.mark.parametrize(
    "op, args, ref",
    [
        ("aten::add.out", (rand(D), 2), lambda s, o, alpha: s + alpha * o),
        ("aten::sub.out", (rand(1, 1, S, 1), 1), lambda s, o, alpha: s - alpha * o),
        ("aten::mul.out", (rand(H, 1, D),), torch.mul),
        ("aten::div.out", (rand(D, low=1.0, high=3.0),), torch.div),
    ],
    ids=["add", "sub", "mul", "div"],
)
@pytest.mark.parametrize("dtype", FLOATS, ids=_name)
def test_aliased_elementwise_out(op, args, ref, dtype):
    """The compiler also updates buffers with elementwise out kernels whose out is self."""
    cache = rand(1, H, S, D, dtype=dtype)
    args = tuple(a.to(dtype) if isinstance(a, torch.Tensor) else a for a in args)
    got = _run_aliased(op, cache, *args)
    assert_close(got, to_numpy(ref(cache, *args)), **_tol(dtype))


@pytest.mark.parametrize("dtype", [*INTS, F32], ids=_name)
def test_unaliased_out_is_unchanged(dtype):
    """A separate out still receives all of self (and self is left alone)."""
    for op, self, args, ref in _aliased_cases(dtype):
        source = to_kernel_arg(self)  # read-only: the kernel must not write into it
        out = np.empty(tuple(self.shape), source.dtype)
        get_kernel(op).fn(source, *[to_kernel_arg(a) for a in args], out)
        assert_close(out, to_numpy(ref(self, *args)), what=op)
