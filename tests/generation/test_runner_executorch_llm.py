"""Programs made by ExecuTorch's own LLM export run on torchedge's runner.

A tiny Llama of ExecuTorch's ``examples/models/llama`` (what ``export_llama`` /
``executorch.extension.llm.export`` builds: ``forward(tokens [1, T], input_pos [1]) -> logits of the
last position [1, V]``, a dynamic ``T``), with and without its custom ``llama::update_cache`` /
``llama::custom_sdpa`` operators, compiled by the real ExecuTorch with export_llama's metadata.
References: the same model in eager PyTorch, the real ExecuTorch runtime on the same bytes, and
ExecuTorch's ``TextLLMRunner`` (its text and its statistics).
"""

import dataclasses
import json

import numpy as np
import pytest

from tests.generation.hf_support import byte_level_bpe
from torchedge.generation import Stats, TextGenerator, Tokenizer
from torchedge.runtime import Runtime

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.examples.models.llama.llama_transformer")

CONTEXT = 32
PROMPT = [1, 17, 42, 99, 3, 150, 7]
TEXT = (
    "Once upon a time there was a small model that lived on a phone.",
    "It read one token at a time and remembered every one of them in its cache.",
    "The quick brown fox jumps over the lazy dog. Hello world, how are you today? I am fine, thank you.",
)


@pytest.fixture(scope="module")
def tokenizer_path(tmp_path_factory):
    """`byte_level_bpe` on `TEXT`, saved as tokenizer.json."""
    path = tmp_path_factory.mktemp("tokenizer") / "tokenizer.json"
    byte_level_bpe(TEXT).save(str(path))
    return path


def _model(custom_ops: bool, vocab: int):
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs
    from executorch.examples.models.llama.source_transformation.custom_kv_cache import (
        replace_kv_cache_with_custom_kv_cache,
    )
    from executorch.examples.models.llama.source_transformation.sdpa import replace_sdpa_with_custom_op

    torch.manual_seed(0)
    args = ModelArgs(
        dim=64, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=vocab, multiple_of=32, max_seq_len=CONTEXT,
        max_context_len=CONTEXT, use_kv_cache=True, enable_dynamic_shape=True,
    )  # fmt: skip
    model = construct_transformer(args).eval()
    for p in model.parameters():
        p.data.normal_(0, 0.2)  # random weights whose greedy tokens vary
    if custom_ops:
        model = replace_sdpa_with_custom_op(replace_kv_cache_with_custom_kv_cache(model))
    return model


def _eager_greedy(model, prompt, count):
    tokens, ids, position = [], torch.tensor([prompt]), 0
    with torch.no_grad():
        while len(tokens) < count:
            logits = model(ids, {"input_pos": torch.tensor([position])})
            position += ids.shape[1]
            tokens.append(int(logits[0, -1].argmax() if logits.dim() == 3 else logits[0].argmax()))
            ids = torch.tensor([[tokens[-1]]])
    return tokens


@pytest.fixture(scope="module", params=[True, False], ids=["custom-ops", "aten-sdpa"])
def llama(request, tmp_path_factory, tokenizer_path):
    """(the .pte path, eager greedy tokens of PROMPT): the export is export_llama's, step by step."""
    from executorch.exir import EdgeCompileConfig, to_edge

    vocab = Tokenizer.from_file(tokenizer_path).vocab_size
    model = _model(request.param, vocab)
    example = (torch.tensor([[2, 3, 4]]), {"input_pos": torch.tensor([0])})
    dims = ({1: torch.export.Dim("token_dim", max=CONTEXT - 1)}, {"input_pos": {0: 1}})
    with torch.no_grad():
        exported = torch.export.export(model, example, dynamic_shapes=dims, strict=True)
    metadata = {
        "get_max_seq_len": CONTEXT, "get_max_context_len": CONTEXT, "get_n_layers": 2, "get_vocab_size": vocab,
        "use_kv_cache": True, "use_sdpa_with_kv_cache": request.param, "enable_dynamic_shape": True,
        "get_bos_id": 1, "get_eos_ids": [2],
    }  # fmt: skip
    edge = to_edge(exported, constant_methods=metadata, compile_config=EdgeCompileConfig(_check_ir_validity=False))
    path = tmp_path_factory.mktemp("et-llama") / "llama.pte"
    path.write_bytes(edge.to_executorch().buffer)
    reference = _eager_greedy(model, PROMPT, CONTEXT - len(PROMPT))
    return path, reference


def test_the_program_has_export_llamas_layout(llama):
    program = Runtime.get().load_program(str(llama[0]))
    tokens, input_pos = program.metadata("forward").inputs
    assert (list(tokens.shape), tokens.dynamic, list(input_pos.shape)) == ([1, CONTEXT - 1], True, [1])


def test_torchedge_greedy_tokens_equal_eager(llama):
    path, reference = llama
    generator = TextGenerator(Runtime.get().load_program(str(path)))
    assert (generator.max_seq_len, generator.eos_ids) == (CONTEXT, (2,))
    assert len(set(reference[:16])) > 4  # the model does not just repeat itself
    for prefill_chunk in (None, 3, 1):
        assert generator.generate(PROMPT, 16, prefill_chunk=prefill_chunk, stop_tokens=()).tokens == reference[:16]
    result = generator.generate(PROMPT, 100)
    assert result.stopped_by == "max_seq_len" and result.tokens == reference


def test_executorch_runs_the_same_bytes_to_the_same_tokens(llama):
    """The real ExecuTorch runtime on the program: start positions, last-position logits."""
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (registers llama:: kernels)
    from executorch.runtime import Runtime as ETRuntime

    path, reference = llama
    forward = ETRuntime.get().load_program(path.read_bytes()).load_method("forward")
    logits = forward.execute([torch.tensor([PROMPT]), torch.tensor([0])])[0]
    tokens = [int(logits[0].argmax())]
    while len(tokens) < 16:
        logits = forward.execute([torch.tensor([tokens[-1:]]), torch.tensor([len(PROMPT) + len(tokens) - 1])])[0]
        tokens.append(int(logits[0].argmax()))
    assert tokens == reference[:16]


def test_text_and_statistics_agree_with_executorchs_text_llm_runner(llama, tokenizer_path):
    """ExecuTorch's runner on the same program and tokenizer: the same pieces of text, the same
    token counts, and its statistics' JSON keys in the same order."""
    runner_module = pytest.importorskip("executorch.extension.llm.runner")
    import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401

    path, _ = llama
    runner = runner_module.TextLLMRunner(str(path), str(tokenizer_path))
    pieces, reports = [], []
    config = runner_module.GenerationConfig(temperature=0.0, max_new_tokens=8, echo=False)
    runner.generate("hello there", config, token_callback=pieces.append, stats_callback=reports.append)
    theirs = json.loads(reports[0].to_json_string())

    tokenizer = Tokenizer.from_file(tokenizer_path)
    ours_pieces = []
    result = TextGenerator(Runtime.get().load_program(str(path))).generate(
        tokenizer.encode("hello there", add_special_tokens=False),  # ExecuTorch's runner adds no bos here
        8,
        stop_tokens=(2,),
        tokenizer=tokenizer,
        on_text=ours_pieces.append,
    )
    assert len(result.tokens) > 2 and result.text == "".join(ours_pieces) == "".join(pieces).rstrip("\n")
    ours = json.loads(result.stats.to_json_string())
    assert (ours["prompt_tokens"], ours["generated_tokens"]) == (theirs["prompt_tokens"], theirs["generated_tokens"])
    optional = {"prefill_token_per_sec", "decode_token_per_sec"}  # present when the stage took >= 1 ms
    assert [k for k in ours if k not in optional] == [k for k in theirs if k not in optional]
    assert {f.name for f in dataclasses.fields(Stats)} <= set(dir(reports[0]))  # ExecuTorch's field names


def test_logits_of_another_shape_are_an_input_error():
    from types import SimpleNamespace

    from torchedge.errors import InputError

    meta = SimpleNamespace(
        inputs=(
            SimpleNamespace(shape=(1, 4), dtype=np.dtype(np.int64), dynamic=True),
            SimpleNamespace(shape=(1,), dtype=np.dtype(np.int64), dynamic=False),
        )
    )
    program = SimpleNamespace(
        method_names=["forward"],
        metadata=lambda name: meta,
        load_method=lambda name: SimpleNamespace(execute=lambda inputs: [np.zeros((2, 5), np.float32)]),
    )
    with pytest.raises(InputError, match=r"logits \[1, 2, vocab\] or the last position's \[1, vocab\]"):
        TextGenerator(program).generate([1, 2], 3)
