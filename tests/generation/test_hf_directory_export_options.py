"""`export_pretrained` / `torchedge export DIR`: quantized embeddings, dtypes, progress lines.

Tiny random Llamas saved with ``save_pretrained`` (no tokenizer: prompts are token ids). References
are PyTorch eager on the same model, its embedding dequantized here by hand where the export quantizes it.
"""

import io
import re

import numpy as np
import pytest

from tests.generation.hf_support import tiny_llama
from torchedge.cli.main import main
from torchedge.errors import ExportError
from torchedge.serialize import deserialize_pte

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

PROMPT = [5, 17, 42, 9, 133, 71]
NEW_TOKENS = 10
VOCAB, HIDDEN = 200, 64


def _llama(tmp_path_factory, name: str, tied: bool):
    path = tmp_path_factory.mktemp(name)
    tiny_llama(VOCAB, tied).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tied_dir(tmp_path_factory):
    return _llama(tmp_path_factory, "tied-llama", tied=True)


@pytest.fixture(scope="module")
def untied_dir(tmp_path_factory):
    return _llama(tmp_path_factory, "untied-llama", tied=False)


def _dequantized(weight: torch.Tensor, bits: int, group: int) -> torch.Tensor:
    """Symmetric round-to-nearest per group of ``group`` columns, back to float: the reference's embedding."""
    high = 2 ** (bits - 1) - 1
    rows = weight.reshape(weight.shape[0], -1, group)
    scale = rows.abs().amax(dim=-1, keepdim=True) / high
    return (torch.clamp(torch.round(rows / scale), -high - 1, high) * scale).reshape(weight.shape)


def _eager_greedy(model, prompt, count: int) -> list[int]:
    ids, tokens = list(prompt), []
    with torch.no_grad():
        while len(tokens) < count:
            tokens.append(int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
            ids.append(tokens[-1])
    return tokens


def _executorch_greedy(pte, prompt, count: int) -> list[int]:
    """Greedy tokens from ExecuTorch's runtime: the prompt in one call, then one token per call."""
    runtime = pytest.importorskip("executorch.runtime")
    import executorch.kernels.quantized  # noqa: F401  (ExecuTorch's quantized kernels)

    forward = runtime.Runtime.get().load_program(str(pte)).load_method("forward")
    (logits,) = forward.execute([torch.tensor([prompt]), torch.arange(len(prompt))])
    tokens = [int(logits[0, -1].argmax())]
    while len(tokens) < count:
        position = torch.tensor([len(prompt) + len(tokens) - 1])
        (logits,) = forward.execute([torch.tensor([tokens[-1:]]), position])
        tokens.append(int(logits[0, -1].argmax()))
    return tokens


@pytest.mark.parametrize("scheme, bits, group", [("8w", 8, HIDDEN), ("4w", 4, 16)])
def test_a_quantized_embedding_generates_eager_tokens_on_both_runtimes(tied_dir, tmp_path, scheme, bits, group):
    """The embedding is quantized; the head, tied to it, keeps its float weight (stored once, in the head)."""
    from transformers import AutoModelForCausalLM

    from torchedge.generation import TextGenerator
    from torchedge.models import export_pretrained
    from torchedge.runtime import Runtime

    pte = export_pretrained(
        tied_dir, tmp_path / "q.pte", qembedding=scheme, qembedding_group_size=group, max_seq_len=32, quiet=True
    )
    model = AutoModelForCausalLM.from_pretrained(tied_dir).eval()
    weight = model.get_input_embeddings().weight.detach().clone()
    model.lm_head.weight = torch.nn.Parameter(weight.clone())  # untie: the head stays float
    model.get_input_embeddings().weight = torch.nn.Parameter(_dequantized(weight, bits, group))
    program = Runtime.get().load_program(str(pte))
    (logits,) = program.load_method("forward").execute([np.array([PROMPT]), np.arange(len(PROMPT))])
    with torch.no_grad():
        expected = model(input_ids=torch.tensor([PROMPT])).logits.numpy()
    np.testing.assert_allclose(logits, expected, rtol=0, atol=1e-3)
    reference = _eager_greedy(model, PROMPT, NEW_TOKENS)
    assert len(set(reference)) > 3
    tokens = TextGenerator(Runtime.get().load_program(str(pte))).generate(PROMPT, NEW_TOKENS).tokens
    assert tokens == reference[: len(tokens)] and (len(tokens) == NEW_TOKENS or tokens[-1] == 2)  # eos stops it
    assert _executorch_greedy(pte, PROMPT, NEW_TOKENS) == reference
    data, matrix = pte.read_bytes(), weight.numpy()
    stored = data.count(matrix.tobytes()) + data.count(np.ascontiguousarray(matrix.T).tobytes())
    assert stored == 1  # the float matrix once (the head's, maybe transposed)


def test_a_bfloat16_export_matches_eager_bfloat16(untied_dir, tmp_path):
    """Logits within a bf16 tolerance of eager bf16's (teacher-forced on the program's own tokens);
    each token is eager's choice wherever eager's top two logits are further apart than twice that."""
    from transformers import AutoModelForCausalLM

    from torchedge.generation import TextGenerator
    from torchedge.models import export_pretrained
    from torchedge.runtime import Runtime

    pte = export_pretrained(untied_dir, tmp_path / "bf16.pte", dtype="bfloat16", max_seq_len=32, quiet=True)
    program = Runtime.get().load_program(str(pte))
    tokens = TextGenerator(program).generate(PROMPT, NEW_TOKENS).tokens
    model = AutoModelForCausalLM.from_pretrained(untied_dir, dtype=torch.bfloat16).eval()
    sequence = PROMPT + tokens
    with torch.no_grad():
        expected = model(input_ids=torch.tensor([sequence])).logits.float().numpy()[0]
    fresh = Runtime.get().load_program(str(pte)).load_method("forward")
    (logits,) = fresh.execute([np.array([sequence]), np.arange(len(sequence))])
    logits = np.asarray(logits, dtype=np.float32)[0]
    tolerance = 0.05 * float(np.abs(expected).max())  # bf16 keeps 8 significant bits
    assert np.abs(logits - expected).max() <= tolerance
    decided = 0
    for step, token in enumerate(tokens):
        row = expected[len(PROMPT) - 1 + step]
        top, second = np.sort(row)[-2:][::-1]
        if top - second > 2 * tolerance:
            assert token == int(row.argmax())
            decided += 1
        else:
            assert row[token] >= top - 2 * tolerance
    assert decided >= 1


def test_export_prints_each_stage_with_its_time(untied_dir, tmp_path, capsys):
    pte = tmp_path / "stages.pte"
    argv = ["export", str(untied_dir), "-o", str(pte), "--max-seq-len", "16", "--qlinear", "8w", "--qembedding", "8w"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    for stage in ("loading", "quantizing", "torch.export", "to_edge", "to_executorch", "writing"):
        assert re.search(rf"^\[torchedge\] {re.escape(stage)}[^\n]*: \d+\.\d s(, peak \d+\.\d GB)?$", err, re.M), stage
    assert "\r" not in err  # stderr is not a terminal: no bar


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_bar_shows_on_a_terminal_unless_quiet():
    from torchedge.models.progress import Progress

    pytest.importorskip("tqdm")
    for quiet, shown in ((False, True), (True, False)):
        stream = _Terminal()
        assert list(Progress(quiet, stream).bar(iter("abc"), 3, "quantizing")) == ["a", "b", "c"]
        assert ("quantizing:   0%" in stream.getvalue()) is shown


@pytest.mark.parametrize(
    "choice, message",
    [({"qembedding": "2w"}, "qembedding='2w'"), ({"dtype": "float64"}, "dtype='float64'"), ({"recipe": "x"}, "recipe")],
)
def test_unknown_choices_are_export_errors(untied_dir, choice, message):
    from torchedge.models import export_pretrained

    with pytest.raises(ExportError, match=re.escape(message)):
        export_pretrained(untied_dir, **choice)


def test_an_embedding_group_that_does_not_divide_the_row_is_an_export_error(untied_dir, tmp_path):
    from torchedge.models import export_pretrained

    with pytest.raises(ExportError, match="do not divide the embedding dim 64"):
        export_pretrained(untied_dir, tmp_path / "x.pte", qembedding="4w", qembedding_group_size=24, quiet=True)


def test_qembedding_on_a_built_in_model_is_an_error(capsys):
    assert main(["export", "mlp", "--qembedding", "8w"]) == 2
    assert "--qembedding applies to a model directory" in capsys.readouterr().err


@pytest.mark.parametrize("recipe", ["portable", "xnnpack", "onnxruntime"])
def test_a_tied_embedding_is_stored_once_on_every_recipe(tied_dir, tmp_path, recipe):
    """The embedding table and the LM head tied to it: one copy of the float matrix in the file
    (XNNPACK's head reads it through a named-data segment over the constant's bytes; ONNX Runtime's
    head runs portable where the lookup does), and eager's greedy tokens."""
    from transformers import AutoModelForCausalLM

    from torchedge.generation import TextGenerator
    from torchedge.models import export_pretrained
    from torchedge.runtime import Runtime

    if recipe == "onnxruntime":
        pytest.importorskip("onnxruntime")
    pte = export_pretrained(tied_dir, tmp_path / f"{recipe}.pte", recipe=recipe, max_seq_len=32, quiet=True)
    model = AutoModelForCausalLM.from_pretrained(tied_dir).eval()
    matrix = model.get_input_embeddings().weight.detach().numpy()
    data = pte.read_bytes()
    assert data.count(matrix.tobytes()) + data.count(np.ascontiguousarray(matrix.T).tobytes()) == 1
    if recipe == "xnnpack":  # the head runs in a delegate
        (forward,) = [plan for plan in deserialize_pte(data).program.execution_plan if plan.name == "forward"]
        assert not {op.name for op in forward.operators} & {"aten::mm", "aten::addmm", "aten::linear"}
    reference = _eager_greedy(model, PROMPT, NEW_TOKENS)
    tokens = TextGenerator(Runtime.get().load_program(str(pte))).generate(PROMPT, NEW_TOKENS).tokens
    assert tokens == reference[: len(tokens)] and (len(tokens) == NEW_TOKENS or tokens[-1] == 2)
    if recipe != "onnxruntime":  # ExecuTorch's runtime has no ONNX Runtime backend
        assert _executorch_greedy(pte, PROMPT, NEW_TOKENS) == reference


def test_external_constants_go_to_a_ptd_both_runtimes_load(untied_dir, tmp_path, capsys):
    """``--external-constants``: the weights in ``<stem>.ptd``, the program refuses to run without
    it, and with it both runtimes generate eager's greedy tokens."""
    from transformers import AutoModelForCausalLM

    from torchedge.cli.loading import load_program
    from torchedge.errors import TorchEdgeError
    from torchedge.generation import TextGenerator
    from torchedge.runtime import Runtime

    pte = tmp_path / "ext.pte"
    argv = ["export", str(untied_dir), "-o", str(pte), "--max-seq-len", "32", "--external-constants"]
    assert main(argv) == 0
    ptd = tmp_path / "ext.ptd"
    assert f"wrote {ptd}" in capsys.readouterr().out
    model = AutoModelForCausalLM.from_pretrained(untied_dir).eval()
    parameters = sum(p.numel() * p.element_size() for p in model.parameters())
    assert ptd.stat().st_size >= parameters > pte.stat().st_size  # the weights are in the .ptd, not the .pte
    reference = _eager_greedy(model, PROMPT, NEW_TOKENS)
    program = Runtime.get().load_program(str(pte), data_path=[str(ptd)])
    tokens = TextGenerator(program).generate(PROMPT, NEW_TOKENS).tokens
    assert tokens == reference[: len(tokens)] and (len(tokens) == NEW_TOKENS or tokens[-1] == 2)
    with pytest.raises(TorchEdgeError, match="--data-path"):  # what `torchedge generate` says without it
        load_program(str(pte))
    assert load_program(str(pte), [str(ptd)]).load_method("forward") is not None
    runtime = pytest.importorskip("executorch.runtime")
    forward = runtime.Runtime.get().load_program(str(pte), data_path=str(ptd)).load_method("forward")
    (logits,) = forward.execute([torch.tensor([PROMPT]), torch.arange(len(PROMPT))])
    assert int(logits[0, -1].argmax()) == reference[0]
