"""Structure-aware fuzzing of the loader: a malformed `.pte` gets a typed error, never a crash.

Each case mutates a small valid program (the golden files, plus an MLP, an ONNX Runtime
delegate and a dynamic-shape model compiled here), then loads it, loads every method and
runs it on random inputs that match the method's metadata, in process, under a time
limit and with NumPy's allocations traced. Outcomes: ``ok``, ``typed`` (a
`torchedge.errors.TorchEdgeError`), ``untyped`` (any other exception), ``hang`` and
``over_cap`` (an allocation beyond the memory cap given to `load_method`).

Long runs: ``python -m tests.runtime.test_fuzz --cases 100000 [--seed N] [--no-compile]``
(or ``TORCHEDGE_FUZZ_CASES=N pytest tests/runtime/test_fuzz.py``) prints the counts and
the first failures of each class.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import pathlib
import random
import signal
import struct
import sys
import time
import tracemalloc
import warnings

import numpy as np
import pytest

import torchedge.errors
from torchedge.errors import KernelError, TorchEdgeError
from torchedge.runtime import Runtime
from torchedge.serialize import deserialize_pte, serialize_pte

GOLDEN = pathlib.Path(__file__).parent.parent / "golden"
REGRESSIONS = pathlib.Path(__file__).parent / "fuzz_regressions"
CAP = 64 << 20  # max_arena_bytes given to load_method: tensors and arenas beyond it must be refused
SLACK = 16 << 20  # traced bytes allowed beyond the cap (inputs, copies, constants, Python objects)
TIME_LIMIT = 5.0  # seconds per case
BOUNDARY = [0, 1, -1, 2, 7, 255, 2**15, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, -(2**31), 1 << 40]


class Hang(BaseException):  # BaseException: the dispatch loop wraps every Exception into a KernelError
    pass


# -- seeds -----------------------------------------------------------------------


def golden_seeds() -> dict[str, bytes]:
    return {p.stem: p.read_bytes() for p in sorted(GOLDEN.glob("*.pte"))}


def compiled_seeds() -> dict[str, bytes]:
    """An MLP, a dynamic-shape model and (when onnxruntime is installed) an ONNX Runtime delegate."""
    import torch

    from torchedge.exir import to_edge, to_edge_transform_and_lower

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(4, 8), torch.nn.Linear(8, 3)

        def forward(self, x):
            return torch.softmax(self.b(torch.relu(self.a(x))), -1)

    class Dynamic(torch.nn.Module):
        def forward(self, x, y):
            return (x * 2).sum(0, keepdim=True) + y[: x.shape[0]].mean(), x.reshape(-1)

    torch.manual_seed(0)
    seeds = {}
    mlp, x = MLP().eval(), (torch.randn(2, 4),)
    seeds["c_mlp"] = to_edge(torch.export.export(mlp, x)).to_executorch().buffer
    batch = torch.export.Dim("batch", min=1, max=8)
    dyn = torch.export.export(Dynamic(), (torch.randn(3, 5), torch.randn(8, 5)), dynamic_shapes=({0: batch}, None))
    seeds["c_dynamic"] = to_edge(dyn).to_executorch().buffer
    try:
        import onnxruntime  # noqa: F401

        from torchedge.backends.onnxruntime import OnnxRuntimePartitioner
    except ImportError:
        return seeds
    ep = torch.export.export(mlp, x)
    seeds["c_ort"] = to_edge_transform_and_lower(ep, partitioner=[OnnxRuntimePartitioner()]).to_executorch().buffer
    return seeds


# -- mutations -------------------------------------------------------------------


def _flatbuffer_end(data: bytes) -> int:
    if len(data) >= 32 and data[8:12] == b"eh00":
        return min(len(data), struct.unpack_from("<Q", data, 16)[0])
    return len(data)


def _int_positions(data: bytes, values: set[int]) -> list[int]:
    """4-byte aligned offsets in the flatbuffer whose int32 is one of ``values`` (likely fields)."""
    end = _flatbuffer_end(data)
    return [o for o in range(0, end - 3, 4) if struct.unpack_from("<i", data, o)[0] in values]


def _plan_ints(contents) -> set[int]:
    found = set()

    def walk(obj):
        if isinstance(obj, bool) or obj is None:
            return
        if isinstance(obj, int):
            if 0 < obj < 1 << 20:
                found.add(int(obj))
        elif isinstance(obj, (list, tuple)):
            for item in obj:
                walk(item)
        elif dataclasses.is_dataclass(obj):
            for f in dataclasses.fields(obj):
                walk(getattr(obj, f.name))

    walk(contents.program.execution_plan)
    return found


def _int_slots(obj, path=()):
    """Every (container, key) holding an int inside a dataclass tree (the plan's fields)."""
    if isinstance(obj, list):
        for i, item in enumerate(obj):
            if isinstance(item, int) and not isinstance(item, bool):
                yield obj, i
            else:
                yield from _int_slots(item)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if isinstance(value, int) and not isinstance(value, bool):
                yield obj, f.name
            elif isinstance(value, (list,)) or dataclasses.is_dataclass(value):
                yield from _int_slots(value)


def _boundary(rng: random.Random, old: int) -> int:
    choice = rng.random()
    if choice < 0.5:
        return rng.choice(BOUNDARY)
    if choice < 0.8:
        return old + rng.choice([-2, -1, 1, 2, 3, 16])
    return rng.randrange(0, 64)


class Mutator:
    def __init__(self, seeds: dict[str, bytes]):
        self.seeds = seeds
        self.names = sorted(seeds)
        self.unpacked = {}
        self.positions = {}
        for name, data in seeds.items():
            contents = deserialize_pte(data).unpack()
            self.unpacked[name] = contents
            self.positions[name] = _int_positions(data, _plan_ints(contents))

    def mutate(self, rng: random.Random) -> tuple[str, bytes]:
        name = rng.choice(self.names)
        data = self.seeds[name]
        kind = rng.choices(["truncate", "bits", "field", "semantic", "splice"], [1, 3, 5, 8, 1])[0]
        if kind == "truncate":
            cut = rng.randrange(len(data))
            return f"{name}:truncate@{cut}", data[:cut]
        if kind == "bits":
            buf = bytearray(data)
            end = _flatbuffer_end(data)
            flips = [rng.randrange(end * 8) for _ in range(rng.randint(1, 4))]
            for bit in flips:
                buf[bit // 8] ^= 1 << (bit % 8)
            return f"{name}:bits{flips}", bytes(buf)
        if kind == "field" and self.positions[name]:
            buf = bytearray(data)
            edits = []
            for _ in range(rng.randint(1, 2)):
                pos = rng.choice(self.positions[name])
                new = _boundary(rng, struct.unpack_from("<i", buf, pos)[0]) & 0xFFFFFFFF
                struct.pack_into("<I", buf, pos, new)
                edits.append((pos, new))
            return f"{name}:field{edits}", bytes(buf)
        if kind == "splice":
            other = self.seeds[rng.choice(self.names)]
            cut = rng.randrange(min(len(data), len(other)))
            return f"{name}:splice@{cut}", data[:cut] + other[cut:]
        return self._semantic(name, rng)

    def _semantic(self, name: str, rng: random.Random) -> tuple[str, bytes]:
        """Decode, change one to three ints of the plans (or swap in another program's values), re-encode."""
        contents = deserialize_pte(self.seeds[name]).unpack()
        plans = contents.program.execution_plan
        if rng.random() < 0.1:
            donor = self.unpacked[rng.choice(self.names)].program.execution_plan[0]
            target = rng.choice(plans)
            field = rng.choice(["values", "inputs", "outputs", "operators", "non_const_buffer_sizes"])
            setattr(target, field, getattr(donor, field))
            desc = f"{name}:semantic-swap {field}"
        else:
            slots = list(_int_slots(plans))
            edits = []
            for _ in range(rng.randint(1, 3)):
                owner, key = rng.choice(slots)
                old = owner[key] if isinstance(owner, list) else getattr(owner, key)
                new = _boundary(rng, old)
                if isinstance(owner, list):
                    owner[key] = new
                else:
                    object.__setattr__(owner, key, new)
                edits.append(f"{type(owner).__name__}.{key}:{old}->{new}")
            desc = f"{name}:semantic{edits}"
        try:
            return desc, _encode(contents)
        except Exception:  # the writer refuses some values (an int beyond its field's width)
            return desc + " (unencodable)", self.seeds[name]


def _encode(contents) -> bytes:
    return serialize_pte(contents.program, mutable_data=contents.mutable_data, named_data=contents.named_data)


# -- running ---------------------------------------------------------------------


def _random_input(meta, rng: np.random.Generator):
    if meta is int:
        return int(rng.integers(0, 4))
    if meta is float:
        return float(rng.standard_normal())
    if meta is bool:
        return bool(rng.integers(0, 2))
    if meta is str or meta is type(None):
        return None
    shape = tuple(int(s) for s in meta.shape)
    if meta.dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if meta.dtype.kind in "iu":
        return rng.integers(0, 3, shape).astype(meta.dtype)
    return rng.standard_normal(shape).astype(meta.dtype)


def run_case(data: bytes, rng: np.random.Generator) -> None:
    program = Runtime.get().load_program(data)
    for name in program.method_names:
        program.metadata(name)
        method = program.load_method(name, max_arena_bytes=CAP)
        method.max_backward_jumps = 1_000  # a runaway loop stops in well under TIME_LIMIT
        inputs = [_random_input(m, rng) for m in method.meta.inputs]
        method.execute(inputs)
        method.execute(inputs)


def _alarm(signum, frame):
    raise Hang()


def classify(data: bytes, seed: int) -> tuple[str, str]:
    """Run one case; returns (outcome, detail)."""
    rng = np.random.default_rng(seed)
    previous = signal.signal(signal.SIGALRM, _alarm)
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            run_case(data, rng)
        outcome, detail = "ok", ""
    except Hang:
        outcome, detail = "hang", f"over {TIME_LIMIT}s"
    except TorchEdgeError as e:
        # "wrapped": a typed error around an untyped one (a kernel's NumPy message): validation missed it.
        cause = e.__cause__
        wrapped = isinstance(e, KernelError) and cause is not None and not isinstance(cause, TorchEdgeError)
        outcome, detail = ("wrapped" if wrapped else "typed"), f"{type(e).__name__}: {e}"
    except MemoryError as e:
        outcome, detail = "over_cap", f"MemoryError: {e}"
    except Exception as e:  # noqa: BLE001 - the point: anything untyped is a finding
        outcome, detail = "untyped", f"{type(e).__name__}: {e}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    peak = tracemalloc.get_traced_memory()[1] - base
    if peak > CAP + SLACK and outcome != "hang":
        outcome, detail = "over_cap", f"traced peak {peak} bytes ({detail or 'ok'})"
    return outcome, detail


def fuzz(seeds: dict[str, bytes], cases: int, seed: int = 0, report=None) -> tuple[collections.Counter, dict]:
    rng = random.Random(seed)
    mutator = Mutator(seeds)
    counts: collections.Counter = collections.Counter()
    examples: dict[str, list] = collections.defaultdict(list)
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        for case in range(cases):
            desc, data = mutator.mutate(rng)
            outcome, detail = classify(data, case)
            counts[outcome] += 1
            if outcome in ("untyped", "hang", "over_cap", "wrapped") and len(examples[outcome]) < 20:
                examples[outcome].append((case, desc, detail[:300]))
            if report and (case + 1) % 1000 == 0:
                report(case + 1, counts)
    finally:
        if started:
            tracemalloc.stop()
    return counts, examples


# -- tests -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def seeds():
    pytest.importorskip("torch")
    return {**golden_seeds(), **compiled_seeds()}


def test_seeds_run(seeds):
    for name, data in seeds.items():
        outcome, detail = classify(data, 0)
        assert outcome == "ok", f"{name}: {detail}"


def test_fuzz(seeds):
    cases = int(os.environ.get("TORCHEDGE_FUZZ_CASES", "400"))
    start = time.perf_counter()
    counts, examples = fuzz(seeds, cases, seed=int(os.environ.get("TORCHEDGE_FUZZ_SEED", "1")))
    bad = {k: v for k, v in examples.items() if k in ("untyped", "hang", "over_cap")}
    assert not bad, f"{dict(counts)} in {time.perf_counter() - start:.1f}s: {bad}"
    assert counts["typed"] + counts["wrapped"] > cases // 4, dict(counts)  # the mutations do reach the checks


def _regression_cases() -> list[tuple[str, dict]]:
    manifest = REGRESSIONS / "cases.json"
    return sorted(json.loads(manifest.read_text()).items()) if manifest.is_file() else []


@pytest.mark.parametrize("name, case", _regression_cases(), ids=[name for name, _ in _regression_cases()])
def test_regression(name, case):
    """Each file reproduced a bug the fuzzer found (`fuzz_regressions/make_cases.py` rebuilds them);
    each must now raise the typed error `cases.json` names, saying what it found."""
    if case.get("needs"):
        pytest.importorskip(case["needs"])
    expected = getattr(torchedge.errors, case["expect"])
    tracemalloc.start()
    try:
        outcome, detail = classify((REGRESSIONS / name).read_bytes(), 0)
    finally:
        tracemalloc.stop()
    assert outcome == "typed", f"{name} ({case['bug']}): {outcome}: {detail}"
    assert detail.startswith(expected.__name__ + ":") and case["match"] in detail, detail


def test_default_cap_bounds_planned_memory():
    """Without ``max_arena_bytes``, the cap is half the machine's memory, at most 4 GiB: a corrupt
    size is refused before anything is allocated."""
    from torchedge.errors import MemoryPlanError
    from torchedge.runtime.memory import DEFAULT_MAX_ARENA_BYTES

    assert 0 < DEFAULT_MAX_ARENA_BYTES <= 4 << 30
    program = Runtime.get().load_program((REGRESSIONS / "planned_arena_over_cap.pte").read_bytes())
    with pytest.raises(MemoryPlanError, match="5368709120 bytes"):
        program.load_method("forward")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=int(os.environ.get("TORCHEDGE_FUZZ_CASES", "10000")))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-compile", action="store_true", help="golden seeds only (no torch needed)")
    parser.add_argument("--save", type=pathlib.Path, help="write each failing case's bytes into this folder")
    args = parser.parse_args(argv)
    seeds = golden_seeds() if args.no_compile else {**golden_seeds(), **compiled_seeds()}
    start = time.perf_counter()

    def report(n, counts):
        print(f"{n} cases, {time.perf_counter() - start:.0f}s: {dict(counts)}", flush=True)

    counts, examples = fuzz(seeds, args.cases, args.seed, report)
    print(f"total {args.cases} cases in {time.perf_counter() - start:.0f}s: {dict(counts)}")
    mutator = Mutator(seeds) if args.save else None
    for outcome, items in examples.items():
        print(f"-- {outcome}")
        for case, desc, detail in items:
            print(f"  case {case}: {desc}\n    {detail}")
    if mutator is not None:  # replay the generator to recover the bytes of the failures
        args.save.mkdir(parents=True, exist_ok=True)
        rng = random.Random(args.seed)
        wanted = {case for items in examples.values() for case, _, _ in items}
        for case in range(max(wanted, default=-1) + 1):
            desc, data = mutator.mutate(rng)
            if case in wanted:
                (args.save / f"case{case}.pte").write_bytes(data)
    return 1 if any(counts[k] for k in ("untyped", "hang", "over_cap")) else 0


if __name__ == "__main__":
    sys.exit(main())
