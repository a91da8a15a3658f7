"""Write the golden `.pte` files under ``tests/golden/`` with the REAL ExecuTorch.

Each program is exported with ``executorch.exir`` and run on ``executorch.runtime``; its
outputs are checked against PyTorch eager before anything is written. For every program
``<name>`` this writes

* ``tests/golden/<name>.pte`` — the program, byte for byte as ExecuTorch serialized it;
* ``tests/golden/<name>.npz`` — ``methods`` (the sorted method names) and, for the
  consecutive calls ``k = 0, 1, ...`` of each method on one loaded instance,
  ``<method>/<k>/in<i>`` and ``<method>/<k>/out<j>`` (ExecuTorch's outputs).

``tests/golden/test_golden_pte.py`` replays them on the torchedge runtime without torch.

Regenerate (needs torch and executorch; seeds are fixed and the archives carry no
timestamps, so an unchanged toolchain rewrites identical files)::

    .venv/bin/python tools/make_golden_pte.py [NAME ...]
"""

from __future__ import annotations

import copy
import io
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from executorch.exir import ExecutorchBackendConfig, to_edge
from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass
from executorch.runtime import Runtime
from torch import nn
from torch._higher_order_ops.map import map as hop_map
from torch._higher_order_ops.scan import scan
from torch.export import Dim, export

OUT_DIR = Path(__file__).resolve().parent.parent / "tests" / "golden"


@dataclass
class MethodSpec:
    module: nn.Module
    calls: list[tuple]  # inputs of consecutive calls; the first one is also the export example
    dynamic_shapes: object = None


@dataclass
class Golden:
    methods: dict[str, MethodSpec]
    constant_methods: dict = field(default_factory=dict)
    config: ExecutorchBackendConfig | None = None


class MLP(nn.Module):
    def __init__(self, sizes=(8, 16, 4)):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x) if i == len(self.layers) - 1 else torch.relu(layer(x))
        return x


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(torch.relu(self.bn(self.conv(x)))), 1))


class Counter(nn.Module):
    """Accumulates its inputs in a mutable buffer; the non-zero initial state is serialized."""

    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.arange(6.0).reshape(2, 3))

    def forward(self, x):
        self.count += x
        return self.count * 2.0


class IntBool(nn.Module):
    def forward(self, x, idx):
        mask = x > 0
        return torch.argmax(x, dim=1), mask, torch.where(mask, x, torch.zeros_like(x)), idx * 2 + 1, mask.sum()


class Scale(nn.Module):
    def __init__(self, factor: float):
        super().__init__()
        self.factor = factor

    def forward(self, x, y):
        return x * self.factor - y


class Cond(nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda t: t.sin() + 1.0, lambda t: t.cos() - 1.0, (x,))


class Map(nn.Module):
    def forward(self, xs, y):
        return hop_map(lambda x, y: torch.relu(x + y) * 2.0, xs, y)


class Scan(nn.Module):
    def forward(self, init, xs):
        def combine(carry, x):
            carry = carry * 0.5 + x
            return carry, carry.sin()

        return scan(combine, init, xs)


def _batchnorm_with_stats(model: CNN) -> CNN:
    """Non-trivial running statistics, so batch norm is not the identity."""
    model.bn.running_mean.uniform_(-0.5, 0.5)
    model.bn.running_var.uniform_(0.5, 1.5)
    return model.eval()


def programs() -> dict[str, Golden]:
    torch.manual_seed(0)
    r = torch.randn
    return {
        "mlp": Golden({"forward": MethodSpec(MLP().eval(), [(r(2, 8),)])}),
        "cnn": Golden({"forward": MethodSpec(_batchnorm_with_stats(CNN()), [(r(1, 3, 8, 8),)])}),
        "dynamic": Golden(
            {
                "forward": MethodSpec(
                    MLP((6, 8, 3)).eval(),
                    [(r(4, 6),), (r(1, 6),), (r(8, 6),)],
                    dynamic_shapes=({0: Dim("batch", min=1, max=8)},),
                )
            }
        ),
        "multi_method": Golden(
            {
                "forward": MethodSpec(MLP((4, 4)).eval(), [(r(3, 4),)]),
                "other": MethodSpec(Scale(3.0), [(r(2, 2), r(2, 2))]),
            }
        ),
        "stateful": Golden(
            {"forward": MethodSpec(Counter(), [(r(2, 3),), (r(2, 3),), (r(2, 3),)])},
            config=ExecutorchBackendConfig(passes=[InitializedMutableBufferPass(["count"])]),
        ),
        "int_bool": Golden({"forward": MethodSpec(IntBool(), [(r(3, 5), torch.arange(6).reshape(2, 3))])}),
        "constant_method": Golden({"forward": MethodSpec(Scale(0.5), [(r(4), r(4))])}, constant_methods={"get_n": 3}),
        # 1.5.1 always puts constants in a segment after the flatbuffer; raise both alignments
        # above their defaults (segment 128, tensor 16) so readers must honour the recorded offsets.
        "segments": Golden(
            {"forward": MethodSpec(MLP((5, 7, 3)).eval(), [(r(2, 5),)])},
            config=ExecutorchBackendConfig(segment_alignment=1024, constant_tensor_alignment=64),
        ),
        "cond": Golden({"forward": MethodSpec(Cond(), [(r(2, 3).abs(),), (-r(2, 3).abs(),)])}),  # both branches
        "map": Golden({"forward": MethodSpec(Map(), [(r(4, 3), r(3)), (r(4, 3), r(3))])}),
        "scan": Golden({"forward": MethodSpec(Scan(), [(r(2, 3), r(5, 2, 3)), (r(2, 3), r(5, 2, 3))])}),
    }


def export_program(golden: Golden) -> bytes:
    exported = {
        name: export(copy.deepcopy(spec.module), spec.calls[0], dynamic_shapes=spec.dynamic_shapes)
        for name, spec in golden.methods.items()
    }
    edge = to_edge(exported, constant_methods=golden.constant_methods or None)
    return edge.to_executorch(golden.config).buffer


def _numpy(value) -> np.ndarray:
    return value.detach().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def eager_outputs(golden: Golden) -> dict[str, list[list[np.ndarray]]]:
    """PyTorch's outputs for every call of every method (constant methods return their value)."""
    result = {}
    for name, spec in golden.methods.items():
        module = copy.deepcopy(spec.module)
        with torch.no_grad():
            outs = [module(*inputs) for inputs in spec.calls]
        result[name] = [[_numpy(o) for o in (out if isinstance(out, tuple) else (out,))] for out in outs]
    for name, value in golden.constant_methods.items():
        result[name] = [[_numpy(value)]]
    return result


def executorch_outputs(buffer: bytes, golden: Golden, method_names: list[str]) -> dict[str, list[list[np.ndarray]]]:
    """ExecuTorch's outputs: each method loaded once and called on its inputs in order."""
    program = Runtime.get().load_program(buffer)
    result = {}
    for name in method_names:
        calls = golden.methods[name].calls if name in golden.methods else [()]
        method = program.load_method(name)
        result[name] = [[_numpy(o) for o in method.execute(list(inputs))] for inputs in calls]
    return result


def check_close(got: dict, want: dict, where: str) -> None:
    assert got.keys() == want.keys(), f"{where}: methods {sorted(got)} != {sorted(want)}"
    for name in got:
        for k, (outs, refs) in enumerate(zip(got[name], want[name], strict=True)):
            for j, (o, e) in enumerate(zip(outs, refs, strict=True)):
                label = f"{where}: {name} call {k} output {j}"
                assert o.shape == e.shape and o.dtype == e.dtype, f"{label}: {o.dtype}{o.shape} != {e.dtype}{e.shape}"
                np.testing.assert_allclose(o, e, rtol=1e-4, atol=1e-5, err_msg=label)


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Like `np.savez`, with a fixed timestamp so that regenerating rewrites identical bytes."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for key, array in arrays.items():
            data = io.BytesIO()
            np.lib.format.write_array(data, np.asarray(array), allow_pickle=False)
            archive.writestr(
                zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0)),
                data.getvalue(),
                compress_type=zipfile.ZIP_DEFLATED,
            )


def make(name: str, golden: Golden) -> None:
    buffer = export_program(golden)
    method_names = sorted(Runtime.get().load_program(buffer).method_names)
    outputs = executorch_outputs(buffer, golden, method_names)
    check_close(outputs, eager_outputs(golden), name)
    arrays = {"methods": np.array(method_names)}
    for method in method_names:
        calls = golden.methods[method].calls if method in golden.methods else [()]
        for k, (inputs, outs) in enumerate(zip(calls, outputs[method], strict=True)):
            arrays.update({f"{method}/{k}/in{i}": _numpy(x) for i, x in enumerate(inputs)})
            arrays.update({f"{method}/{k}/out{j}": o for j, o in enumerate(outs)})
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / f"{name}.pte").write_bytes(buffer)
    write_npz(OUT_DIR / f"{name}.npz", arrays)
    print(f"{name}: {len(buffer)} bytes, methods {method_names}")


def main(names: list[str]) -> None:
    goldens = programs()
    for name in names or goldens:
        make(name, goldens[name])


if __name__ == "__main__":
    main(sys.argv[1:])
