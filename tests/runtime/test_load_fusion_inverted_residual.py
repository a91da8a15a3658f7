"""Load-time fusion of MobileNetV2's inverted residual block (rule `inverted_residual`, `torchedge.fusion`):
a 1x1 expansion, a depthwise convolution and a 1x1 projection (with their clamps and the zero
padding before the depthwise) run as one channels-last kernel on small planes, and stay as
written wherever the block differs from what the kernel computes or another instruction reads
its intermediates. Each case runs the same `.pte` fused (``fuse="all"``: the rule's level),
unfused (``fuse=False``) and in PyTorch eager."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.conftest import assert_matches, executorch_run, torch_outputs, torchedge_compile
from torchedge.exir import ExecutorchBackendConfig
from torchedge.runtime import Runtime
from torchedge.runtime.steps import NOP

BLOCK = "convolution.out + hardtanh.out + convolution.out + hardtanh.out + convolution.out (fused at load)"


class InvertedResidual(nn.Module):
    """torchvision's MobileNetV2 block, its batch norms folded (biases), optionally strided
    with TensorFlow's one-sided "same" padding as Hugging Face writes it."""

    def __init__(self, channels=16, expansion=6, out_channels=None, stride=1, kernel=3, dilation=1, bias=True):
        super().__init__()
        hidden, out_channels = channels * expansion, out_channels or channels
        self.tf_padding = stride == 2
        padding = 0 if self.tf_padding else dilation * (kernel - 1) // 2
        self.expand = nn.Conv2d(channels, hidden, 1, bias=bias)
        self.depthwise = nn.Conv2d(hidden, hidden, kernel, stride, padding, dilation, groups=hidden, bias=bias)
        self.project = nn.Conv2d(hidden, out_channels, 1, bias=bias)
        self.residual = stride == 1 and out_channels == channels

    def forward(self, x):
        y = nn.functional.relu6(self.expand(x))
        if self.tf_padding:
            y = nn.functional.pad(y, (0, 1, 0, 1))
        y = self.project(nn.functional.relu6(self.depthwise(y)))
        return x + y if self.residual else y


def _fused_labels(method) -> list[str]:
    return [step.label for step in method._steps if step.kind != NOP and "(fused at load)" in step.label]


def _check(model, x, fused_labels, dtype=torch.float32, tol=1e-5, config=None):
    """Compile ``model`` (in ``dtype``, with ``config``), check the fused steps' labels, and that
    the fused method matches the unfused one and eager; returns the fused method and the program."""
    model, x = model.eval().to(dtype), x.to(dtype)
    buffer = torchedge_compile(model, (x,), config).buffer
    program = Runtime.get().load_program(buffer)
    fused, plain = program.load_method("forward", fuse="all"), program.load_method("forward", fuse=False)
    assert _fused_labels(fused) == fused_labels
    expected = torch_outputs(model, (x,))
    unfused = plain.execute([x.numpy()])
    assert_matches(unfused, expected, tol)
    for _ in range(2):  # a second run: nothing stale
        result = fused.execute([x.numpy()])
        assert_matches(result, expected, tol)
        assert_matches(result, unfused, tol / 10)
    return fused, buffer


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_mobilenet_v2_block_runs_as_one_kernel(batch, dtype):
    torch.manual_seed(0)
    _check(
        InvertedResidual(), torch.randn(batch, 16, 14, 14), [BLOCK], dtype, 1e-5 if dtype == torch.float32 else 1e-12
    )


def test_a_strided_block_takes_its_one_sided_padding_along():
    torch.manual_seed(1)
    label = BLOCK.replace("hardtanh.out + convolution", "hardtanh.out + constant_pad_nd.out + convolution", 1)
    _check(InvertedResidual(stride=2, out_channels=24), torch.randn(2, 16, 28, 27), [label])


@pytest.mark.parametrize("stride", [1, 2])
def test_a_program_with_fused_kernels_fuses_its_blocks_too(stride):
    """``fuse_kernels=True`` writes each convolution and its clamp as one ``conv_bn_act``."""
    torch.manual_seed(9)
    label = "conv_bn_act.out + conv_bn_act.out + convolution.out (fused at load)"
    config = ExecutorchBackendConfig(fuse_kernels=True)
    _check(InvertedResidual(stride=stride, out_channels=24), torch.randn(2, 16, 15, 14), [label], config=config)


@pytest.mark.parametrize(
    "options", [dict(kernel=5), dict(dilation=2), dict(kernel=5, dilation=2), dict(bias=False), dict(expansion=1)]
)
def test_other_filters_and_no_biases(options):
    torch.manual_seed(2)
    _check(InvertedResidual(**options), torch.randn(1, 16, 9, 11), [BLOCK])


def test_clamps_are_optional():
    torch.manual_seed(3)

    class Linear(InvertedResidual):
        """relu after the expansion, nothing after the depthwise convolution."""

        def forward(self, x):
            return self.project(self.depthwise(torch.relu(self.expand(x))))

    class Clamped(InvertedResidual):
        """A clamp after the projection too: it stays a step of its own."""

        def forward(self, x):
            return nn.functional.relu6(super().forward(x))

    label = "convolution.out + relu.out + convolution.out + convolution.out (fused at load)"
    _check(Linear(), torch.randn(1, 16, 10, 10), [label])
    _check(Clamped(out_channels=24), torch.randn(1, 16, 10, 10), [BLOCK])


def test_large_planes_keep_the_planar_convolutions():
    torch.manual_seed(4)
    convolutions = ["convolution.out + hardtanh.out (fused at load)", "convolution.out + hardtanh.out (fused at load)"]
    _check(InvertedResidual(channels=4), torch.randn(1, 4, 40, 40), convolutions)


def test_blocks_whose_intermediates_are_read_elsewhere_stay():
    torch.manual_seed(5)

    class ExpansionRead(InvertedResidual):
        def forward(self, x):
            y = nn.functional.relu6(self.expand(x))
            return self.project(nn.functional.relu6(self.depthwise(y))), y.mean()

    class DepthwiseRead(InvertedResidual):
        def forward(self, x):
            y = nn.functional.relu6(self.depthwise(nn.functional.relu6(self.expand(x))))
            return self.project(y), y

    x = torch.randn(1, 16, 8, 8)
    separate = ["convolution.out + hardtanh.out (fused at load)"] * 2
    _check(ExpansionRead(), x, separate)
    _check(DepthwiseRead(), x, separate)


def test_blocks_the_kernel_does_not_compute_stay():
    torch.manual_seed(6)

    class Hardswish(InvertedResidual):  # MobileNetV3's activation: no clamp by numbers
        def forward(self, x):
            y = nn.functional.hardswish(self.expand(x))
            return self.project(nn.functional.relu6(self.depthwise(y)))

    class Multiplier(nn.Module):  # two filters per channel: not one per channel
        def __init__(self):
            super().__init__()
            self.expand, self.project = nn.Conv2d(8, 16, 1), nn.Conv2d(32, 8, 1)
            self.depthwise = nn.Conv2d(16, 32, 3, padding=1, groups=16)

        def forward(self, x):
            return self.project(self.depthwise(self.expand(x)))

    class Spatial(InvertedResidual):  # a 3x3 projection
        def __init__(self):
            super().__init__()
            self.project = nn.Conv2d(96, 16, 3, padding=1)

    clamp = "convolution.out + hardtanh.out (fused at load)"
    _check(Hardswish(), torch.randn(1, 16, 8, 8), [clamp])
    _check(Multiplier(), torch.randn(1, 8, 8, 8), [])
    _check(Spatial(), torch.randn(1, 16, 8, 8), [clamp, clamp])
    _check(InvertedResidual(), torch.randn(16, 8, 8), [])  # an unbatched input


def test_the_same_file_runs_in_executorch():
    torch.manual_seed(8)
    x = torch.randn(1, 16, 12, 12)
    fused, buffer = _check(
        InvertedResidual(stride=2, out_channels=24),
        x,
        [BLOCK.replace("hardtanh.out + conv", "hardtanh.out + constant_pad_nd.out + conv", 1)],
    )
    assert_matches(fused.execute([x.numpy()]), executorch_run(buffer, [x.numpy()]), 1e-5)
