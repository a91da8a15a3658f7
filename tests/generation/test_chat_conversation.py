"""`Conversation`: turn 2 feeds only what the cache lacks, and generates the tokens a fresh
generation over the whole history generates (greedy, a tiny random-weight Llama on torchedge)."""

from types import SimpleNamespace

import pytest

from torchedge.errors import InputError
from torchedge.generation import ChatTemplate, Conversation, Stats, TextGenerator
from torchedge.runtime import Runtime

from .test_chat import CHATML

pytest.importorskip("transformers")
pytest.importorskip("jinja2")
CACHE = 256


@pytest.fixture(scope="module")
def buffer():
    from torchedge.models.causal_lm import compile_causal_lm, export_causal_lm, tiny_causal_lm

    return compile_causal_lm(export_causal_lm(tiny_causal_lm("llama"), CACHE)).buffer


@pytest.fixture(scope="module")
def tokenizer():
    from torchedge.models.causal_lm import demo_tokenizer

    return demo_tokenizer()


class Recording:
    """A program whose method calls are recorded: (token ids, positions) per call."""

    def __init__(self, program):
        self._program, self.calls = program, []
        self.method_names, self.metadata = program.method_names, program.metadata

    def load_method(self, name):
        method = self._program.load_method(name)

        def execute(inputs):
            if len(inputs) == 2:
                self.calls.append((inputs[0][0].tolist(), inputs[1].tolist()))
            return method.execute(inputs)

        return SimpleNamespace(execute=execute)


def _conversation(buffer, tokenizer, **options):
    program = Recording(Runtime.get().load_program(buffer))
    chat = Conversation(TextGenerator(program), tokenizer, ChatTemplate(CHATML, "ChatML"), stop_tokens=(), **options)
    return chat, program


def test_the_second_turn_prefills_only_new_tokens_and_equals_a_fresh_generation(buffer, tokenizer):
    chat, program = _conversation(buffer, tokenizer, system="You are a small model.")
    first = chat.say("Once upon a time", 8)
    turn_one = chat.cached[: first.prompt_tokens]
    program.calls.clear()
    stats = Stats()
    second = chat.say("What happened next?", 8, stats=stats)

    history = tokenizer.encode(ChatTemplate(CHATML).render(chat.messages[:-1]), add_special_tokens=False)
    assert history[: len(turn_one)] == turn_one  # the first prompt is a prefix of the second
    prefill_ids, prefill_positions = program.calls[0]
    reused = prefill_positions[0]
    assert reused >= len(turn_one)  # the history was not read again
    assert prefill_ids == history[reused:] and prefill_positions == list(range(reused, len(history)))
    assert second.prompt_tokens == stats.num_prompt_tokens == len(history) - reused
    assert [len(ids) for ids, _ in program.calls[1:]] == [1] * (len(second.tokens) - 1)

    fresh = TextGenerator(Runtime.get().load_program(buffer)).generate(history, 8)
    assert second.tokens == fresh.tokens and len(set(second.tokens)) > 2
    assert chat.messages[-1] == {"role": "assistant", "content": second.text}
    assert chat.cached == history + second.tokens[:-1]


def test_a_diverging_history_rewinds_the_cache_to_where_it_agrees(buffer, tokenizer):
    """An edited reply: the cache is refilled from the first token that differs."""
    chat, program = _conversation(buffer, tokenizer)
    chat.say("Once upon a time", 6)
    chat.messages[-1]["content"] = "Something else entirely."
    before = list(chat.cached)
    program.calls.clear()
    second = chat.say("And then?", 6)
    history = tokenizer.encode(ChatTemplate(CHATML).render(chat.messages[:-1]), add_special_tokens=False)
    agree = next(i for i, (a, b) in enumerate(zip(before, history)) if a != b)
    assert program.calls[0][1][0] == agree
    assert second.tokens == TextGenerator(Runtime.get().load_program(buffer)).generate(history, 6).tokens


def test_reset_starts_over_and_a_full_cache_is_an_input_error(buffer, tokenizer):
    chat, program = _conversation(buffer, tokenizer, system="Be brief.")
    chat.say("Once upon a time", 4)
    chat.reset()
    assert chat.messages == [{"role": "system", "content": "Be brief."}] and chat.cached == []
    program.calls.clear()
    chat.say("Once upon a time", 4)
    assert program.calls[0][1][0] == 0
    with pytest.raises(InputError, match="cache holds 256 positions"):
        chat.say("a very long message " * 120, 4)
