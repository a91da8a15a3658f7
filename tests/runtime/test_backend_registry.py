"""Finding backends by id: torchedge's own without package metadata, third parties through entry points."""

import importlib.metadata
import pathlib
import sys
from importlib.metadata import EntryPoint

import pytest

from torchedge.errors import BackendMissingError
from torchedge.runtime import backend as registry

_THIRD_PARTY = """
from torchedge.runtime import BackendInterface, register_backend

class ThirdPartyBackend(BackendInterface):
    pass

register_backend("ThirdPartyBackend", ThirdPartyBackend())
"""


def test_every_built_in_backend_registers_under_its_id():
    for name, module in registry.BUILT_IN_BACKENDS.items():
        importlib.import_module(module)
        assert name in registry.registered_backends()


def test_built_in_backends_need_no_entry_points(monkeypatch):
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **selection: [])
    monkeypatch.delitem(registry._BACKENDS, "XnnpackBackend", raising=False)
    monkeypatch.delitem(sys.modules, "torchedge.backends.xnnpack.runtime", raising=False)
    assert type(registry.get_backend("XnnpackBackend")).__name__ == "XnnpackBackend"


def test_third_party_backend_found_through_entry_points(monkeypatch, tmp_path):
    (tmp_path / "third_party_backend.py").write_text(_THIRD_PARTY)
    monkeypatch.syspath_prepend(str(tmp_path))
    declared = EntryPoint("ThirdPartyBackend", "third_party_backend", registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **selection: [declared])
    monkeypatch.delitem(sys.modules, "third_party_backend", raising=False)
    assert type(registry.get_backend("ThirdPartyBackend")).__name__ == "ThirdPartyBackend"
    monkeypatch.delitem(registry._BACKENDS, "ThirdPartyBackend")


def test_unknown_backend_is_named(monkeypatch):
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **selection: [])
    with pytest.raises(BackendMissingError, match="'NoSuchBackend' is not registered"):
        registry.get_backend("NoSuchBackend")


def test_an_unavailable_backend_says_what_to_install(monkeypatch):
    class Unavailable(registry.BackendInterface):
        install_hint = "it needs FooRuntime: pip install foo"

        def is_available(self) -> bool:
            return False

    monkeypatch.setitem(registry._BACKENDS, "FooBackend", Unavailable())
    with pytest.raises(
        BackendMissingError, match="not available on this machine: it needs FooRuntime: pip install foo"
    ):
        registry.get_backend("FooBackend")


def test_onnxruntime_backend_names_its_extra():
    from torchedge.backends.onnxruntime.runtime import OnnxRuntimeDelegate

    assert "pip install 'torchedge[onnxruntime]'" in OnnxRuntimeDelegate.install_hint


def test_a_missing_data_file_is_named_as_such(tmp_path):
    from torchedge.runtime import Runtime

    program = (pathlib.Path(__file__).parent.parent / "golden" / "mlp.pte").read_bytes()
    with pytest.raises(FileNotFoundError, match="no such .ptd file"):
        Runtime.get().load_program(program, data_path=str(tmp_path / "missing.ptd"))
    with pytest.raises(FileNotFoundError, match="a directory, not a .ptd file"):
        Runtime.get().load_program(program, data_path=str(tmp_path))
