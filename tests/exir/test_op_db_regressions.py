"""Regressions from running PyTorch's op_db through torchedge: strided outputs, empty_like,
bool clamp with one tensor bound; each lowered, run, and compared with eager."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from torchedge.exir import to_edge
from torchedge.exir.dialects.constraints import check_node_dtypes
from torchedge.runtime import Runtime


class _Call(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _run(fn, *inputs):
    buffer = to_edge(torch.export.export(_Call(fn), inputs)).to_executorch().buffer
    return Runtime.get().load_program(buffer).load_method("forward").execute([x.numpy() for x in inputs])


CASES = {
    "full_like_transposed": lambda a: torch.full_like(a.t(), 2.5),
    "ones_like_expanded": lambda a: torch.ones_like(a[:1].expand(3, 4)),
    "zeros_like_transposed": lambda a: torch.zeros_like(a.t()) + a.t(),
    "empty_like_transposed": lambda a: torch.empty_like(a.t()).fill_(3.0),
    "empty_like": lambda a: torch.empty_like(a).fill_(-1.0),
    "fliplr": torch.fliplr,
    "flipud": torch.flipud,
    "circular_pad": lambda a: F.pad(a[None], (1, 2), mode="circular"),
    "circular_pad_2d": lambda a: F.pad(a[None, None], (1, 1, 2, 0), mode="circular"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_strided_outputs_compile_and_match_eager(name):
    x = torch.randn(3, 4)
    (got,) = _run(CASES[name], x)
    want = CASES[name](x)
    assert got.shape == tuple(want.shape)
    np.testing.assert_array_equal(np.asarray(got), want.numpy())


@pytest.mark.parametrize("bound", ["min", "max"])
def test_bool_clamp_with_one_tensor_bound(bound):
    x = torch.tensor([[True, False, True], [False, False, True]])
    edge = torch.tensor([False, True, False])

    def fn(a, b):
        return torch.clamp_min(a, b) if bound == "min" else torch.clamp_max(a, b)

    (got,) = _run(fn, x, edge)
    np.testing.assert_array_equal(np.asarray(got), fn(x, edge).numpy())
    ints = torch.arange(6).reshape(2, 3)
    (got,) = _run(fn, ints, torch.tensor([1, 2, 3]))
    np.testing.assert_array_equal(np.asarray(got), fn(ints, torch.tensor([1, 2, 3])).numpy())


def test_bool_clamp_dtypes_in_the_edge_spec():
    op, b = torch.ops.aten.clamp.Tensor, torch.bool
    assert check_node_dtypes(op, {"self": b, "min": b, "max": None}, [b]) is None
    assert check_node_dtypes(op, {"self": b, "min": None, "max": b}, [b]) is None
    assert check_node_dtypes(op, {"self": b, "min": b, "max": b}, [b]) is not None  # eager refuses it too


def test_tensor_split_at_indices_read_from_a_tensor():
    """The split points are read from data (``_local_scalar_dense``): the default kernel set has
    that primitive, under its overload-less name."""
    x = torch.randn(6, 3)
    buffer = to_edge(
        torch.export.export(_Call(lambda a, i: torch.tensor_split(a, i)), (x, torch.tensor([1, 4])), strict=False)
    )
    method = Runtime.get().load_program(buffer.to_executorch().buffer).load_method("forward")
    for points in ([1, 4], [2, 2], [0, 6]):
        got = method.execute([x.numpy(), np.array(points)])
        want = torch.tensor_split(x, torch.tensor(points))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), w.numpy())


def test_split_into_a_single_chunk():
    """A Tensor[] out holding one tensor is still read through getitem."""
    x = torch.randn(3, 4)
    got = _run(lambda a: torch.split(a, 5), x)
    assert len(got) == 1
    np.testing.assert_array_equal(np.asarray(got[0]), x.numpy())
