"""Shared helpers: compile with torchedge or the real ExecuTorch, run on either runtime."""

from __future__ import annotations

import os
import sys
import zlib

import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _random_data_of_its_own(request):
    """Each test draws the same random data whatever ran before it in its process: pytest-xdist
    hands tests to workers differently on machines with other core counts, so data drawn from
    a generator earlier tests advanced would differ from machine to machine. Tests that seed
    their generators themselves are unaffected."""
    seed = zlib.crc32(request.node.nodeid.encode())
    np.random.seed(seed)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)
    harness = sys.modules.get("tests.kernels.harness")
    if harness is not None:
        harness.reseed(seed)


def relative_error(got, want) -> float:
    """max |got - want| / max |want| (the spine's accuracy measure)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-12)
    return float(np.max(np.abs(got - want))) / scale if want.size else 0.0


def assert_matches(outputs, expected, tol: float = 1e-4) -> None:
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        err = relative_error(got, want)
        assert err <= tol, f"relative error {err:.3e} > {tol}"


def torch_outputs(model, inputs) -> list[np.ndarray]:
    import torch

    with torch.no_grad():
        out = model(*inputs)
    outs = [out] if isinstance(out, torch.Tensor) else list(out)
    return [o.detach().numpy() for o in outs]


def torchedge_compile(model, inputs, config=None):
    import torch

    from torchedge.exir import to_edge

    return to_edge(torch.export.export(model, tuple(inputs))).to_executorch(config)


def executorch_compile(model, inputs) -> bytes:
    import torch
    from executorch.exir import to_edge as et_to_edge

    return et_to_edge(torch.export.export(model, tuple(inputs))).to_executorch().buffer


def torchedge_run(buffer, inputs, method: str = "forward") -> list:
    from torchedge.runtime import Runtime

    return Runtime.get().load_program(buffer).load_method(method).execute([np.asarray(i) for i in inputs])


def executorch_run(buffer, inputs, method: str = "forward") -> list:
    import torch
    from executorch.runtime import Runtime as ETRuntime

    program = ETRuntime.get().load_program(buffer)
    outs = program.load_method(method).execute([torch.as_tensor(np.asarray(i)) for i in inputs])
    return [o.numpy() if isinstance(o, torch.Tensor) else o for o in outs]


def executorch_etdump(program, inputs, folder, runs: int = 1, debug_buffer_size: int = 0) -> tuple:
    """Run ``program`` (bytes or a path) ``runs`` times on ExecuTorch's runtime with its ETDump on;
    write theirs.etdp and theirs.bin into ``folder`` and return their paths."""
    import torch

    executorch_runtime = pytest.importorskip("executorch.runtime")
    loaded = executorch_runtime.Runtime.get().load_program(
        program if isinstance(program, bytes) else str(program),
        verification=executorch_runtime.Verification.Minimal,
        enable_etdump=True,
        debug_buffer_size=debug_buffer_size,
    )
    method = loaded.load_method("forward")
    for _ in range(runs):
        method.execute([torch.as_tensor(np.asarray(i)) for i in inputs])
    paths = (os.path.join(folder, "theirs.etdp"), os.path.join(folder, "theirs.bin"))
    loaded.write_etdump_result_to_file(*paths)
    return paths


@pytest.fixture(scope="session")
def has_executorch() -> bool:
    try:
        import executorch.runtime  # noqa: F401
    except ImportError:
        return False
    return True
