"""`torchedge export DIR`: a local transformers model directory (what ``save_pretrained`` writes) to a .pte.

A decoder-only LM exports with a KV cache for the LLM runners (torchedge's `TextGenerator` and
ExecuTorch's `TextLLMRunner`, which read the same program and tokenizer.json); a masked LM and a
sequence classifier export as plain ``forward(input_ids, attention_mask)`` programs. Tiny random
models, a tokenizer trained here: nothing is downloaded.
"""

import json

import numpy as np
import pytest

from torchedge.cli.main import main

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
torch = pytest.importorskip("torch")

TEXT = (
    "Once upon a time there was a small model that lived on a phone.",
    "It read one token at a time and remembered every one of them in its cache.",
    "The quick brown fox jumps over the lazy dog.",
    "Hello world, how are you today? I am fine, thank you.",
)
PROMPT = "Once upon a time"
NEW_TOKENS = 12


def _tokenizer():
    """A byte-level BPE whose alphabet is the ASCII of `TEXT` only: every token decodes to whole
    characters, so ExecuTorch's runner can hand each one to Python as a str."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=200, special_tokens=["<pad>", "<s>", "</s>"], show_progress=False)
    backend.train_from_iterator(TEXT, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>", pad_token="<pad>")


@pytest.fixture(scope="module")
def tokenizer():
    return _tokenizer()


def _save(model, tokenizer, path):
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory, tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        initializer_range=0.5,  # logits far apart: greedy choices are not decided by rounding
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    return _save(LlamaForCausalLM(config).eval(), tokenizer, tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="module")
def llama_pte(llama_dir, tmp_path_factory):
    pte = tmp_path_factory.mktemp("out") / "llama.pte"
    assert main(["export", str(llama_dir), "-o", str(pte), "--max-seq-len", "48"]) == 0
    return pte


@pytest.fixture(scope="module")
def prompt_ids(tokenizer):
    return tokenizer.encode(PROMPT, add_special_tokens=False)


@pytest.fixture(scope="module")
def reference(llama_dir, prompt_ids):
    """Greedy tokens of the directory's model in eager, the whole sequence each step (no cache), to the first eos."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(llama_dir).eval()
    ids, tokens = list(prompt_ids), []
    with torch.no_grad():
        while len(tokens) < NEW_TOKENS:
            token = int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax())
            tokens.append(token)
            ids.append(token)
            if token == 2:
                break
    assert len(set(tokens)) > 3  # the tiny model does not just repeat itself
    return tokens


def test_the_program_follows_executorch_llm_conventions(llama_pte, llama_dir):
    from torchedge.runtime import Runtime

    program = Runtime.get().load_program(str(llama_pte))
    assert "forward" in program.method_names
    assert "decode" not in program.method_names  # ExecuTorch's TextLLMRunner would run it on a cache of its own

    def constant(name):
        return program.load_method(name).execute([])[0]

    assert constant("get_max_seq_len") == constant("get_max_context_len") == 48
    assert constant("get_vocab_size") == json.loads((llama_dir / "config.json").read_text())["vocab_size"]
    assert (constant("get_bos_id"), constant("use_kv_cache"), constant("enable_dynamic_shape")) == (1, True, True)
    tokenizer_json = llama_pte.with_name("llama.tokenizer.json")
    assert tokenizer_json.read_bytes() == (llama_dir / "tokenizer.json").read_bytes()


def test_torchedge_greedy_tokens_equal_eager(llama_pte, prompt_ids, reference):
    from torchedge.generation import TextGenerator
    from torchedge.runtime import Runtime

    generator = TextGenerator(Runtime.get().load_program(str(llama_pte)))
    assert generator.eos_ids == (2,)
    assert generator.generate(prompt_ids, NEW_TOKENS).tokens == reference


def test_executorch_text_llm_runner_greedy_tokens_equal_eager(llama_pte, tokenizer, reference):
    runner_module = pytest.importorskip("executorch.extension.llm.runner")
    runner = runner_module.TextLLMRunner(str(llama_pte), str(llama_pte.with_name("llama.tokenizer.json")))
    pieces: list[str] = []
    config = runner_module.GenerationConfig(temperature=0.0, max_new_tokens=NEW_TOKENS, echo=False)
    runner.generate(PROMPT, config, token_callback=pieces.append)
    expected = [tokenizer.decode([t]) for t in reference]
    if reference[-1] == 2:  # ExecuTorch's runner stops at eos without printing it
        expected = expected[:-1]
    assert pieces[: len(expected)] == expected


@pytest.mark.parametrize("options", [["--qlinear", "8da8w"], ["--qlinear", "8w", "--recipe", "xnnpack"]])
def test_quantized_and_delegated_exports_run(llama_dir, tmp_path, capsys, prompt_ids, reference, options):
    """The tokens may differ from float eager after quantization; the program runs and starts as eager does."""
    from torchedge.generation import TextGenerator
    from torchedge.runtime import Runtime

    pte = tmp_path / "q.pte"
    status = main(["export", str(llama_dir), "-o", str(pte), "--max-seq-len", "32", *options])
    if status == 2 and "does not keep the dynamic sequence length" in capsys.readouterr().err:
        pytest.xfail("the XNNPACK lowering fixes forward's sequence length to the example's")
    assert status == 0
    result = TextGenerator(Runtime.get().load_program(str(pte))).generate(prompt_ids, 4)
    assert len(result.tokens) >= 1 and result.tokens[0] == reference[0]


def _plain(tmp_path, tokenizer, make_model, expected_shape):
    from torchedge.runtime import Runtime

    torch.manual_seed(0)
    model = make_model().eval()
    directory = _save(model, tokenizer, tmp_path / "model")
    pte = tmp_path / "plain.pte"
    assert main(["export", str(directory), "-o", str(pte), "--max-seq-len", "16"]) == 0
    input_ids = torch.tensor([tokenizer.encode(TEXT[0] + " " + TEXT[1], add_special_tokens=False)[:16]])
    assert input_ids.shape == (1, 16)
    mask = torch.ones_like(input_ids)
    with torch.no_grad():
        expected = model(input_ids=input_ids, attention_mask=mask).logits.numpy()
    (out,) = Runtime.get().load_program(str(pte)).load_method("forward").execute([input_ids.numpy(), mask.numpy()])
    assert out.shape == expected_shape
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    assert pte.with_name("plain.tokenizer.json").is_file()


def _bert_config(tokenizer, **kwargs):
    from transformers import BertConfig

    sizes = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
    return BertConfig(vocab_size=len(tokenizer), max_position_embeddings=64, **sizes, **kwargs)


def test_a_masked_lm_directory_exports_a_plain_program_equal_to_eager(tmp_path, tokenizer):
    from transformers import BertForMaskedLM

    _plain(tmp_path, tokenizer, lambda: BertForMaskedLM(_bert_config(tokenizer)), (1, 16, len(tokenizer)))


def test_a_sequence_classification_directory_exports_a_plain_program_equal_to_eager(tmp_path, tokenizer):
    from transformers import BertForSequenceClassification

    config = _bert_config(tokenizer, num_labels=3)
    _plain(tmp_path, tokenizer, lambda: BertForSequenceClassification(config), (1, 3))


def _error(capsys, argv) -> str:
    assert main(argv) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("[torchedge]")]
    assert len(errors) == 1 and errors[0].startswith("torchedge export: error:")  # progress lines aside
    return errors[0]


def test_a_directory_without_config_json_is_a_one_line_error(tmp_path, capsys):
    (tmp_path / "weights.bin").write_bytes(b"")
    assert "has no config.json" in _error(capsys, ["export", str(tmp_path)])


def test_an_unsupported_architecture_is_a_one_line_error(tmp_path, capsys):
    config = {"architectures": ["T5ForConditionalGeneration"], "model_type": "t5"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    err = _error(capsys, ["export", str(tmp_path)])
    assert "'T5ForConditionalGeneration'" in err and "not supported" in err


@pytest.mark.parametrize(
    "options, message",
    [
        (["--qlinear", "4w"], "--qlinear 4w: torchedge has no such recipe yet; use one of 8da4w, 8da8w, 8w"),
        (["--recipe", "xnnpack", "--backend", "onnxruntime"], "give one of the two"),
        (["--qlinear", "8w", "--quantize", "8da4w"], "give one of the two"),
    ],
)
def test_conflicting_or_missing_recipes_are_one_line_errors(tmp_path, capsys, options, message):
    assert message in _error(capsys, ["export", str(tmp_path), *options])
