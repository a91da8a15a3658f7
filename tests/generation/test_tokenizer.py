"""Tokenizer: a byte-level BPE trained here, round trips, special ids, streaming decode, errors."""

import json

import pytest

pytest.importorskip("tokenizers")

from torchedge.errors import InputError  # noqa: E402
from torchedge.generation import Tokenizer, train_bpe_tokenizer  # noqa: E402

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "a small model reads one token at a time and remembers them in its cache",
    "hello world, hello there, hello again",
    "café naïve 日本語",
]


@pytest.fixture(scope="module")
def tokenizer():
    return train_bpe_tokenizer(CORPUS, vocab_size=300)


@pytest.mark.parametrize(
    "text",
    [
        "the quick brown fox",
        "hello world, hello again!",
        "text never seen in training: 42 + 7 = 49",
        "café 日本語 🙂 emoji and accents",
        "  leading spaces\nand a newline",
    ],
)
def test_encode_decode_round_trip(tokenizer, text):
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert all(0 <= i < tokenizer.vocab_size for i in ids)
    assert tokenizer.decode(ids) == text


def test_training_learns_merges_within_the_vocabulary(tokenizer):
    assert 256 + 3 < tokenizer.vocab_size <= 300
    assert len(tokenizer.encode("hello world", add_special_tokens=False)) < len("hello world")


def test_special_tokens_take_the_first_ids_and_bos_is_prepended(tokenizer):
    assert (tokenizer.bos_id, tokenizer.eos_id) == (1, 2)
    ids = tokenizer.encode("hello")
    assert ids[0] == 1 and ids[1:] == tokenizer.encode("hello", add_special_tokens=False)
    assert tokenizer.decode(ids + [2]) == "hello"
    assert tokenizer.decode(ids + [2], skip_special_tokens=False) == "<s>hello</s>"


def test_save_and_load_give_the_same_tokenizer(tokenizer, tmp_path):
    path = tmp_path / "tokenizer.json"
    tokenizer.save(path)
    loaded = Tokenizer.from_file(path)
    assert loaded.encode("café hello 🙂") == tokenizer.encode("café hello 🙂")
    assert (loaded.bos_id, loaded.eos_id, loaded.vocab_size) == (1, 2, tokenizer.vocab_size)


def test_tokenizer_config_beside_the_file_names_bos_and_eos(tokenizer, tmp_path):
    tokenizer.save(tmp_path / "tokenizer.json")
    config = {"bos_token": "</s>", "eos_token": {"content": "<pad>"}}  # a plain name, or an AddedToken dict
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    loaded = Tokenizer.from_file(tmp_path / "tokenizer.json")
    assert (loaded.bos_id, loaded.eos_id) == (2, 0)
    assert Tokenizer.from_file(tmp_path / "tokenizer.json", eos_token="</s>").eos_id == 2


def test_a_tokenizer_without_known_special_tokens_has_no_bos_or_eos():
    plain = train_bpe_tokenizer(CORPUS, vocab_size=300, special_tokens=("<unk>",))
    assert (plain.bos_id, plain.eos_id) == (None, None)
    assert plain.encode("hello") == plain.encode("hello", add_special_tokens=False)


def test_streaming_holds_back_incomplete_characters(tokenizer):
    ids = tokenizer.encode("ok 🙂!", add_special_tokens=False)
    stream = tokenizer.stream()
    pieces = [stream.push(i) for i in ids]
    assert "".join(pieces) == "ok 🙂!"
    assert all("\ufffd" not in p for p in pieces)
    assert "" in pieces  # the emoji is 4 bytes that were never merged: its first tokens print nothing
    assert any(p.endswith("🙂") for p in pieces)


def test_streaming_skips_special_tokens(tokenizer):
    stream = tokenizer.stream()
    pieces = [stream.push(i) for i in tokenizer.encode("hello") + [tokenizer.eos_id]]
    assert pieces[0] == pieces[-1] == "" and "".join(pieces) == "hello"
    assert "".join(tokenizer.stream(skip_special_tokens=False).push(i) for i in [1, 2]) == "<s></s>"


def test_unknown_special_token_is_an_input_error(tmp_path, tokenizer):
    tokenizer.save(tmp_path / "tokenizer.json")
    with pytest.raises(InputError, match="eos token '<end>' is not in the tokenizer's vocabulary"):
        Tokenizer.from_file(tmp_path / "tokenizer.json", eos_token="<end>")


def test_loading_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no tokenizer file"):
        Tokenizer.from_file(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="not a tokenizer.json"):
        Tokenizer.from_file(bad)


@pytest.mark.parametrize(
    "texts, vocab_size, message",
    [
        (CORPUS, 100, "vocab_size must be at least 259"),
        ([], 300, "non-empty list of strings"),
        ([b"bytes"], 300, "non-empty list of strings"),
    ],
)
def test_training_argument_errors(texts, vocab_size, message):
    with pytest.raises(InputError, match=message):
        train_bpe_tokenizer(texts, vocab_size=vocab_size)


def test_encode_takes_text(tokenizer):
    with pytest.raises(InputError, match="encode takes a str"):
        tokenizer.encode([1, 2])
