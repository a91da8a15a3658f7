"""The spine's models: torchedge vs PyTorch eager, and across runtimes with the real ExecuTorch."""

from __future__ import annotations

import functools

import pytest

from tests.conftest import (
    assert_matches,
    executorch_compile,
    executorch_run,
    torch_outputs,
    torchedge_compile,
    torchedge_run,
)

MODELS = ["mlp", "cnn", "mobilenet_v2", "llama"]


@functools.cache
def _model(name):
    from torchedge.models import load_model

    model, inputs = load_model(name)
    return model, inputs, torch_outputs(model, inputs)


@functools.cache
def _torchedge_pte(name) -> bytes:
    model, inputs, _ = _model(name)
    return torchedge_compile(model, inputs).buffer


@functools.cache
def _executorch_pte(name) -> bytes:
    model, inputs, _ = _model(name)
    return executorch_compile(model, inputs)


@pytest.mark.parametrize("name", MODELS)
def test_torchedge_pte_on_torchedge_runtime(name):
    _, inputs, expected = _model(name)
    assert_matches(torchedge_run(_torchedge_pte(name), inputs), expected)


@pytest.mark.parametrize("name", MODELS)
def test_torchedge_pte_on_executorch_runtime(name):
    pytest.importorskip("executorch.runtime")
    _, inputs, expected = _model(name)
    assert_matches(executorch_run(_torchedge_pte(name), inputs), expected)


@pytest.mark.parametrize("name", MODELS)
def test_executorch_pte_on_torchedge_runtime(name):
    pytest.importorskip("executorch.exir")
    _, inputs, expected = _model(name)
    assert_matches(torchedge_run(_executorch_pte(name), inputs), expected)
