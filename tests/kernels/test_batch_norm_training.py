"""Training-mode batch norm (`aten::_batch_norm_with_update.out`) and randomized leaky ReLU
(`aten::rrelu_with_noise.out`) against eager, and what exported programs using them need.

torch.export leaves their functional forms (``_native_batch_norm_legit_functional``,
``_batch_norm_with_update_functional``, ``rrelu_with_noise_functional``), which have no out
variant in ATen; `FunctionalTwinsPass` lowers them onto these out variants, on copies of the
arguments they update. The end-to-end tests check the outputs and the running statistics.
"""

import numpy as np
import pytest
import torch

from tests.kernels.harness import TOLERANCES
from torchedge.errors import KernelError
from torchedge.exir import to_edge
from torchedge.exir.dtypes import to_numpy
from torchedge.kernels.portable.random import manual_seed
from torchedge.kernels.registry import get_kernel, output_shapes
from torchedge.runtime import Runtime

BN = "aten::_batch_norm_with_update.out"
RRELU = "aten::rrelu_with_noise.out"


def _close(got, expected):
    if got.size == 0:  # the reserve
        assert expected.shape == got.shape
        return
    rtol, atol = TOLERANCES[np.dtype(got.dtype)]
    np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol)


@pytest.mark.parametrize(
    ("dtype", "stats_dtype"),
    [
        (torch.float32, torch.float32),
        (torch.float64, torch.float64),
        (torch.float16, torch.float32),
        (torch.bfloat16, torch.float32),
    ],
)
@pytest.mark.parametrize("shape", [(4, 3), (4, 3, 5), (2, 3, 4, 5), (2, 3, 2, 3, 2), (1, 3, 2)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_with_update_matches_eager(dtype, stats_dtype, shape, affine):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=gen, dtype=torch.float64).mul(3).add(2).to(dtype)
    weight = torch.randn(3, generator=gen, dtype=torch.float64).to(stats_dtype) if affine else None
    bias = torch.randn(3, generator=gen, dtype=torch.float64).to(stats_dtype) if affine else None
    running_mean = torch.randn(3, generator=gen, dtype=torch.float64).to(stats_dtype)
    running_var = torch.rand(3, generator=gen, dtype=torch.float64).add(0.5).to(stats_dtype)
    mean, var = to_numpy(running_mean).copy(), to_numpy(running_var).copy()
    expected = torch.ops.aten._batch_norm_with_update(x, weight, bias, running_mean, running_var, 0.1, 1e-5)
    outs = [np.empty(t.shape, to_numpy(t).dtype) for t in expected]
    w, b = (to_numpy(weight), to_numpy(bias)) if affine else (None, None)
    args = [to_numpy(x), w, b, mean, var, 0.1, 1e-5, *outs]
    assert output_shapes(BN, args) == [tuple(t.shape) for t in expected]
    get_kernel(BN).fn(*args)
    for got, want in zip(outs, expected):
        _close(got, to_numpy(want))
    _close(mean, to_numpy(running_mean))  # updated in place, as in eager
    _close(var, to_numpy(running_var))


def _bn_outs(shape):
    channels = shape[1]
    return [
        np.empty(shape, np.float32),
        np.empty(channels, np.float32),
        np.empty(channels, np.float32),
        np.empty(0, np.uint8),
    ]


def test_batch_norm_with_update_refuses_what_eager_refuses():
    x, stats = torch.randn(0, 3, 2), torch.ones(3)
    with pytest.raises(RuntimeError):
        torch.ops.aten._batch_norm_with_update(x, None, None, stats.clone(), stats.clone(), 0.1, 1e-5)
    with pytest.raises(KernelError, match="more than 1 value per channel"):
        get_kernel(BN).fn(
            to_numpy(x), None, None, np.ones(3, np.float32), np.ones(3, np.float32), 0.1, 1e-5, *_bn_outs((0, 3, 2))
        )
    with pytest.raises(KernelError, match="channel dim"):
        output_shapes(BN, [np.ones(3, np.float32), None, None, None, None, 0.1, 1e-5, *_bn_outs((3, 1))])


def test_batch_norm_with_update_refuses_one_value_per_channel():
    """A divergence shared with `_native_batch_norm_legit.out`: ATen (not F.batch_norm, which
    refuses it) normalises a single value per channel and sets the running var to NaN."""
    x = np.ones((1, 3, 1), np.float32)
    with pytest.raises(KernelError, match="more than 1 value per channel"):
        get_kernel(BN).fn(x, None, None, np.ones(3, np.float32), np.ones(3, np.float32), 0.1, 1e-5, *_bn_outs(x.shape))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("lower", "upper"), [(0.125, 1 / 3), (0.1, 0.1), (0.5, 0.1), (0.0, 0.3)])
def test_rrelu_with_noise_eval_matches_eager(dtype, lower, upper):
    x = torch.tensor([-3.0, -0.0, 0.0, 2.5, float("nan"), float("-inf"), float("inf"), -1e-30]).to(dtype)
    x = torch.cat([x, torch.randn(40, dtype=torch.float64).to(dtype)]).reshape(6, 8)
    noise = torch.full(x.shape, 7.0, dtype=dtype)
    expected = torch.ops.aten.rrelu_with_noise(x, noise, lower, upper, False)
    out, noise_np = np.empty(x.shape, to_numpy(expected).dtype), to_numpy(noise).copy()
    args = [to_numpy(x), noise_np, lower, upper, False, None, out]
    assert output_shapes(RRELU, args) == [tuple(expected.shape)]
    get_kernel(RRELU).fn(*args)
    np.testing.assert_array_equal(out.astype(np.float64), to_numpy(expected).astype(np.float64))
    np.testing.assert_array_equal(noise_np, to_numpy(noise))  # untouched in eval, as in eager


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_rrelu_with_noise_training_draws_slopes_as_eager(dtype):
    """Random in training: same rules as eager (slopes in [lower, upper] where x <= 0, 1 elsewhere)."""
    manual_seed(0)
    x = torch.cat([torch.randn(2000, dtype=torch.float64), torch.tensor([0.0, -0.0, float("nan")])]).to(dtype)
    noise = np.zeros(x.shape, to_numpy(x).dtype)
    out = np.empty_like(noise)
    get_kernel(RRELU).fn(to_numpy(x), noise, 0.1, 0.3, True, None, out)
    eager_noise = torch.zeros_like(x)
    eager = torch.ops.aten.rrelu_with_noise(x, eager_noise, 0.1, 0.3, True)
    xs, slopes = to_numpy(x).astype(np.float64), noise.astype(np.float64)
    np.testing.assert_array_equal(slopes == 1, to_numpy(eager_noise).astype(np.float64) == 1)
    drawn = xs <= 0
    assert np.all((slopes[drawn] >= 0.1 - 1e-3) & (slopes[drawn] <= 0.3 + 1e-3))
    assert abs(slopes[drawn].mean() - 0.2) < 0.01  # uniform on [0.1, 0.3]
    np.testing.assert_array_equal(out.astype(np.float64), (to_numpy(x) * noise).astype(out.dtype).astype(np.float64))
    np.testing.assert_array_equal(np.isnan(out), np.isnan(to_numpy(eager).astype(np.float64)))


def test_rrelu_with_noise_refuses_what_eager_refuses():
    x = np.ones(5, np.float32)
    with pytest.raises(KernelError, match="lower bound"):
        get_kernel(RRELU).fn(x, np.zeros(5, np.float32), 0.5, 0.1, True, None, np.empty(5, np.float32))
    with pytest.raises(KernelError, match="noise shape"):
        get_kernel(RRELU).fn(x, np.zeros(4, np.float32), 0.1, 0.3, True, None, np.empty(5, np.float32))
    with pytest.raises(RuntimeError):
        torch.ops.aten.rrelu_with_noise(torch.ones(5).half(), torch.zeros(5).half(), 0.1, 0.3, True)
    with pytest.raises(KernelError, match="float16 in training"):
        get_kernel(RRELU).fn(x.astype(np.float16), x.astype(np.float16), 0.1, 0.3, True, None, x.astype(np.float16))
    with pytest.raises(KernelError, match="not implemented"):
        get_kernel(RRELU).fn(x.astype(np.int32), x.astype(np.int32), 0.1, 0.3, False, None, x.astype(np.int32))


class TrainingBatchNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = torch.nn.BatchNorm2d(3)

    def forward(self, x):
        return self.bn(x)


class EvalRRelu(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.rrelu(x, training=False)


# The compiler change these need: map each functional op onto the out variant of its
# mutating twin (copy the running stats / noise into fresh buffers, call the .out kernel on them).
@pytest.mark.parametrize("module", [TrainingBatchNorm(), EvalRRelu()], ids=["batch_norm_train", "rrelu"])
def test_training_ops_end_to_end(module):
    module.train() if isinstance(module, TrainingBatchNorm) else module.eval()
    inputs = (torch.randn(4, 3, 5, 5),)
    program = to_edge(torch.export.export(module, inputs)).to_executorch()
    got = Runtime.get().load_program(program.buffer).load_method("forward").execute([to_numpy(t) for t in inputs])
    _close(got[0], to_numpy(module(*inputs)))


class RunningStats(torch.nn.Module):
    """Training batch norm whose updated running statistics the program also returns."""

    def __init__(self):
        super().__init__()
        self.bn = torch.nn.BatchNorm2d(3, momentum=0.3)

    def forward(self, x):
        return self.bn(x), self.bn.running_mean * 1.0, self.bn.running_var * 1.0


def test_running_statistics_persist_across_runs():
    torch.manual_seed(0)
    module, eager = RunningStats().train(), RunningStats().train()
    calls = [(torch.randn(4, 3, 5, 5) * 2 + 1,) for _ in range(3)]
    program = to_edge(torch.export.export(module, calls[0])).to_executorch()
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    for inputs in calls:  # the buffers move a step per run, as eager's do
        got = method.execute([to_numpy(t) for t in inputs])
        for g, w in zip(got, eager(*inputs)):
            _close(g, to_numpy(w.detach()))
