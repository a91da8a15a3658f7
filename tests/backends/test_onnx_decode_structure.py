"""The decode step of a transformers Llama on ONNX Runtime: one delegate per decoder layer, the
KV cache updated in place, outputs equal to eager.

Counted from the program's instructions (not timed): the reshapes that read the token count
(``view(x, [1, s, -1, 16])``) and the rotary tables join the delegates, so a layer's attention,
MLP and the next layer's projections are one ONNX model; what stays portable between two
layers is the cache update, an ``index_put`` whose ``self`` and ``out`` are the cache buffer, at
rows computed once for all layers.
"""

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from tests.generation.hf_support import tiny_llama  # noqa: E402
from torchedge.cli.main import main  # noqa: E402
from torchedge.schema.program import DelegateCall, KernelCall  # noqa: E402
from torchedge.serialize import deserialize_pte  # noqa: E402

VOCAB, CACHE = 300, 32
PROMPT = [5, 17, 42, 99, 3, 250, 7]


@pytest.fixture(scope="module")
def model():
    return tiny_llama(VOCAB, tied=True)


@pytest.fixture(scope="module")
def pte(model, tmp_path_factory):
    directory = tmp_path_factory.mktemp("llama")
    model.save_pretrained(directory)
    out = directory / "ort.pte"
    argv = ["export", str(directory), "-o", str(out), "--recipe", "onnxruntime", "--max-seq-len", str(CACHE)]
    assert main([*argv, "--quiet"]) == 0
    return out


def _forward(pte):
    program = deserialize_pte(pte.read_bytes()).program
    plan = next(p for p in program.execution_plan if p.name == "forward")
    calls = [i.instr_args for chain in plan.chains for i in chain.instructions]
    names = [f"{o.name}.{o.overload}" if o.overload else o.name for o in plan.operators]
    return calls, names


def test_one_delegate_per_decoder_layer(pte, model):
    calls, _ = _forward(pte)
    delegates = sum(isinstance(c, DelegateCall) for c in calls)
    layers = model.config.num_hidden_layers
    assert delegates <= layers + 2  # the layers, the rotary tables before them, the head's norm after


def test_no_key_or_value_head_is_repeated_and_no_expand_keeps_the_sizes(pte, model):
    from torchedge.backends.onnxruntime.runtime import OnnxRuntimeDelegate

    program = deserialize_pte(pte.read_bytes())
    plan = next(p for p in program.program.execution_plan if p.name == "forward")
    lines = [line for d in plan.delegates for line in OnnxRuntimeDelegate().describe(program.delegate_data(d))]
    expands = sum(int(line.split("x")[0]) for line in lines if line.strip().endswith("x Expand"))
    # per layer at most the causal mask: grouped-query attention reads the key and value heads
    # without repeating them to the query heads
    assert expands <= model.config.num_hidden_layers


def test_the_kv_cache_is_updated_in_place(pte, model):
    calls, names = _forward(pte)
    kernels = [(names[c.op_index], c.args) for c in calls if isinstance(c, KernelCall)]
    puts = [args for name, args in kernels if name == "aten::index_put.out"]
    assert len(puts) == 2 * model.config.num_hidden_layers  # keys and values of each layer
    caches = {args[0] for args in puts}
    assert all(args[0] == args[-1] for args in puts)  # self is out: only the new rows are written
    assert len(caches) == len(puts)
    others = [name for name, args in kernels if name != "aten::index_put.out" and args[-1] in caches]
    assert others == []  # nothing else writes (copies) a cache
    # The rows to write are computed once for all layers (each layer's counter copies the same position).
    assert [name for name, _ in kernels].count("aten::arange.start_out") == 1


def test_the_layers_counters_copy_one_value_computed_once(pte, model):
    calls, names = _forward(pte)
    kernels = [(names[c.op_index], c.args) for c in calls if isinstance(c, KernelCall)]
    copies = [args for name, args in kernels if name == "aten::copy_"]
    assert len(copies) == model.config.num_hidden_layers  # each layer's position counter (state)
    (source,) = {args[1] for args in copies}
    assert [args[-1] for name, args in kernels if name != "aten::copy_"].count(source) == 1


def test_last_prefill_logits_and_greedy_tokens_equal_eager(pte, model):
    from torchedge.generation import TextGenerator
    from torchedge.runtime import Runtime

    program = Runtime.get().load_program(str(pte))
    method = program.load_method("forward")
    logits = method.execute([np.array([PROMPT], np.int64), np.array([0], np.int64)])[0]
    with torch.no_grad():
        expected = model(input_ids=torch.tensor([PROMPT])).logits[0, -1].numpy()
    np.testing.assert_allclose(
        logits.reshape(-1, VOCAB)[-1], expected, rtol=1e-4, atol=1e-4 * float(np.abs(expected).max())
    )

    ids, reference = list(PROMPT), []
    with torch.no_grad():
        for _ in range(8):
            reference.append(int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
            ids.append(reference[-1])
    assert TextGenerator(program).generate(PROMPT, 8).tokens == reference
