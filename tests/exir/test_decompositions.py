"""The compiler's own decomposition choices, against eager: ``take`` kept whole for its kernel
(torch's decomposition guards on the indices), the chunked ``linear_cross_entropy`` decomposed
into linear and cross entropy."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.nn.modules.linear_cross_entropy_options import LinearCrossEntropyOptions

from torchedge.exir import to_edge
from torchedge.runtime import Runtime


def _run(module, *inputs):
    program = to_edge(torch.export.export(module, inputs)).to_executorch()
    return Runtime.get().load_program(program.buffer).load_method().execute([t.detach().numpy() for t in inputs])


class Take(torch.nn.Module):
    def forward(self, x, index):
        return torch.take(x, index) * 2


@pytest.mark.parametrize(("shape", "index"), [((), 0), ((3, 3), [[8, -1], [0, 4]])])
def test_take_compiles_where_torch_decomposition_cannot(shape, index):
    x, index = torch.randn(shape), torch.tensor(index)  # a 0-d index: torch's decomposition guards on it
    (got,) = _run(Take(), x, index)
    np.testing.assert_array_equal(got, Take()(x, index).numpy())


class LinearCrossEntropy(torch.nn.Module):
    def __init__(self, reduction: str, retain: bool):
        super().__init__()
        self.reduction = reduction
        self.options = LinearCrossEntropyOptions(allow_retain_graph=retain, batch_chunk_size=2)

    def forward(self, x, weight, target):
        return F.linear_cross_entropy(x, weight, target, reduction=self.reduction, options=self.options)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_chunked_linear_cross_entropy_matches_eager(reduction):
    torch.manual_seed(0)
    x, weight, target = torch.randn(8, 3), torch.randn(5, 3), torch.randint(0, 5, (8,))
    model = LinearCrossEntropy(reduction, retain=reduction != "none")
    with torch.no_grad():
        (got,) = _run(model, x, weight, target)
        want = model(x, weight, target)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


def test_chunked_linear_cross_entropy_of_trainable_weights_computes_the_loss():
    # exported with gradients enabled: the op is asked for gradients the inference program never reads
    torch.manual_seed(1)
    x, weight, target = torch.randn(6, 3, requires_grad=True), torch.randn(4, 3), torch.randint(0, 4, (6,))
    model = LinearCrossEntropy("sum", retain=True)
    (got,) = _run(model, x, weight, target)
    np.testing.assert_allclose(got, model(x, weight, target).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_cached_cia_operator_set_is_torchs_and_follows_new_registrations(monkeypatch):
    """`cached_cia_ops` gives torch's own set of keepable CompositeImplicitAutograd operators,
    computes it once while nothing is registered, and again after an operator library loads."""
    from torch._export import utils

    from torchedge.exir import decompositions

    calls = []
    original = utils._collect_all_valid_cia_ops

    def counting():
        calls.append(1)
        return original()

    monkeypatch.setattr(utils, "_collect_all_valid_cia_ops", counting)
    monkeypatch.setattr(decompositions._CIA, "ops", None, raising=False)
    expected = original()
    with decompositions.cached_cia_ops():
        first = utils._collect_all_valid_cia_ops()
        first.clear()  # torch edits the set it gets: the cache hands out copies
        assert utils._collect_all_valid_cia_ops() == expected
        assert len(calls) == 1
        library = torch.library.Library("torchedge_cia_test", "DEF")
        library.define("twice(Tensor x) -> Tensor")
        library.impl("twice", lambda x: x * 2, "CompositeImplicitAutograd")
        utils._collect_all_valid_cia_ops()
        assert len(calls) == 2  # a new operator: computed again
    assert utils._collect_all_valid_cia_ops is counting  # restored
