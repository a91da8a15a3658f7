"""``llama::quantized_moe_ffn`` (torchedge.kernels.portable.llm_moe) against ExecuTorch's own
kernel, which importing ``executorch.extension.llm.custom_ops`` loads into torch.

torchao's packer (``torchao::_pack_8bit_act_4bit_weight``) is not installed here, so `pack`
writes the blobs, following torchao's layout; the unpacking it must invert is ExecuTorch's."""

import numpy as np
import pytest
import torch

pytest.importorskip("executorch")

import executorch.extension.llm.custom_ops.custom_ops  # noqa: E402, F401

from tests.kernels.harness import run_case_and_shape  # noqa: E402
from torchedge.errors import KernelError  # noqa: E402
from torchedge.kernels.portable.llm_moe import unpack_torchao_weights  # noqa: E402
from torchedge.kernels.registry import get_kernel  # noqa: E402

TOKENS, DIM, HIDDEN, EXPERTS, GROUP = 5, 32, 48, 4, 16


def pack(qvals: np.ndarray, scales: np.ndarray, group_size: int, nbit: int) -> np.ndarray:
    """A torchao blob (no zero points, no bias): header, then per block of 8 rows and per group,
    the 8 x 16 chunks (interleaved in 2 halves, bit-packed), 8 scales and 8 sums."""
    n, k = qvals.shape
    blocks = -(-n // 8)
    q = np.zeros((blocks * 8, k), np.int8)
    q[:n] = qvals
    s = np.zeros((blocks * 8, k // group_size), np.float32)
    s[:n] = scales
    header = np.zeros(16, np.int32)
    header[:2] = (6712, 1)  # magic, linear_8bit_act_xbit_weight_universal
    parts = [header.view(np.uint8)]
    for b in range(blocks):
        rows = q[b * 8 : (b + 1) * 8]
        for g in range(k // group_size):
            for c in range(g * group_size, (g + 1) * group_size, 16):
                values = rows[:, c : c + 16].reshape(8, 2, 8).transpose(1, 0, 2).reshape(128)
                if nbit == 8:
                    parts.append(values.view(np.uint8))
                else:
                    u = (values.astype(np.int16) + 8).astype(np.uint8).reshape(4, 32)
                    parts.append(((u[:, :16] & 0x0F) | (u[:, 16:] << 4)).astype(np.uint8).reshape(64))
            parts.append(np.ascontiguousarray(s[b * 8 : (b + 1) * 8, g]).view(np.uint8))
            parts.append(rows[:, g * group_size : (g + 1) * group_size].sum(1, dtype=np.int32).view(np.uint8))
    return np.concatenate(parts)


def _weights(rng: np.random.Generator, n: int, k: int, nbit: int) -> np.ndarray:
    low, high = (-8, 7) if nbit == 4 else (-128, 127)
    qvals = rng.integers(low, high + 1, (n, k)).astype(np.int8)
    scales = (rng.random((n, k // GROUP)) * 0.05 + 0.01).astype(np.float32)
    blob = pack(qvals, scales, GROUP, nbit)
    got_q, got_s = unpack_torchao_weights(blob, n, k, GROUP, nbit)
    np.testing.assert_array_equal(got_q, qvals)
    np.testing.assert_array_equal(got_s, scales)
    return blob


def _moe(x, gate, bias, w13, w2, *rest):
    return torch.ops.llama.quantized_moe_ffn(x, gate, bias, w13, w2, *rest)


@pytest.mark.parametrize("nbit", [4, 8])
@pytest.mark.parametrize(
    "score_func,with_bias,route_scale,k",
    [("sigmoid", True, 2.5, 2), ("sigmoid", False, 1.0, 1), ("softmax", False, 1.0, 3)],
)
def test_quantized_moe_ffn(nbit, score_func, with_bias, route_scale, k):
    rng = np.random.default_rng(nbit * 10 + k)  # each case its own data, whatever runs before it
    w13 = torch.from_numpy(np.stack([_weights(rng, 2 * HIDDEN, DIM, nbit) for _ in range(EXPERTS)]))
    w2 = torch.from_numpy(np.stack([_weights(rng, DIM, HIDDEN, nbit) for _ in range(EXPERTS)]))
    x = torch.from_numpy(rng.standard_normal((TOKENS, DIM)).astype(np.float32))
    gate = torch.from_numpy(rng.standard_normal((EXPERTS, DIM)).astype(np.float32))
    bias = torch.from_numpy(rng.standard_normal(EXPERTS).astype(np.float32)) if with_bias else torch.empty(0)
    args = (x, gate, bias, w13, w2, k, EXPERTS, HIDDEN, DIM, GROUP, nbit, score_func, route_scale)
    # float32 products summed in another order than ExecuTorch's kernel: round-off of the order of
    # float32's epsilon times the largest output (8-bit weights give sums in the tens of thousands,
    # beside small ones), measured at 3e-7 of it; allowed 2e-5 of it.
    scale = float(_moe(*args).abs().max())
    run_case_and_shape("llama::quantized_moe_ffn.out", _moe, *args, rtol=1e-5, atol=2e-5 * scale, noncontiguous=False)


def test_quantized_moe_ffn_refuses_a_short_blob():
    blob = np.zeros((EXPERTS, 100), np.uint8)
    x, gate = np.zeros((2, DIM), np.float32), np.zeros((EXPERTS, DIM), np.float32)
    with pytest.raises(KernelError):
        get_kernel("llama::quantized_moe_ffn.out").fn(
            x, gate, np.zeros(0, np.float32), blob, blob, 1, EXPERTS, HIDDEN, DIM, GROUP, 4, "softmax", 1.0,
            np.empty((2, DIM), np.float32),
        )  # fmt: skip
