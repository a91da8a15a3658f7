"""Fixtures the `torchedge serve` tests share (a module may define its own of the same name)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def llama_kv(tmp_path_factory):
    """The tiny Llama .pte with a KV cache and its tokenizer.json (`export_llama_kv`)."""
    pytest.importorskip("transformers")
    from tests.generation.serve_support import export_llama_kv  # (it needs httpx)

    return export_llama_kv(tmp_path_factory)


@pytest.fixture(scope="module")
def tokenizer(llama_kv):
    from torchedge.generation import Tokenizer

    return Tokenizer.from_file(llama_kv[1])
