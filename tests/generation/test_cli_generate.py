"""`torchedge export llama-kv` and `torchedge generate`: streaming text, rates, one-line errors."""

import io
import json

import pytest

from torchedge.cli.main import main

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def llama_kv(tmp_path_factory):
    pte = tmp_path_factory.mktemp("llm") / "llama-kv.pte"
    assert main(["export", "llama-kv", "-o", str(pte)]) == 0
    return pte, pte.with_name("llama-kv.tokenizer.json")


def _generate(llama_kv, *options):
    pte, tokenizer = llama_kv
    return main(["generate", str(pte), "--tokenizer", str(tokenizer), "--prompt", "Once upon a time", *options])


def test_export_writes_the_program_and_a_tokenizer(llama_kv, capsys):
    pte, tokenizer = llama_kv
    assert pte.stat().st_size > 0 and tokenizer.stat().st_size > 0
    assert main(["inspect", str(pte)]) == 0
    text = capsys.readouterr().out
    for method in ("forward", "get_max_seq_len", "get_max_context_len", "get_vocab_size", "get_bos_id", "get_eos_ids"):
        assert f"method '{method}'" in text


def test_generate_streams_text_then_prints_rates(llama_kv, capsys):
    no_stop = ("--stop", "9999")  # an id the model never produces: run to --max-new-tokens
    assert _generate(llama_kv, "--max-new-tokens", "12", *no_stop) == 0
    text, rates = capsys.readouterr().out.splitlines()[-2:]
    assert "prefill: 5 tokens" in rates and "decode: 12 tokens" in rates and "stopped by max_new_tokens" in rates
    assert _generate(llama_kv, "--max-new-tokens", "12", *no_stop) == 0
    assert capsys.readouterr().out.splitlines()[-2] == text  # greedy: the same text again


def test_generate_stops_at_a_stop_id(llama_kv, capsys):
    from torchedge.generation import TextGenerator, Tokenizer
    from torchedge.runtime import Runtime

    pte, tokenizer = llama_kv
    prompt = Tokenizer.from_file(tokenizer).encode("Once upon a time")
    tokens = TextGenerator(Runtime.get().load_program(str(pte))).generate(prompt, 12, stop_tokens=[9999]).tokens
    assert _generate(llama_kv, "--max-new-tokens", "12", "--stop", "9999", str(tokens[3])) == 0
    rates = capsys.readouterr().out.splitlines()[-1]
    assert f"decode: {tokens.index(tokens[3]) + 1} tokens" in rates and "stopped by stop_token" in rates


def test_generate_is_reproducible_with_a_seed(llama_kv, capsys):
    options = ("--max-new-tokens", "10", "--temperature", "0.9", "--top-k", "40", "--top-p", "0.95", "--seed", "5")
    texts = []
    for _ in range(2):
        assert _generate(llama_kv, *options) == 0
        texts.append(capsys.readouterr().out.splitlines()[0])
    assert texts[0] == texts[1]


@pytest.mark.parametrize(
    "options, message",
    [
        (("--top-p", "2", "--temperature", "1"), "top_p must be a number in (0, 1]"),
        (("--max-new-tokens", "0"), "max_new_tokens must be an integer >= 1"),
    ],
)
def test_bad_options_are_one_line_errors(llama_kv, capsys, options, message):
    assert _generate(llama_kv, *options) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("torchedge generate: error:") and message in err and "\n" not in err


def test_missing_files_and_kv_dynamic_are_errors(llama_kv, tmp_path, capsys):
    pte, _ = llama_kv
    assert main(["generate", str(pte), "--tokenizer", str(tmp_path / "none.json"), "--prompt", "hi"]) == 2
    assert "no tokenizer file" in capsys.readouterr().err
    assert main(["export", "llama-kv", "--dynamic", "0:1:2:8"]) == 2
    assert "already dynamic" in capsys.readouterr().err
    assert main(["export", "mamba-kv"]) == 2
    assert "unknown KV-cache model 'mamba-kv'" in capsys.readouterr().err


def _reference(llama_kv, prompt_ids, count, **options):
    """The generation the command line should print, from the Python API."""
    from torchedge.generation import TextGenerator, Tokenizer
    from torchedge.runtime import Runtime

    pte, tokenizer = llama_kv
    generator = TextGenerator(Runtime.get().load_program(str(pte)))
    return generator.generate(prompt_ids, count, tokenizer=Tokenizer.from_file(tokenizer), **options)


def test_stats_prints_executorchs_observer_line(llama_kv, capsys):
    from torchedge.generation import Tokenizer

    assert _generate(llama_kv, "--max-new-tokens", "6", "--stop", "9999", "--stats") == 0
    lines = capsys.readouterr().out.splitlines()
    observer = [line for line in lines if line.startswith("PyTorchObserver ")]
    assert len(observer) == 1
    stats = json.loads(observer[0].removeprefix("PyTorchObserver "))
    prompt = Tokenizer.from_file(llama_kv[1]).encode("Once upon a time")
    assert (stats["prompt_tokens"], stats["generated_tokens"]) == (len(prompt), 5)  # 6 new: 1 prefill + 5 decoded
    assert stats["model_load_start_ms"] <= stats["model_load_end_ms"] <= stats["inference_start_ms"]
    assert stats["inference_start_ms"] <= stats["first_token_ms"] <= stats["inference_end_ms"]
    assert f"\tPrompt Tokens: {len(prompt)}    Generated Tokens: 5" in lines


def test_a_stop_string_cuts_the_text(llama_kv, capsys):
    from torchedge.generation import Tokenizer

    prompt = Tokenizer.from_file(llama_kv[1]).encode("Once upon a time")
    text = _reference(llama_kv, prompt, 12, stop_tokens=[9999]).text
    assert len(text) >= 6
    stop = text[3:6]
    assert _generate(llama_kv, "--max-new-tokens", "12", "--stop", "9999", "--stop-string", stop) == 0
    out = capsys.readouterr().out
    assert out.startswith(text[: text.find(stop)] + "\nprefill: ") and "stopped by stop_string" in out


def test_chat_reads_one_turn_per_line_until_the_end_of_input(llama_kv, capsys, monkeypatch):
    from torchedge.generation import ChatTemplate, Conversation, TextGenerator, Tokenizer
    from torchedge.runtime import Runtime

    pte, tokenizer = llama_kv
    monkeypatch.setattr("sys.stdin", io.StringIO("Hello there\n\nTell me more\n"))
    options = ("--max-new-tokens", "6", "--stop", "9999")
    assert main(["generate", str(pte), "--tokenizer", str(tokenizer), "--chat", "--system", "Be brief.", *options]) == 0
    replies = capsys.readouterr().out.split("stopped by max_new_tokens\n")

    chat = Conversation(
        TextGenerator(Runtime.get().load_program(str(pte))),
        Tokenizer.from_file(tokenizer),
        ChatTemplate.find(str(tokenizer)),
        system="Be brief.",
        stop_tokens=[9999],
    )
    expected = [chat.say(text, 6).text for text in ("Hello there", "Tell me more")]
    assert len(replies) == 3 and replies[2] == ""  # two turns: the empty line is skipped
    for reply, text in zip(replies, expected):
        assert reply.startswith(text + "\nprefill: ")


def test_neither_a_prompt_nor_chat_is_an_error(llama_kv, capsys):
    pte, tokenizer = llama_kv
    assert main(["generate", str(pte), "--tokenizer", str(tokenizer)]) == 2
    assert "give --prompt TEXT, or --chat" in capsys.readouterr().err
