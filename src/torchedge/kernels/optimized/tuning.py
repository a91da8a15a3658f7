"""Every tuned constant of the optimized kernels, in one table.

Each `Tuned` entry says what it decides and where and how it was measured. A value is read
when a kernel runs, so it can be overridden at any time: ``set_tuning(name, value)`` (None
restores the default), or the environment variable ``TORCHEDGE_TUNING_<NAME>`` read at
import. No constant changes a result beyond float reassociation (pow's products: an ulp or
two of pow); they only choose among strategies (the ``tests/kernels/test_optimized_*`` oracle
tests force every branch this way).

>>> set_tuning("winograd_min_channels", 1 << 30)  # never take Winograd
>>> tuned("winograd_min_channels") == 1 << 30
True
>>> set_tuning("winograd_min_channels", None)
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from torchedge.errors import InputError

__all__ = ["Tuned", "TABLE", "tuned", "set_tuning", "MACHINE"]

MACHINE = "2-vCPU AMD EPYC (Zen 4, AVX2 kernels of OpenBLAS), NumPy 2.4, one thread"
_MODELS = "benchmarks/models.py mobilenet_v2 resnet18 (te-vs-eager ratio)"


@dataclass(frozen=True)
class Tuned:
    """One tuned constant: its default, what it decides and how it was measured."""

    name: str
    default: float
    decides: str
    measured: str


TABLE: dict[str, Tuned] = {
    t.name: t
    for t in (
        Tuned(
            "conv_bias_column_elements",
            1 << 16,
            "weights up to this many elements are copied with the bias as an extra column "
            "(else the bias is added in the pass extracting the output grid)",
            f"{MACHINE}; {_MODELS}",
        ),
        Tuned(
            "conv_rows_max_length_ratio",
            1.25,
            "im2col over whole rows only while a row's run is at most this times the output positions",
            f"{MACHINE}; {_MODELS}, rows against position-by-position im2col",
        ),
        Tuned(
            "conv_rows_gap_cost",
            12,
            "im2col over whole rows while output channels x gap columns <= this x output positions "
            "(each column copied as a run saves about this many multiply-adds)",
            f"{MACHINE}; {_MODELS}",
        ),
        Tuned(
            "conv_pointwise_bias_ratio",
            2,
            "a biased 1x1 convolution with at least this many output per input channels takes the "
            "bias as a row of ones under a copy of the input",
            f"{MACHINE}; mobilenet_v2's expansions (0.85-0.95x the time)",
        ),
        Tuned(
            "conv_per_tap_min_channels",
            16,
            "input channels per group from which one GEMM per tap (no im2col copy) is considered",
            f"{MACHINE}; {_MODELS}",
        ),
        Tuned(
            "conv_per_tap_weight_ratio",
            4,
            "one GEMM per tap while this x the weight elements < the column matrix's elements",
            f"{MACHINE}; {_MODELS}",
        ),
        Tuned(
            "depthwise_tap_by_tap_length",
            2048,
            "depthwise planes with runs at least this long are summed tap by tap (else a batched "
            "product per block of rows)",
            f"{MACHINE}; 56x56 and 112x112 planes of mobilenet_v2 (1.2-1.4x faster)",
        ),
        Tuned(
            "depthwise_tap_by_tap_block",
            1 << 19,
            "elements of a block of rows' running sum, tap by tap",
            f"{MACHINE}; mobilenet_v2 (blocks that fit in L2 measured slower)",
        ),
        Tuned(
            "depthwise_product_block",
            1 << 18,
            "elements of a block of rows' column array in the batched depthwise product",
            f"{MACHINE}; {_MODELS}",
        ),
        Tuned(
            "channels_last_max_positions",
            64,
            "2-D depthwise convolutions with output planes up to this many positions ...",
            f"{MACHINE}; 960 channels of 7x7 and 576 of 14x14 at stride 2 (0.6x the time)",
        ),
        Tuned(
            "channels_last_min_channels",
            256,
            "... and at least this many channels run channels-last",
            f"{MACHINE}; as channels_last_max_positions",
        ),
        Tuned(
            "winograd_min_channels",
            48,
            "dense 3x3 stride-1 convolutions with at least this many input and output channels ...",
            f"{MACHINE}; resnet18 layers against the column methods (0.6-0.85x the time from 48 "
            "channels, even or slower with 32)",
        ),
        Tuned(
            "winograd_min_tiles",
            36,
            "... and at least this many 2x2 output tiles (12x12 outputs) take Winograd F(2x2, 3x3)",
            f"{MACHINE}; as winograd_min_channels (even or slower with 16 tiles)",
        ),
        Tuned(
            "winograd_max_scratch_bytes",
            64 << 20,
            "larger Winograd scratch memory (16 values per tile and channel) keeps the column methods",
            f"{MACHINE}; a limit on memory, not a speed crossover",
        ),
        Tuned(
            "inverted_residual_max_positions",
            32 * 32,
            "the inverted_residual fusion rule (torchedge.fusion) takes blocks whose depthwise output "
            "planes have at most this many positions (larger planes keep the three convolutions)",
            f"{MACHINE}; benchmarks/models.py mobilenet_v2, fused blocks against fuse=False per plane size",
        ),
        Tuned(
            "pool_direct_taps",
            64,
            "pooling windows reaching at most this many taps of the input are reduced tap by tap ...",
            f"{MACHINE}; 2x2 and 3x3 pools of the CNNs against the blocks of the portable kernel",
        ),
        Tuned(
            "pool_direct_layout",
            4,
            "... while the padded tap layout holds at most this many times the input and output elements",
            f"{MACHINE}; a limit on memory, not a speed crossover",
        ),
        Tuned(
            "pool_direct_block",
            1 << 15,
            "elements of a block of rows reduced tap by tap (a few such blocks stay in L2)",
            f"{MACHINE}; benchmarks/models.py cnn resnet18",
        ),
        Tuned(
            "pool_strided_taps",
            64,
            "max pooling without indices of unpadded windows inside the input, with at most this many "
            "taps, takes one maximum per tap over strided views of the input",
            f"{MACHINE}; benchmarks/models.py cnn (2x2 pools)",
        ),
        Tuned(
            "upsample_matrix_size",
            96,
            "interpolating upsampling resamples a dim of at most this many inputs by one product with its "
            "dense interpolation matrix (else by weighted gathers of its taps, as the portable kernel)",
            f"{MACHINE}; set with the upsampling kernels (commit 684588f), BLAS product against gathers",
        ),
        Tuned(
            "adaptive_matrix_ratio",
            16,
            "adaptive average pooling and its gradient take a product with a dim's (out, in) averaging "
            "matrix while out x in <= this x (out + in) (else reduceat or range sums, as portable)",
            f"{MACHINE}; set with the pooling cost bound (commit 1b58e4e), GEMM against reduceat",
        ),
        Tuned(
            "clamp_rows_min_elements",
            1 << 12,
            "where NumPy's clip does not keep ties, clamps of at least this many elements take NumPy's "
            "minimum and maximum against constant rows (else against numbers, as portable)",
            f"{MACHINE}; relu on an mlp's 4x64 activations (commit c9f0443)",
        ),
        Tuned(
            "clamp_rows_block",
            1 << 14,
            "elements of a block clamped against constant rows (a block and its bound rows stay in L2)",
            f"{MACHINE}; relu, clamp and hardtanh against number operands (commit ef027a4, 3-4x the time)",
        ),
        Tuned(
            "pow_product_max_exponent",
            8,
            "float x ** n for an integer n from 4 to this is binary powering (repeated products, within "
            "an ulp or two of pow) instead of NumPy's pow (ATen's own products stop at 3)",
            f"{MACHINE}; pow kernels against np.power (commit ed1ae45)",
        ),
        Tuned(
            "attention_scores_per_chunk",
            1 << 17,
            "scores of the heads attended together (512 KiB of float32 stays in L2 between the products)",
            f"{MACHINE}; benchmarks/llm.py attention layers",
        ),
        Tuned(
            "folded_result_extra_bytes",
            1 << 20,
            "a tensor computed at load from constants (torchedge.runtime.folding) is kept when it is at "
            "most this many bytes larger than those constants (else the steps computing it run each time)",
            f"{MACHINE}; a limit on memory, not a speed crossover (bert's and llama's masks and positions fit)",
        ),
    )
}

_VALUES: dict[str, float] = {name: entry.default for name, entry in TABLE.items()}  # the defaults, overridden


def _check_name(name: str) -> Tuned:
    entry = TABLE.get(name)
    if entry is None:
        raise InputError(f"no tuned constant {name!r}; the table has {sorted(TABLE)}")
    return entry


def tuned(name: str) -> float:
    """The value of the tuned constant ``name``: its override, else its default."""
    return _VALUES[name]


def set_tuning(name: str, value: float | None) -> None:
    """Override the tuned constant ``name`` for this process; None restores its default."""
    _check_name(name)
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
        raise InputError(f"tuned constant {name!r} takes a non-negative number, got {value!r}")
    _VALUES[name] = TABLE[name].default if value is None else value


def _read_environment() -> None:
    for name in TABLE:
        text = os.environ.get(f"TORCHEDGE_TUNING_{name.upper()}")
        if text is not None:
            try:
                set_tuning(name, float(text) if "." in text or "e" in text.lower() else int(text))
            except ValueError:
                raise InputError(f"TORCHEDGE_TUNING_{name.upper()}={text!r} is not a number") from None


_read_environment()
