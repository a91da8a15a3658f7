"""`torchedge export DIR`: a local transformers model directory (what ``save_pretrained`` writes) to a .pte.

A decoder-only LM exports with a KV cache for the LLM runners (torchedge's `TextGenerator` and
ExecuTorch's `TextLLMRunner`, which read the same program and tokenizer.json); a masked LM and a
sequence classifier export as plain ``forward(input_ids, attention_mask)`` programs. Tiny random
models, a tokenizer trained here: nothing is downloaded.
"""

import json
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests.generation.hf_support import byte_level_bpe, tiny_llama
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
    """`byte_level_bpe` on `TEXT`, as a transformers tokenizer."""
    from transformers import PreTrainedTokenizerFast

    backend = byte_level_bpe(TEXT)
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
    return _save(tiny_llama(len(tokenizer), tied=False), tokenizer, tmp_path_factory.mktemp("tiny-llama"))


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


def _pieces(tokenizer, tokens) -> list[str]:
    """What ExecuTorch's runner prints for ``tokens``: it stops at eos without printing it."""
    return [tokenizer.decode([t]) for t in (tokens[:-1] if tokens[-1] == 2 else tokens)]


def test_executorch_text_llm_runner_greedy_tokens_equal_eager(llama_pte, tokenizer, reference):
    runner_module = pytest.importorskip("executorch.extension.llm.runner")
    runner = runner_module.TextLLMRunner(str(llama_pte), str(llama_pte.with_name("llama.tokenizer.json")))
    pieces: list[str] = []
    config = runner_module.GenerationConfig(temperature=0.0, max_new_tokens=NEW_TOKENS, echo=False)
    runner.generate(PROMPT, config, token_callback=pieces.append)
    expected = _pieces(tokenizer, reference)
    assert pieces[: len(expected)] == expected


@pytest.mark.parametrize("options", [["--qlinear", "8da8w"], ["--qlinear", "8w", "--recipe", "xnnpack"]])
def test_quantized_and_delegated_exports_run(llama_dir, tmp_path, prompt_ids, reference, options):
    """The tokens may differ from float eager after quantization; the program runs and starts as eager does."""
    from torchedge.generation import TextGenerator
    from torchedge.runtime import Runtime

    pte = tmp_path / "q.pte"
    status = main(["export", str(llama_dir), "-o", str(pte), "--max-seq-len", "32", *options])
    assert status == 0
    result = TextGenerator(Runtime.get().load_program(str(pte))).generate(prompt_ids, 4)
    assert len(result.tokens) >= 1 and result.tokens[0] == reference[0]


@pytest.fixture(scope="module")
def low_bit_exports(llama_dir, tmp_path_factory):
    """.pte files of the tiny Llama per (recipe, --qlinear), exported once for the tests below."""
    out, made = tmp_path_factory.mktemp("low-bit"), {}

    def export(recipe: str, qlinear: str | None):
        if (recipe, qlinear) not in made:
            pte = out / f"{recipe}-{qlinear}.pte"
            argv = ["export", str(llama_dir), "-o", str(pte), "--max-seq-len", "32", "--recipe", recipe]
            assert main([*argv, "--qlinear", qlinear] if qlinear else argv) == 0
            made[recipe, qlinear] = pte
        return made[recipe, qlinear]

    return export


def _eager_quantized(llama_dir, qlinear: str | None, bfloat16_scales: bool = False):
    """The directory's model in eager, its linear layers quantized by torchao (``qlinear`` None: float);
    ``bfloat16_scales``: their scales rounded to bfloat16 (as XNNPACK's 4-bit filters store them)."""
    from transformers import AutoModelForCausalLM

    from torchedge.cli.recipes import QLINEAR_TO_QUANTIZE, quantize_model

    model = AutoModelForCausalLM.from_pretrained(llama_dir).eval()
    if qlinear is None:
        return model
    model = quantize_model(model, QLINEAR_TO_QUANTIZE[qlinear], 32)
    for layer in model.modules():
        if bfloat16_scales and isinstance(layer, torch.nn.Linear):
            layer.weight.scale.data = layer.weight.scale.data.to(torch.bfloat16).float()
    return model


ACTIVATIONS_QUANTIZED = {"8da4w": "4w", "8da8w": "8w"}  # -> the same weights with float activations


@pytest.mark.parametrize("qlinear", ["8da4w", "4w", "8da8w", "8w"])
def test_onnxruntime_low_bit_linears_match_eager_quantized(llama_dir, low_bit_exports, prompt_ids, qlinear):
    """Every quantized linear runs as ONNX Runtime's MatMulNBits, on any number of tokens per call.

    Weight-only recipes give torchao eager's logits and greedy tokens. With int8 activations,
    MLAS quantizes each block of a row symmetrically (step: largest magnitude / 127) where torchao
    quantizes the row asymmetrically (step: range / 255, about half as large): MLAS departs from
    the float-activation result (the weight-only recipe's) up to about twice as far as torchao,
    so the logits differ from eager's by up to about three times torchao's own departure; the
    test allows four (measured on tiny Llamas: about two)."""
    from torchedge.generation import TextGenerator
    from torchedge.runtime import Runtime

    pte = low_bit_exports("onnxruntime", qlinear)
    model = _eager_quantized(llama_dir, qlinear)
    linears = sum(isinstance(m, torch.nn.Linear) for m in model.modules())
    assert pte.read_bytes().count(b"MatMulNBits") == linears  # one ONNX node per layer
    program = Runtime.get().load_program(str(pte))
    ids = torch.tensor([prompt_ids])
    with torch.no_grad():
        expected = model(input_ids=ids).logits.numpy()
    (logits,) = program.load_method("forward").execute([ids.numpy(), np.arange(ids.shape[1])])
    if qlinear in ACTIVATIONS_QUANTIZED:
        with torch.no_grad():
            float_activations = _eager_quantized(llama_dir, ACTIVATIONS_QUANTIZED[qlinear])(input_ids=ids).logits
        departure = np.abs(expected - float_activations.numpy()).max()
        assert 0 < np.abs(logits - expected).max() <= 4 * departure
        return
    np.testing.assert_allclose(logits, expected, rtol=0, atol=1e-3)
    tokens = TextGenerator(program).generate(prompt_ids, NEW_TOKENS).tokens
    reference, sequence = [], list(prompt_ids)
    with torch.no_grad():
        while len(reference) < len(tokens):
            reference.append(int(model(input_ids=torch.tensor([sequence])).logits[0, -1].argmax()))
            sequence.append(reference[-1])
    assert tokens == reference


def _executorch(pte, prompt_ids, out) -> tuple[list[str], np.ndarray]:
    """ExecuTorch's `TextLLMRunner` pieces (greedy, from `PROMPT`) and its runtime's forward logits
    on ``prompt_ids``, in a subprocess (a crash there fails the test, not the session)."""
    pytest.importorskip("executorch.extension.llm.runner")
    script = f"""
        import json, numpy as np, torch
        from executorch.extension.llm.runner import GenerationConfig, TextLLMRunner
        from executorch.runtime import Runtime
        pieces = []
        config = GenerationConfig(temperature=0.0, max_new_tokens={NEW_TOKENS}, echo=False)
        runner = TextLLMRunner({str(pte)!r}, {str(pte.with_suffix(".tokenizer.json"))!r})
        runner.generate({PROMPT!r}, config, token_callback=pieces.append)
        open({str(out / "pieces.json")!r}, "w").write(json.dumps(pieces))
        forward = Runtime.get().load_program({str(pte)!r}).load_method("forward")
        ids = torch.tensor([{list(prompt_ids)!r}])
        np.save({str(out / "logits.npy")!r}, forward.execute([ids, torch.arange(ids.shape[1])])[0].numpy())
    """
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads((out / "pieces.json").read_text()), np.load(out / "logits.npy")


@pytest.mark.parametrize("qlinear", [None, "8da4w", "8da8w"])
def test_xnnpack_exports_run_on_both_runtimes_as_eager(
    llama_dir, low_bit_exports, tokenizer, prompt_ids, tmp_path, qlinear
):
    """``--recipe xnnpack``: every linear layer is an XNNPACK fully connected node (8da4w: int4
    filters with bfloat16 scales, 8da8w: int8 filters), forward keeps 1 to 32 tokens a call. The
    reference is eager on the float or torchao-quantized model, 8da4w's scales rounded to bfloat16;
    torchedge's runtime and ExecuTorch's give its logits and its greedy tokens."""
    from torchedge.devtools.describe import describe_program
    from torchedge.generation import TextGenerator
    from torchedge.runtime import Runtime

    pte = low_bit_exports("xnnpack", qlinear)
    model = _eager_quantized(llama_dir, qlinear, bfloat16_scales=qlinear == "8da4w")
    linears = sum(isinstance(m, torch.nn.Linear) for m in model.modules())
    lowered = re.findall(r"(\d+) x XNNFullyConnected", describe_program(str(pte)))
    assert sum(map(int, lowered)) == linears
    ids = list(prompt_ids)
    reference, sequence = [], list(ids)
    with torch.no_grad():
        expected = model(input_ids=torch.tensor([ids])).logits.numpy()
        while len(reference) < NEW_TOKENS and (not reference or reference[-1] != 2):
            reference.append(int(model(input_ids=torch.tensor([sequence])).logits[0, -1].argmax()))
            sequence.append(reference[-1])
    program = Runtime.get().load_program(str(pte))
    (logits,) = program.load_method("forward").execute([np.array([ids]), np.arange(len(ids))])
    np.testing.assert_allclose(logits, expected, rtol=0, atol=1e-3)
    assert TextGenerator(program).generate(ids, NEW_TOKENS).tokens == reference
    pieces, executorch_logits = _executorch(pte, ids, tmp_path)
    np.testing.assert_allclose(executorch_logits, expected, rtol=0, atol=1e-3)
    expected_pieces = _pieces(tokenizer, reference)
    assert pieces[: len(expected_pieces)] == expected_pieces


def _count(data: bytes, array: np.ndarray) -> int:
    return data.count(np.ascontiguousarray(array).tobytes())


def test_low_bit_weights_are_packed_and_stored_once(llama_dir, llama_pte, low_bit_exports):
    """ONNX Runtime's .pte holds each layer's 4-bit weight once, two values a byte (smaller than the
    portable program, whose int8 bytes hold one each); the portable .pte holds each float matrix once."""
    from torchedge.backends.onnxruntime.ops_lowbit import pack_weight

    model = _eager_quantized(llama_dir, "8da4w")
    packed = low_bit_exports("onnxruntime", "8da4w").read_bytes()
    portable = low_bit_exports("portable", "8da4w").read_bytes()
    assert len(packed) < len(portable)
    layers = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert layers
    for layer in layers:
        w = layer.weight
        weight, scales, _, _ = pack_weight(w.qdata.numpy(), w.scale.numpy(), w.zero_point.numpy(), 4, 32)
        assert (_count(packed, weight), _count(packed, scales)) == (1, 1)
    from transformers import AutoModelForCausalLM

    data = llama_pte.read_bytes()
    for name, parameter in AutoModelForCausalLM.from_pretrained(llama_dir).named_parameters():
        if parameter.dim() == 2:  # a linear layer's weight may be stored transposed
            matrix = parameter.detach().numpy()
            assert _count(data, matrix) + _count(data, matrix.T) == 1, name


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
        (["--recipe", "xnnpack", "--backend", "onnxruntime"], "give one of the two"),
        (["--qlinear", "8w", "--quantize", "8da4w"], "give one of the two"),
    ],
)
def test_conflicting_or_missing_recipes_are_one_line_errors(tmp_path, capsys, options, message):
    assert message in _error(capsys, ["export", str(tmp_path), *options])
