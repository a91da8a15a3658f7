"""Fusion levels, rule switches, rule errors and tracing with fusion on, on the zoo models and a
small attention program: level ``exact`` gives the bits of ``fuse=False``."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from tests.conftest import torchedge_compile
from tests.fusion.attention_model import Attention
from torchedge.errors import InputError
from torchedge.fusion import FusionOptions
from torchedge.fusion import options as fusion_options_module
from torchedge.fusion.rules import RULES
from torchedge.models import load_model
from torchedge.runtime import Runtime
from torchedge.runtime.steps import NOP


@pytest.fixture(scope="module")
def attention_pte() -> bytes:
    torch.manual_seed(0)
    return torchedge_compile(Attention().eval(), (torch.randn(1, 6, 16),)).buffer


def _fused_labels(method) -> list[str]:
    return [s.label for s in method._steps if s.kind != NOP and "fused at load" in s.label]


@pytest.mark.parametrize("name", ["mlp", "cnn", "bert", "mobilenet_v2"])
def test_level_exact_gives_the_bits_of_the_unfused_run(name):
    torch.manual_seed(0)
    model, inputs = load_model(name)
    program = Runtime.get().load_program(torchedge_compile(model.eval(), inputs).buffer)
    arrays = [t.numpy() for t in inputs]
    exact, plain = program.load_method("forward", fuse="exact"), program.load_method("forward", fuse=False)
    for got, want in zip(exact.execute(arrays), plain.execute(arrays)):
        np.testing.assert_array_equal(got, want)


def test_levels_and_switches(attention_pte):
    program = Runtime.get().load_program(attention_pte)
    assert any("attention_exact" in label for label in _fused_labels(program.load_method()))  # default: exact
    assert any("(fast_attention," in label for label in _fused_labels(program.load_method(fuse="all")))
    assert not _fused_labels(program.load_method(fuse="none"))
    assert not _fused_labels(program.load_method(fuse=False))
    off = program.load_method(fuse=FusionOptions("all", disabled={"fast_attention", "attention"}))
    assert not any("attention" in label for label in _fused_labels(off))
    only_exact = program.load_method(fuse=FusionOptions("all", disabled={"fast_attention"}))
    assert any("attention_exact" in label for label in _fused_labels(only_exact))


def test_unknown_levels_and_rule_names_are_errors(attention_pte):
    program = Runtime.get().load_program(attention_pte)
    with pytest.raises(InputError, match="fusion level"):
        program.load_method(fuse="fast")
    with pytest.raises(InputError, match="no fusion rule named 'atention'"):
        FusionOptions(disabled={"atention"})


def test_a_rule_that_raises_is_an_error_not_a_skipped_rule(attention_pte, monkeypatch):
    def broken(found):
        raise AttributeError("a typo in a guard")

    rules = tuple(dataclasses.replace(r, guard=broken) if r.name == "attention" else r for r in RULES)
    monkeypatch.setattr(fusion_options_module, "RULES", rules)
    with pytest.raises(AttributeError, match="a typo in a guard"):
        Runtime.get().load_program(attention_pte).load_method()


def test_tracing_records_fused_steps_with_the_instructions_they_replaced(attention_pte):
    program = Runtime.get().load_program(attention_pte, enable_etdump=True)
    method = program.load_method()
    method.execute([np.random.default_rng(0).standard_normal((1, 6, 16), dtype=np.float32)])
    tracer = program.event_tracer
    fused = {pc: entry for pc, entry in tracer.fused_instructions.items() if entry[0] == "attention"}
    assert len(fused) == 1
    ((pc, (_, replaced)),) = fused.items()
    assert replaced[0] == pc and len(replaced) > 10
    names = [e.profile_event.name for block in tracer.etdump().run_data for e in block.events if e.profile_event]
    assert "fused_attention" in names
    events = [
        e.profile_event
        for block in tracer.etdump().run_data
        for e in block.events
        if e.profile_event and e.profile_event.name == "fused_attention"
    ]
    assert all(e.instruction_id == pc for e in events)
    assert not any(i in replaced[1:] for e in events for i in [e.instruction_id])


def test_rules_have_unique_names_and_known_levels():
    names = [r.name for r in RULES]
    assert len(names) == len(set(names))
    assert {r.level for r in RULES} <= {"exact", "all"}
    assert all(r.doc for r in RULES)
