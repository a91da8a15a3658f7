"""Portable kernels vs PyTorch eager, per operator family, on MobileNetV2- and Llama-sized shapes.

Each case is one functional ATen call. torchedge runs the kernel the runtime would call
(the out variant, outs preallocated as planned memory); eager runs the functional op, or
for a view (free in eager) its copying twin (``permute_copy``), as the edge dialect does. One
thread on both sides; medians; the ratio is torchedge time / eager time (lower is better),
summarised by geometric means per family and overall. Each kernel's output is also checked
against eager (`check`: ok, or the mismatch).

Usage: python benchmarks/operators.py [family ...] [--seconds S]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # the repository root: tools.qa
import _common  # noqa: E402  (sets the thread environment first)
import torch  # noqa: E402

from tools.qa.kernel_check import Status, check_call, kernel_arguments, kernel_op  # noqa: E402
from torchedge.exir.op_schema import op_name, view_copy_variant  # noqa: E402
from torchedge.kernels.registry import get_kernel  # noqa: E402

aten = torch.ops.aten
_GEN = torch.Generator().manual_seed(0)


def r(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=_GEN).to(dtype)


def ints(high, *shape):
    return torch.randint(0, high, shape, generator=_GEN)


def _conv(x, w, stride=1, padding=0, groups=1):
    return aten.convolution.default, (x, w, r(w.shape[0]), [stride] * 2, [padding] * 2, [1, 1], False, [0, 0], groups)


# family -> [(label, op, args)]: MobileNetV2 activations (N=1, 224x224 input) and a Llama-style
# block (32 tokens, hidden 2048, 32 heads of 64, vocabulary 32000).
CASES = {
    "unary": [
        ("relu 32x112x112", aten.relu.default, (r(1, 32, 112, 112),)),
        ("hardtanh(0,6) 96x56x56", aten.hardtanh.default, (r(1, 96, 56, 56), 0.0, 6.0)),
        ("sigmoid 32x5632", aten.sigmoid.default, (r(32, 5632),)),
        ("gelu 32x5632", aten.gelu.default, (r(32, 5632),)),
        ("exp 32x32x32x32", aten.exp.default, (r(32, 32, 32, 32),)),
        ("tanh 32x2048", aten.tanh.default, (r(32, 2048),)),
        ("rsqrt 32x2048", aten.rsqrt.default, (r(32, 2048).abs(),)),
        ("neg 32x2048", aten.neg.default, (r(32, 2048),)),
        ("erf 32x5632", aten.erf.default, (r(32, 5632),)),
    ],
    "binary": [
        ("add residual 24x56x56", aten.add.Tensor, (r(1, 24, 56, 56), r(1, 24, 56, 56))),
        ("mul 32x2048 * 2048", aten.mul.Tensor, (r(32, 2048), r(2048))),
        ("mul 96x56x56 * 96x1x1", aten.mul.Tensor, (r(1, 96, 56, 56), r(1, 96, 1, 1))),
        ("sub 32x32x32x32 - 32x32x32x1", aten.sub.Tensor, (r(32, 32, 32, 32), r(32, 32, 32, 1))),
        ("div 32x32x32x32 / scalar", aten.div.Tensor, (r(32, 32, 32, 32), torch.tensor(8.0))),
        ("where mask 1x1x32x32", aten.where.self, (ints(2, 1, 1, 32, 32).bool(), r(1, 32, 32, 32), r(1))),
        ("pow 32x2048 ^ 2", aten.pow.Tensor_Scalar, (r(32, 2048), 2)),
        ("maximum 32x2048", aten.maximum.default, (r(32, 2048), r(32, 2048))),
        ("add f16 32x2048", aten.add.Tensor, (r(32, 2048, dtype=torch.float16), r(2048, dtype=torch.float16))),
        ("add i64 32x2048", aten.add.Tensor, (ints(100, 32, 2048), ints(100, 2048))),
    ],
    "reduction": [
        ("sum 32x2048 dim -1", aten.sum.dim_IntList, (r(32, 2048), [-1])),
        ("mean 1280x7x7 dims (2,3)", aten.mean.dim, (r(1, 1280, 7, 7), [2, 3], True)),
        ("mean 32x2048 dim -1 (rmsnorm)", aten.mean.dim, (r(32, 2048), [-1], True)),
        ("amax 32x32x32x32 dim -1", aten.amax.default, (r(32, 32, 32, 32), [-1], True)),
        ("argmax 32x32000", aten.argmax.default, (r(32, 32000), -1)),
        ("var 32x2048 dim -1", aten.var.correction, (r(32, 2048), [-1]), {"correction": 0, "keepdim": True}),
        ("cumsum 32x2048", aten.cumsum.default, (r(32, 2048), -1)),
    ],
    "matmul": [
        ("mm 32x2048 @ 2048x2048", aten.mm.default, (r(32, 2048), r(2048, 2048))),
        ("addmm classifier 1x1280 @ 1280x1000", aten.addmm.default, (r(1000), r(1, 1280), r(1280, 1000))),
        ("mm 32x2048 @ 2048x5632", aten.mm.default, (r(32, 2048), r(2048, 5632))),
        ("bmm QK^T 32x32x64 @ 32x64x32", aten.bmm.default, (r(32, 32, 64), r(32, 64, 32))),
        ("bmm AV 32x32x32 @ 32x32x64", aten.bmm.default, (r(32, 32, 32), r(32, 32, 64))),
        (
            "mm f16 32x2048 @ 2048x2048",
            aten.mm.default,
            (r(32, 2048, dtype=torch.float16), r(2048, 2048, dtype=torch.float16)),
        ),
    ],
    "conv2d": [
        ("3x3 s2 3->32 224x224", *_conv(r(1, 3, 224, 224), r(32, 3, 3, 3), stride=2, padding=1)),
        ("3x3 64->64 56x56", *_conv(r(1, 64, 56, 56), r(64, 64, 3, 3), padding=1)),
        ("depthwise 3x3 96 112x112 s2", *_conv(r(1, 96, 112, 112), r(96, 1, 3, 3), stride=2, padding=1, groups=96)),
        ("depthwise 3x3 144 56x56", *_conv(r(1, 144, 56, 56), r(144, 1, 3, 3), padding=1, groups=144)),
        ("1x1 32->16 112x112", *_conv(r(1, 32, 112, 112), r(16, 32, 1, 1))),
        ("1x1 96->24 56x56", *_conv(r(1, 96, 56, 56), r(24, 96, 1, 1))),
        ("1x1 320->1280 7x7", *_conv(r(1, 320, 7, 7), r(1280, 320, 1, 1))),
    ],
    "pooling": [
        (
            "max_pool 3x3 s2 64x112x112",
            aten.max_pool2d_with_indices.default,
            (r(1, 64, 112, 112), [3, 3], [2, 2], [1, 1]),
        ),
        ("avg_pool 2x2 s2 64x56x56", aten.avg_pool2d.default, (r(1, 64, 56, 56), [2, 2], [2, 2])),
        ("adaptive_avg_pool 1280x7x7 -> 1x1", aten._adaptive_avg_pool2d.default, (r(1, 1280, 7, 7), [1, 1])),
    ],
    "normalization": [
        ("layer_norm 32x2048", aten.native_layer_norm.default, (r(32, 2048), [2048], r(2048), r(2048), 1e-5)),
        (
            "batch_norm (eval) 32x112x112",
            aten._native_batch_norm_legit_no_training.default,
            (r(1, 32, 112, 112), r(32), r(32), r(32), r(32).abs(), 0.1, 1e-5),
        ),
        (
            "group_norm 64x56x56 g32",
            aten.native_group_norm.default,
            (r(1, 64, 56, 56), r(64), r(64), 1, 64, 56 * 56, 32, 1e-5),
        ),
    ],
    "softmax": [
        ("softmax attention 32x128x128", aten._softmax.default, (r(1, 32, 128, 128), -1, False)),
        ("softmax 32x32x32", aten._softmax.default, (r(32, 32, 32), -1, False)),
        ("log_softmax logits 32x32000", aten._log_softmax.default, (r(32, 32000), -1, False)),
    ],
    "shape": [
        ("permute heads 1x32x32x64", aten.permute.default, (r(1, 32, 32, 64), [0, 2, 1, 3])),
        ("permute NCHW->NHWC 96x56x56", aten.permute.default, (r(1, 96, 56, 56), [0, 2, 3, 1])),
        ("view 32x2048 -> 32x32x64", aten.view.default, (r(32, 2048), [32, 32, 64])),
        ("cat 2x 32x56x56 dim 1", aten.cat.default, ([r(1, 32, 56, 56), r(1, 32, 56, 56)], 1)),
        ("cat kv cache 1x32x480x64 + 32", aten.cat.default, ([r(1, 32, 480, 64), r(1, 32, 32, 64)], 2)),
        ("slice 32x5632 [:, :2816]", aten.slice.Tensor, (r(32, 5632), 1, 0, 2816)),
        ("expand 1x1x32x32 -> 1x32x32x32", aten.expand.default, (r(1, 1, 32, 32), [1, 32, 32, 32])),
        ("split_with_sizes qkv 32x6144", aten.split_with_sizes.default, (r(32, 6144), [2048, 2048, 2048], 1)),
        ("constant_pad 96x56x56 +1", aten.constant_pad_nd.default, (r(1, 96, 56, 56), [1, 1, 1, 1], 0.0)),
        ("_to_copy f32->f16 32x5632", aten._to_copy.default, (r(32, 5632),), {"dtype": torch.float16}),
    ],
    "indexing": [
        ("embedding 32000x512 [1x32]", aten.embedding.default, (r(32000, 512), ints(32000, 1, 32))),
        ("index_select 2048x2048 [32]", aten.index_select.default, (r(2048, 2048), 0, ints(2048, 32))),
        ("gather 32x32000 [32x8]", aten.gather.default, (r(32, 32000), 1, ints(32000, 32, 8))),
        ("index rope cache 4096x64 [32]", aten.index.Tensor, (r(4096, 64), [ints(4096, 32)])),
        (
            "index_put kv 1x32x512x64",
            aten.index_put.default,
            (r(1, 32, 512, 64), [None, None, torch.arange(32)], r(1, 32, 32, 64)),
        ),
        ("select 32x32000 [-1]", aten.select.int, (r(32, 32000), 0, -1)),
        ("scatter_add 32x2048", aten.scatter_add.default, (r(32, 2048), 1, ints(2048, 32, 256), r(32, 256))),
    ],
}


def _time(fn, seconds: float) -> float:
    """Median seconds of ``fn`` over as many runs (3 to 200) as fit in about ``seconds``."""
    first = _common.median_seconds(fn, 1, warmup=1)
    return _common.median_seconds(fn, max(3, min(200, int(seconds / max(first, 1e-6)))))


def _dtype(args) -> str:
    """The dtype a case is about: its first tensor argument's that is not a bool mask."""
    tensors = [t for a in args for t in (a if isinstance(a, list) else [a]) if isinstance(t, torch.Tensor)]
    return str(next((t.dtype for t in tensors if t.dtype != torch.bool), tensors[0].dtype)).removeprefix("torch.")


def bench(label: str, op, args, kwargs: dict, seconds: float) -> tuple[list, float]:
    expected = op(*args, **kwargs)
    values, _, _ = kernel_arguments(op, args, kwargs, expected)
    kernel = get_kernel(op_name(kernel_op(op)))
    check = check_call(op, args, kwargs, expected)
    eager_op = view_copy_variant(op) or op
    ours = _time(lambda: kernel.fn(*values), seconds)
    eager = _time(lambda: eager_op(*args, **kwargs), seconds)
    status = "ok" if check.status is Status.PASS else f"{check.status.name}: {check.detail[:40]}"
    row = [label, _dtype(args), f"{ours * 1e3:.3f}", f"{eager * 1e3:.3f}", f"{ours / eager:.2f}", status]
    return row, ours / eager


def _geomean(ratios: list[float]) -> float:
    return math.exp(sum(map(math.log, ratios)) / len(ratios))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", default=list(CASES), help=f"some of: {' '.join(CASES)}")
    parser.add_argument("--seconds", type=float, default=0.2, help="time budget per op and side (default 0.2)")
    _common.add_json_option(parser)
    args = parser.parse_args()
    unknown = set(args.families) - set(CASES)
    if unknown:
        parser.error(f"unknown families {sorted(unknown)}")
    torch.set_num_threads(1)
    rows, summary, everything = [], [], []
    for family in args.families:
        ratios = []
        for label, op, call_args, *kwargs in CASES[family]:
            row, ratio = bench(label, op, call_args, kwargs[0] if kwargs else {}, args.seconds)
            rows.append([family] + row)
            ratios.append(ratio)
        everything += ratios
        summary.append([family, len(ratios), f"{_geomean(ratios):.2f}"])
    _common.print_table(["family", "op", "dtype", "torchedge ms", "eager ms", "ratio", "check"], rows)
    print()
    summary.append(["overall", len(everything), f"{_geomean(everything):.2f}"])
    _common.print_table(["family", "ops", "geomean ratio (torchedge / eager)"], summary)
    _common.write_json(
        args.json,
        {
            "operators": (["family", "op", "dtype", "torchedge ms", "eager ms", "ratio", "check"], rows),
            "families": (["family", "ops", "geomean ratio (torchedge / eager)"], summary),
        },
    )
    print(f"\none thread each (torch threads={torch.get_num_threads()}); medians; ratio > 1: torchedge slower")


if __name__ == "__main__":
    main()
