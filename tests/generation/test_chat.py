"""Chat templates against `transformers`' ``apply_chat_template``; stop strings and ExecuTorch's
statistics on hand-checked cases (no model: a NumPy stand-in program)."""

import dataclasses
import json

import pytest

from torchedge.errors import InputError
from torchedge.generation import ChatTemplate, Stats, StopText, TextGenerator
from torchedge.generation.chat import DEFAULT_CHAT_TEMPLATE

from .test_runner import CountingProgram

CHATML = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# bos/eos, loop variables, namespace(), tojson of non-ASCII text, loop controls, {% generation %}
RICH = """{{ bos_token }}{% set ns = namespace(n=0) %}
{%- for message in messages %}
  {%- if message['role'] == 'stop' %}{% break %}{% endif %}
  {%- set ns.n = ns.n + 1 %}
  {%- if message['role'] == 'assistant' %}{% generation %}[{{ ns.n }}] {{ message['content'] }}{{ eos_token }}
{%- endgeneration %}
  {%- else %}[{{ ns.n }}] {{ message['role'] }}: {{ message['content'] | tojson }}{% if not loop.last %}
{% endif %}{% endif %}
{%- endfor %}
{%- if add_generation_prompt %} => {% endif %}"""
MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "hello there, how are you?"},
    {"role": "assistant", "content": "I am fine, thank you."},
    {"role": "user", "content": "Und das Wetter? Schön!"},
]


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    """A tokenizer trained here, saved by `transformers` with a ChatML template (chat_template.jinja)."""
    pytest.importorskip("transformers")
    from transformers import PreTrainedTokenizerFast

    from torchedge.generation import train_bpe_tokenizer

    texts = [m["content"] for m in MESSAGES] * 3
    backend = train_bpe_tokenizer(texts, 300, ("<|endoftext|>", "<|im_start|>", "<|im_end|>"))._backend
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<|im_start|>", eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tokenizer.chat_template = CHATML
    directory = tmp_path_factory.mktemp("hf-tokenizer")
    tokenizer.save_pretrained(directory)
    return directory


def _transformers_tokenizer(directory):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(directory)


@pytest.mark.parametrize("generation_prompt", [True, False])
def test_a_saved_chatml_template_renders_and_encodes_as_transformers_does(hf_dir, generation_prompt):
    from torchedge.generation import Tokenizer

    reference = _transformers_tokenizer(hf_dir)
    template = ChatTemplate.find(str(hf_dir / "tokenizer.json"))
    assert template.origin.endswith("chat_template.jinja")
    text = template.render(MESSAGES, add_generation_prompt=generation_prompt)
    assert text == reference.apply_chat_template(MESSAGES, add_generation_prompt=generation_prompt, tokenize=False)
    ids = Tokenizer.from_file(hf_dir / "tokenizer.json").encode(text, add_special_tokens=False)
    expected = reference.apply_chat_template(MESSAGES, add_generation_prompt=generation_prompt, tokenize=True)
    assert ids == list(expected["input_ids"] if hasattr(expected, "keys") else expected)


def test_a_template_in_tokenizer_config_with_jinja_features(hf_dir, tmp_path):
    """namespace, loop.last, break, tojson (non-ASCII kept), {% generation %}, special tokens."""
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((hf_dir / name).read_bytes())
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": RICH}))
    reference = _transformers_tokenizer(tmp_path)
    template = ChatTemplate.find(str(tmp_path / "tokenizer.json"))
    for messages in (MESSAGES, [*MESSAGES[:2], {"role": "stop", "content": ""}, *MESSAGES[2:]]):
        want = reference.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        assert template.render(messages) == want
    assert '"Und das Wetter? Schön!"' in template.render(MESSAGES)


def test_a_template_file_given_beats_the_one_beside_the_tokenizer(hf_dir, tmp_path):
    path = tmp_path / "mine.jinja"
    path.write_text("{% for m in messages %}{{ m['content'] }}|{% endfor %}")
    assert ChatTemplate.find(str(hf_dir / "tokenizer.json"), str(path)).render(MESSAGES[:2]) == (
        "Be brief.|hello there, how are you?|"
    )


def test_the_default_template_renders_without_jinja_as_jinja_would():
    pytest.importorskip("jinja2")
    tokens = {"bos_token": "<s>", "eos_token": "</s>"}
    plain, jinja = ChatTemplate(tokens=tokens), ChatTemplate(DEFAULT_CHAT_TEMPLATE, "test", tokens)
    assert plain.render(MESSAGES) == jinja.render(MESSAGES)
    assert plain.render(MESSAGES[:1]) == "<s><|system|>\nBe brief.</s>\n<|assistant|>\n"


def test_template_errors_are_input_errors(tmp_path):
    pytest.importorskip("jinja2")
    with pytest.raises(InputError, match="not a valid Jinja template"):
        ChatTemplate("{% for m in messages %}", "broken")
    refusing = ChatTemplate("{{ raise_exception('roles must alternate') }}", "strict")
    with pytest.raises(InputError, match="refused the messages: roles must alternate"):
        refusing.render(MESSAGES)
    config = tmp_path / "tokenizer_config.json"
    config.write_text("{}")
    with pytest.raises(InputError, match="has no chat_template"):
        ChatTemplate.find(None, str(config))
    with pytest.raises(FileNotFoundError):
        ChatTemplate.find(None, str(tmp_path / "missing.jinja"))


# -- stop strings -----------------------------------------------------------------------------


def test_stop_text_holds_back_what_may_start_a_stop_string():
    text = StopText(["\nUser:", "###"])
    assert [text.push(p) for p in ("Hi", " there\n", "Us", "ually")] == ["Hi", " there", "", "\nUsually"]
    assert [text.push(p) for p in (" ok #", "#", "# and more")] == [" ok ", "", ""]
    assert text.stopped and text.text == "Hi there\nUsually ok " and text.flush() == ""
    held = StopText(["END"])
    assert (held.push("the EN"), held.flush(), held.stopped) == ("the ", "EN", False)
    with pytest.raises(InputError, match="non-empty strings"):
        StopText([""])


class LetterTokenizer:
    """Token i is the letter chr(ord('a') + i)."""

    class _Stream:
        def push(self, token):
            return chr(ord("a") + token)

    def stream(self):
        return self._Stream()


def test_generation_stops_when_the_text_contains_a_stop_string():
    """Prompt 'abc' makes the stand-in write d, e, f, g, ...: 'fg' completes at the fourth token."""
    pieces = []
    result = TextGenerator(CountingProgram()).generate(
        [0, 1, 2], 10, tokenizer=LetterTokenizer(), stop_strings=["fg", "zz"], on_text=pieces.append
    )
    assert (result.tokens, result.stopped_by, result.text, pieces) == ([3, 4, 5, 6], "stop_string", "de", ["d", "e"])
    result = TextGenerator(CountingProgram()).generate([0, 1, 2], 3, tokenizer=LetterTokenizer(), stop_strings=["fg"])
    assert (result.tokens, result.stopped_by, result.text) == ([3, 4, 5], "max_new_tokens", "def")
    with pytest.raises(InputError, match="need the tokenizer"):
        TextGenerator(CountingProgram()).generate([0], 3, stop_strings=["x"])


# -- ExecuTorch's statistics --------------------------------------------------------------------

FIXED = Stats(
    model_load_start_ms=1000, model_load_end_ms=1500, inference_start_ms=2000, token_encode_end_ms=2001,
    model_execution_start_ms=2390, model_execution_end_ms=2400, prompt_eval_end_ms=2100, first_token_ms=2100,
    inference_end_ms=2400, aggregate_sampling_time_ms=3, aggregate_model_execution_time_ms=350,
    num_prompt_tokens=10, num_generated_tokens=7,
)  # fmt: skip


def test_stats_json_is_executorchs_line():
    """10 prompt tokens in 100 ms: 100/s; 7 decoded in 300 ms: 23.3333/s (C++'s six digits)."""
    assert FIXED.to_json_string() == (
        '{"prefill_token_per_sec":100,"decode_token_per_sec":23.3333,"prompt_tokens":10,"generated_tokens":7,'
        '"model_load_start_ms":1000,"model_load_end_ms":1500,"inference_start_ms":2000,"inference_end_ms":2400,'
        '"model_execution_start_ms":2390,"model_execution_end_ms":2400,"prompt_eval_end_ms":2100,'
        '"first_token_ms":2100,"aggregate_sampling_time_ms":3,"aggregate_model_execution_time_ms":350,'
        '"SCALING_FACTOR_UNITS_PER_SECOND":1000}'
    )
    instant = Stats(num_prompt_tokens=3, num_generated_tokens=2)  # stages under a millisecond: no rates
    assert json.loads(instant.to_json_string())["prompt_tokens"] == 3
    assert "token_per_sec" not in instant.to_json_string()


def test_stats_report_is_executorchs_print_report():
    lines = FIXED.report().splitlines()
    assert lines[0] == f"PyTorchObserver {FIXED.to_json_string()}"
    assert lines[1:] == [
        "\tPrompt Tokens: 10    Generated Tokens: 7",
        "\tModel Load Time:\t\t0.500000 (seconds)",
        "\tTotal inference time:\t\t0.400000 (seconds)\t\t Rate: \t17.500000 (tokens/second)",
        "\t\tPrompt evaluation:\t0.100000 (seconds)\t\t Rate: \t100.000000 (tokens/second)",
        "\t\tGenerated 7 tokens:\t0.300000 (seconds)\t\t Rate: \t23.333333 (tokens/second)",
        "\tTime to first generated token:\t0.100000 (seconds)",
        "\tSampling time over 17 tokens:\t0.003000 (seconds)",
    ]


def test_reset_keeps_the_load_times_unless_asked():
    stats = dataclasses.replace(FIXED)
    stats.reset()
    assert (stats.model_load_start_ms, stats.model_load_end_ms, stats.num_prompt_tokens) == (1000, 1500, 0)
    stats.reset(all_stats=True)
    assert stats == Stats()


def test_a_generation_fills_the_stats_as_executorch_counts():
    """Prompt tokens as fed; generated tokens are the decode calls' (the first comes from the prefill)."""
    stats = Stats(model_load_start_ms=5, model_load_end_ms=6)
    result = TextGenerator(CountingProgram()).generate([5, 6, 7], 4, stats=stats)
    assert result.stats is stats and (stats.num_prompt_tokens, stats.num_generated_tokens) == (3, 3)
    assert (stats.model_load_start_ms, stats.model_load_end_ms) == (5, 6)
    assert stats.inference_start_ms <= stats.token_encode_end_ms <= stats.prompt_eval_end_ms <= stats.inference_end_ms
    assert stats.first_token_ms == stats.prompt_eval_end_ms
    assert stats.model_execution_start_ms <= stats.model_execution_end_ms <= stats.inference_end_ms
