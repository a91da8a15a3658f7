"""Text generation with a KV cache: prefill and decode tokens/s, one thread everywhere, in one run.

Usage: python benchmarks/generation.py [--arch llama|gpt2] [--prompt 16] [--new 32] [--rounds 5]

Sides, all driven by the same `TextGenerator` loop (prompt in one call, then one token per call):
- torchedge portable and torchedge + ONNX Runtime: ``forward`` (dynamic length) prefills, a
  one-token ``decode`` method sharing the cache decodes (`compile_causal_lm`);
- ExecuTorch portable and ExecuTorch + XNNPACK: its usual LLM layout, one dynamic ``forward``;
- PyTorch eager: the same `transformers` model with the same static cache.
Every side must produce eager's greedy tokens; the rounds alternate between sides so that
machine drift hits them alike. Times are medians over rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402,F401  (pins native thread pools to one thread)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from torchedge.generation import TextGenerator  # noqa: E402
from torchedge.models.causal_lm import compile_causal_lm, eager_greedy, export_causal_lm  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402

CONFIGS = {
    "llama": (
        "LlamaConfig",
        "LlamaForCausalLM",
        dict(hidden_size=256, intermediate_size=768, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4),
    ),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", dict(n_embd=256, n_layer=4, n_head=8)),
}


def build_model(arch: str, max_cache_len: int):
    import transformers

    config_name, model_name, sizes = CONFIGS[arch]
    config = getattr(transformers, config_name)(
        **sizes,
        vocab_size=2048,
        max_position_embeddings=2 * max_cache_len,
        initializer_range=0.2,
        bos_token_id=1,
        eos_token_id=2,
        use_cache=True,
    )
    torch.manual_seed(0)
    return getattr(transformers, model_name)(config).eval()


def _meta(tokens: int, dynamic: bool):
    return SimpleNamespace(
        inputs=tuple(
            SimpleNamespace(shape=shape, dtype=np.dtype(np.int64), dynamic=dynamic)
            for shape in ((1, tokens), (tokens,))
        )
    )


class EagerProgram:
    """PyTorch eager behind the program interface `TextGenerator` reads."""

    def __init__(self, module, max_cache_len: int):
        self.module, self.max_cache_len = module, max_cache_len
        self.method_names = ["forward", "get_max_context_len"]

    def metadata(self, name):
        return _meta(self.max_cache_len, True)

    def load_method(self, name):
        if name != "forward":
            return SimpleNamespace(execute=lambda inputs: [self.max_cache_len])

        @torch.no_grad()
        def execute(inputs):
            ids, positions = (torch.from_numpy(x) for x in inputs)
            return [self.module(input_ids=ids, cache_position=positions).numpy()]

        return SimpleNamespace(execute=execute)


class ExecuTorchProgram(EagerProgram):
    """An ExecuTorch program behind the same interface."""

    def __init__(self, buffer: bytes, max_cache_len: int):
        from executorch.runtime import Runtime as ETRuntime

        super().__init__(None, max_cache_len)
        self._buffer = buffer  # ExecuTorch reads the program in place
        self._program = ETRuntime.get().load_program(buffer)

    def load_method(self, name):
        if name != "forward":
            return super().load_method(name)
        method = self._program.load_method("forward")
        # The method keeps this object alive: ExecuTorch frees a method's program with the program.
        return SimpleNamespace(
            owner=self,
            execute=lambda inputs: [o.numpy() for o in method.execute([torch.from_numpy(x) for x in inputs])],
        )


def executorch_buffer(exported, xnnpack: bool) -> bytes:
    from executorch.exir import to_edge_transform_and_lower

    partitioner = None
    if xnnpack:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        partitioner = [XnnpackPartitioner()]
    programs = {"forward": exported.programs["forward"]}
    return to_edge_transform_and_lower(programs, partitioner=partitioner).to_executorch().buffer


SIDES = ("te portable", "te + ORT", "ET portable", "ET + XNNPACK", "eager")


def sides(arch: str, max_cache_len: int, wanted=SIDES) -> tuple[dict, object]:
    from executorch.extension.pybindings import portable_lib

    from torchedge.backends.onnxruntime import OnnxRuntimePartitioner

    portable_lib._unsafe_reset_threadpool(1)
    exported = export_causal_lm(build_model(arch, max_cache_len), max_cache_len, decode_method=True)
    programs = {}
    for name, make in [
        ("te portable", lambda: TextGenerator(Runtime.get().load_program(compile_causal_lm(exported).buffer))),
        (
            "te + ORT",
            lambda: TextGenerator(
                Runtime.get().load_program(
                    compile_causal_lm(exported, [OnnxRuntimePartitioner(intra_op_threads=1)]).buffer
                )
            ),
        ),
        ("ET portable", lambda: TextGenerator(ExecuTorchProgram(executorch_buffer(exported, False), max_cache_len))),
        ("ET + XNNPACK", lambda: TextGenerator(ExecuTorchProgram(executorch_buffer(exported, True), max_cache_len))),
        ("eager", lambda: TextGenerator(EagerProgram(exported.module, max_cache_len))),
    ]:
        if name not in wanted:
            continue
        start = time.perf_counter()
        try:
            programs[name] = make()
        except Exception as e:  # report a side that cannot run instead of stopping the whole benchmark
            print(f"  {name}: {type(e).__name__}: {str(e)[:100]}")
            continue
        print(f"  {name}: ready in {time.perf_counter() - start:.1f} s", flush=True)
    return programs, exported


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=sorted(CONFIGS), default="llama")
    parser.add_argument("--prompt", type=int, default=16, help="prompt tokens")
    parser.add_argument("--new", type=int, default=32, help="new tokens per generation")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cache", type=int, default=128, help="KV-cache positions")
    parser.add_argument(
        "--sides",
        nargs="+",
        choices=SIDES,
        default=SIDES,
        metavar="SIDE",
        help=f"which sides to run (default: all of {', '.join(SIDES)})",
    )
    _common.add_json_option(parser)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(f"{args.arch}: exporting and compiling every side")
    generators, exported = sides(args.arch, args.cache, args.sides)
    prompt = list(range(3, 3 + args.prompt))
    reference = eager_greedy(exported, prompt, args.new)
    prefill, decode, same = {n: [] for n in generators}, {n: [] for n in generators}, {}
    with threadpool_limits(1):
        for _ in range(args.rounds + 1):  # the first round warms up
            for name, generator in generators.items():
                result = generator.generate(prompt, args.new)
                same[name] = result.tokens == reference
                prefill[name].append(result.prefill_tokens_per_second)
                decode[name].append(result.decode_tokens_per_second)
    rate = {n: (statistics.median(prefill[n][1:]), statistics.median(decode[n][1:])) for n in generators}
    rows = [[n, f"{p:.0f}", f"{d:.0f}", f"{1e3 / d:.2f}", "yes" if same[n] else "NO"] for n, (p, d) in rate.items()]
    print(f"\n{args.arch}, prompt {args.prompt}, {args.new} new tokens, cache {args.cache}, one thread (tokens/s)")
    _common.report(["side", "prefill tok/s", "decode tok/s", "ms/token", "eager's tokens"], rows, args.json)
    best = max((n for n in rate if n.startswith("te")), key=lambda n: rate[n][1])
    for baseline in ("eager", "ET + XNNPACK"):
        if baseline in rate:
            print(f"decode, {best} / {baseline}: {rate[best][1] / rate[baseline][1]:.2f}x")
    if "ET portable" in rate and "te portable" in rate:
        print(f"decode, te portable / ET portable: {rate['te portable'][1] / rate['ET portable'][1]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
