"""TextGenerator: the generation loop on a NumPy stand-in, then on tiny Llama and GPT-2 programs.

Greedy tokens must equal PyTorch eager's exactly on both runtimes, for programs compiled by
either compiler (the KV cache lives in the program's planned memory between calls).
"""

import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from torchedge.errors import InputError
from torchedge.generation import GenerationResult, TextGenerator

# -- a NumPy stand-in for a KV-cache program --------------------------------------------------


def _meta(tokens_per_call: int, dynamic: bool, dtype=np.int64):
    """Method metadata of the convention: input_ids [1, T], cache_position [T]."""
    return SimpleNamespace(
        inputs=tuple(
            SimpleNamespace(shape=shape, dtype=np.dtype(dtype), dynamic=dynamic)
            for shape in ((1, tokens_per_call), (tokens_per_call,))
        )
    )


class CountingProgram:
    """Its next token is always (last token + 1) % vocab; it records every call.

    It checks what a real cache needs: each call continues at the position the last one
    stopped (or restarts at 0), with as many positions as tokens, within the capacity.
    """

    def __init__(self, tokens_per_call=8, dynamic=True, vocab=16, constants=None):
        self.vocab, self.tokens_per_call, self.dynamic = vocab, tokens_per_call, dynamic
        self.constants = {"get_vocab_size": [vocab]} if constants is None else constants
        self.method_names = ["forward", *self.constants]
        self.calls = []
        self._next_position = 0

    def metadata(self, name):
        return _meta(self.tokens_per_call, self.dynamic)

    def load_method(self, name):
        if name == "forward":
            return self
        return SimpleNamespace(execute=lambda inputs: list(self.constants[name]))

    def execute(self, inputs):
        ids, positions = inputs
        assert ids.dtype == positions.dtype == np.int64 and ids.shape == (1, positions.size)
        assert positions.size <= self.tokens_per_call and (self.dynamic or positions.size == self.tokens_per_call)
        assert positions[0] in (0, self._next_position), "cache positions must continue"
        assert np.array_equal(positions, np.arange(positions[0], positions[0] + positions.size))
        capacity = self.constants.get("get_max_context_len", [None])[0]
        assert capacity is None or positions[-1] < capacity, "a position beyond the cache"
        self._next_position = int(positions[-1]) + 1
        self.calls.append((ids[0].tolist(), positions.tolist()))
        logits = np.zeros((1, positions.size, self.vocab), np.float32)
        logits[0, np.arange(positions.size), (ids[0] + 1) % self.vocab] = 1.0
        return [logits]


def test_prefill_in_one_call_then_one_token_per_call():
    program = CountingProgram()
    seen = []
    result = TextGenerator(program).generate([5, 6, 7], 4, callback=seen.append)
    assert result.tokens == seen == [8, 9, 10, 11]
    assert program.calls == [([5, 6, 7], [0, 1, 2]), ([8], [3]), ([9], [4]), ([10], [5])]
    assert (result.prompt_tokens, result.stopped_by) == (3, "max_new_tokens")
    assert result.prefill_seconds > 0 and result.decode_seconds > 0
    assert result.prefill_tokens_per_second > 0 and result.decode_tokens_per_second > 0


def test_prefill_in_chunks():
    program = CountingProgram()
    assert TextGenerator(program).generate([1, 2, 3, 4, 5], 2, prefill_chunk=2).tokens == [6, 7]
    assert program.calls[:3] == [([1, 2], [0, 1]), ([3, 4], [2, 3]), ([5], [4])]


def test_prompts_longer_than_the_dynamic_bound_are_chunked_by_it():
    program = CountingProgram(tokens_per_call=3)
    TextGenerator(program).generate(list(range(7)), 1)
    assert [len(ids) for ids, _ in program.calls] == [3, 3, 1]


def test_fixed_one_token_programs_prefill_token_by_token():
    program = CountingProgram(tokens_per_call=1, dynamic=False)
    assert TextGenerator(program).generate([3, 4, 5], 2).tokens == [6, 7]
    assert program.calls == [([3], [0]), ([4], [1]), ([5], [2]), ([6], [3])]


def test_fixed_multi_token_programs_prefill_whole_chunks_without_padding():
    program = CountingProgram(tokens_per_call=2, dynamic=False)
    generator = TextGenerator(program)
    assert generator.generate([3, 4, 5, 6], 1).tokens == [7]
    assert program.calls == [([3, 4], [0, 1]), ([5, 6], [2, 3])]
    with pytest.raises(InputError, match="exactly 2 tokens per call and the prompt has 3.*not padded"):
        generator.generate([3, 4, 5], 1)
    with pytest.raises(InputError, match="cannot decode one token at a time"):
        generator.generate([3, 4], 2)
    with pytest.raises(InputError, match="prefill_chunk must be None or 2"):
        generator.generate([3, 4], 1, prefill_chunk=1)


def test_stop_token_ends_generation_and_is_kept():
    seen = []
    result = TextGenerator(CountingProgram()).generate([1], 10, stop_tokens=[4, 9], callback=seen.append)
    assert result.tokens == seen == [2, 3, 4]
    assert result.stopped_by == "stop_token"


def test_the_cache_capacity_stops_generation_cleanly():
    constants = {"get_max_context_len": [8], "get_vocab_size": [16]}
    program = CountingProgram(constants=constants)
    result = TextGenerator(program).generate([1, 2, 3, 4, 5], 10)
    assert result.tokens == [6, 7, 8] and result.stopped_by == "max_seq_len"  # 5 + 3 = 8 positions
    assert max(max(positions) for _, positions in program.calls) == 6
    assert TextGenerator(program).generate([1, 2, 3, 4, 5], 3).stopped_by == "max_new_tokens"
    with pytest.raises(InputError, match="prompt has 8 tokens but the program's cache holds 8 positions"):
        TextGenerator(program).generate(list(range(8)), 1)


def test_a_generation_continues_the_cache_from_start_position():
    """The second generation feeds its prompt after the first one's tokens, which stay in the cache."""
    program = CountingProgram(constants={"get_max_context_len": [8], "get_vocab_size": [16]})
    generator = TextGenerator(program)
    assert generator.generate([1, 2], 2).tokens == [3, 4]  # positions 0-2 hold 1, 2, 3 (4 was not fed)
    program.calls.clear()
    result = generator.generate([4, 9], 10, start_position=3)
    assert program.calls == [([4, 9], [3, 4]), ([10], [5]), ([11], [6])]
    assert (result.tokens, result.stopped_by) == ([10, 11, 12], "max_seq_len")  # 3 + 2 + 3 = 8 positions
    with pytest.raises(InputError, match="prompt has 2 tokens after the 6 already in the cache"):
        generator.generate([1, 2], 1, start_position=6)
    with pytest.raises(InputError, match="start_position must be an integer >= 0"):
        generator.generate([1], 1, start_position=-1)


def test_constant_methods_are_read_when_present():
    constants = {"get_max_seq_len": [64], "get_vocab_size": [16], "get_bos_id": [1], "get_eos_id": [2]}
    generator = TextGenerator(CountingProgram(constants=constants))
    assert (generator.max_seq_len, generator.vocab_size, generator.bos_id, generator.eos_ids) == (64, 16, 1, (2,))
    generator = TextGenerator(CountingProgram(constants={"get_eos_ids": [2, 7]}))
    assert (generator.max_seq_len, generator.vocab_size, generator.bos_id) == (None, None, None)
    assert generator.eos_ids == (2, 7)
    assert (generator.tokens_per_call, generator.dynamic) == (8, True)


def test_seeded_sampling_is_reproducible_through_the_runner():
    def run(seed):
        return TextGenerator(CountingProgram(vocab=64)).generate([1], 12, temperature=1.0, seed=seed).tokens

    assert run(3) == run(3) and run(3) != run(4)


@pytest.mark.parametrize(
    "prompt, kwargs, message",
    [
        ([], {}, "prompt is empty"),
        ([1, 16], {}, "prompt token 16 is outside the vocabulary of 16"),
        ([1, -1], {}, "prompt token must be an integer id >= 0"),
        ([1, "a"], {}, "prompt token must be an integer id"),
        ([1], dict(max_new_tokens=0), "max_new_tokens must be an integer >= 1"),
        ([1], dict(prefill_chunk=9), r"prefill_chunk must be an integer in \[1, 8\]"),
        ([1], dict(stop_tokens=[1.5]), "stop token must be an integer id"),
        ([1], dict(top_p=2.0), "top_p"),
    ],
)
def test_bad_arguments_are_input_errors(prompt, kwargs, message):
    kwargs = {"max_new_tokens": 2, **kwargs}
    with pytest.raises(InputError, match=message):
        TextGenerator(CountingProgram()).generate(prompt, kwargs.pop("max_new_tokens"), **kwargs)


def test_programs_outside_the_convention_are_rejected():
    program = CountingProgram()
    with pytest.raises(InputError, match="no method 'decode'"):
        TextGenerator(program, method="decode")
    program.metadata = lambda name: SimpleNamespace(inputs=_meta(4, True).inputs[:1])
    with pytest.raises(InputError, match="must take two tensors"):
        TextGenerator(program)
    program.metadata = lambda name: _meta(4, True, np.float32)
    with pytest.raises(InputError, match="input_ids must be an integer tensor"):
        TextGenerator(program)


def test_rates_of_a_result():
    result = GenerationResult([1, 2, 3], 4, 0.5, 0.25, "max_new_tokens")
    assert (result.prefill_tokens_per_second, result.decode_tokens_per_second) == (8.0, 8.0)
    assert GenerationResult([1], 4, 0.5, 0.0, "stop_token").decode_tokens_per_second == 0.0


GENERATE_WITHOUT_TORCH = """
import sys
from types import SimpleNamespace
import numpy as np
from torchedge.generation import TextGenerator

ids, positions = (SimpleNamespace(shape=shape, dtype=np.dtype(np.int64), dynamic=True) for shape in ((1, 4), (4,)))
forward = SimpleNamespace(execute=lambda inputs: [np.ones((1, inputs[0].shape[1], 8), np.float32)])
program = SimpleNamespace(method_names=["forward"], load_method=lambda name: forward,
                          metadata=lambda name: SimpleNamespace(inputs=(ids, positions)))
TextGenerator(program).generate([1, 2], 3, temperature=1.0, top_k=4, seed=0)
print(",".join(m for m in sys.modules if m.split(".")[0] in ("torch", "tokenizers", "executorch")
               or m.startswith(("torchedge.exir", "torchedge.devtools"))))
"""


def test_generation_imports_neither_torch_nor_the_compiler():
    result = subprocess.run([sys.executable, "-c", GENERATE_WITHOUT_TORCH], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


# -- tiny transformers programs: ExecuTorch (the oracle) and torchedge -------------------------

PROMPT = [1, 17, 42, 99, 3, 250, 7]
MAX_CACHE_LEN = 32


class ExecuTorchProgram:
    """An ExecuTorch program behind the interface TextGenerator reads: NumPy in, NumPy out.

    ``tokens_per_call`` presents the dynamic ``forward`` as one taking exactly that many tokens.
    """

    def __init__(self, buffer: bytes, tokens_per_call: int | None = None):
        from executorch.runtime import Runtime

        self._program = Runtime.get().load_program(buffer)
        self.method_names = sorted(self._program.method_names)
        self._fixed = tokens_per_call

    def metadata(self, name):
        meta = self._program.metadata(name)
        bound = meta.input_tensor_meta(1).sizes()[0]
        return _meta(self._fixed or bound, self._fixed is None)

    def load_method(self, name):
        import torch

        method = self._program.load_method(name)

        def execute(inputs):
            outputs = method.execute([torch.from_numpy(np.asarray(x)) for x in inputs])
            return [o.numpy() if isinstance(o, torch.Tensor) else o for o in outputs]

        return SimpleNamespace(owner=self, execute=execute)  # ExecuTorch frees methods with their program


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def exported(request):
    pytest.importorskip("transformers")
    from torchedge.models.causal_lm import export_causal_lm, tiny_causal_lm

    return export_causal_lm(tiny_causal_lm(request.param), MAX_CACHE_LEN)


@pytest.fixture(scope="module")
def executorch_buffer(exported):
    pytest.importorskip("executorch.runtime")
    from executorch.exir import to_edge
    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

    edge = to_edge(exported.programs, constant_methods=exported.constant_methods)
    # Without this pass ExecuTorch leaves the caches uninitialised; garbage there (NaN) would leak
    # through the masked attention of positions not yet written.
    return edge.transform([InitializedMutableBufferPass(["cache"])]).to_executorch().buffer


@pytest.fixture(scope="module")
def torchedge_buffer(exported):
    from torchedge.exir import to_edge

    return to_edge(exported.programs, constant_methods=exported.constant_methods).to_executorch().buffer


@pytest.fixture(scope="module")
def reference(exported):
    from torchedge.models.causal_lm import eager_greedy

    return eager_greedy(exported, PROMPT, MAX_CACHE_LEN - len(PROMPT))


def test_executorch_greedy_tokens_equal_eager(executorch_buffer, reference):
    generator = TextGenerator(ExecuTorchProgram(executorch_buffer))
    assert (generator.max_seq_len, generator.vocab_size, generator.bos_id, generator.eos_ids) == (32, 512, 1, (2,))
    assert len(set(reference[:16])) > 4  # the tiny model does not just repeat itself
    for prefill_chunk in (None, 3):
        result = generator.generate(PROMPT, 16, prefill_chunk=prefill_chunk)
        assert result.tokens == reference[:16]
    token_by_token = TextGenerator(ExecuTorchProgram(executorch_buffer, tokens_per_call=1))
    assert token_by_token.generate(PROMPT, 16).tokens == reference[:16]


def test_executorch_stops_at_a_stop_token_and_at_the_cache_capacity(executorch_buffer, reference):
    generator = TextGenerator(ExecuTorchProgram(executorch_buffer))
    stop = reference[5]
    result = generator.generate(PROMPT, 16, stop_tokens=[stop])
    assert result.tokens == reference[: reference.index(stop) + 1] and result.stopped_by == "stop_token"
    result = generator.generate(PROMPT, 100)
    assert result.tokens == reference and result.stopped_by == "max_seq_len"
    assert len(PROMPT) + len(result.tokens) == MAX_CACHE_LEN


def test_executorch_sampling_is_reproducible(executorch_buffer):
    generator = TextGenerator(ExecuTorchProgram(executorch_buffer))

    def run(seed):
        return generator.generate(PROMPT, 12, temperature=0.8, top_k=50, top_p=0.9, seed=seed).tokens

    assert run(11) == run(11) and run(11) != run(12)


def test_torchedge_greedy_tokens_equal_eager(torchedge_buffer, reference):
    from torchedge.runtime import Runtime

    generator = TextGenerator(Runtime.get().load_program(torchedge_buffer))
    assert (generator.max_seq_len, generator.vocab_size, generator.bos_id, generator.eos_ids) == (32, 512, 1, (2,))
    assert generator.dynamic and generator.tokens_per_call == MAX_CACHE_LEN
    for prefill_chunk in (None, 3, 1):
        assert generator.generate(PROMPT, 16, prefill_chunk=prefill_chunk).tokens == reference[:16]


def test_torchedge_stops_at_the_cache_capacity(torchedge_buffer, reference):
    from torchedge.runtime import Runtime

    result = TextGenerator(Runtime.get().load_program(torchedge_buffer)).generate(PROMPT, 100)
    assert result.tokens == reference and result.stopped_by == "max_seq_len"


def test_torchedge_runs_programs_compiled_by_executorch(executorch_buffer, reference):
    from torchedge.runtime import Runtime

    generator = TextGenerator(Runtime.get().load_program(executorch_buffer))
    assert generator.generate(PROMPT, 16).tokens == reference[:16]


def test_executorch_runs_programs_compiled_by_torchedge(torchedge_buffer, reference):
    generator = TextGenerator(ExecuTorchProgram(torchedge_buffer))
    for prefill_chunk in (None, 3):
        assert generator.generate(PROMPT, 16, prefill_chunk=prefill_chunk).tokens == reference[:16]


@pytest.mark.parametrize("architecture", ["qwen2", "phi3", "phi", "gemma"])
def test_torchedge_other_architectures_equal_eager(architecture):
    pytest.importorskip("transformers")
    from torchedge.exir import to_edge
    from torchedge.models.causal_lm import eager_greedy, export_causal_lm, tiny_causal_lm
    from torchedge.runtime import Runtime

    exported = export_causal_lm(tiny_causal_lm(architecture), MAX_CACHE_LEN)
    buffer = to_edge(exported.programs, constant_methods=exported.constant_methods).to_executorch().buffer
    generator = TextGenerator(Runtime.get().load_program(buffer))
    assert generator.generate(PROMPT, 16).tokens == eager_greedy(exported, PROMPT, 16)


def test_a_decode_method_sharing_the_cache_on_both_runtimes():
    """``forward`` prefills, the one-token ``decode`` continues from the cache it filled."""
    pytest.importorskip("transformers")
    import torch
    from executorch.runtime import Runtime as ETRuntime

    from torchedge.models.causal_lm import compile_causal_lm, eager_greedy, export_causal_lm, tiny_causal_lm
    from torchedge.runtime import Runtime

    exported = export_causal_lm(tiny_causal_lm("llama"), MAX_CACHE_LEN, decode_method=True)
    reference = eager_greedy(exported, PROMPT, 16)
    buffer = compile_causal_lm(exported).buffer
    assert TextGenerator(Runtime.get().load_program(buffer)).generate(PROMPT, 16).tokens == reference

    program = ETRuntime.get().load_program(buffer)
    forward, decode = program.load_method("forward"), program.load_method("decode")
    logits = forward.execute([torch.tensor([PROMPT]), torch.arange(len(PROMPT))])[0]
    tokens = [int(logits[0, -1].argmax())]
    while len(tokens) < 16:
        position = len(PROMPT) + len(tokens) - 1
        logits = decode.execute([torch.tensor([tokens[-1:]]), torch.tensor([position])])[0]
        tokens.append(int(logits[0, -1].argmax()))
    assert tokens == reference
