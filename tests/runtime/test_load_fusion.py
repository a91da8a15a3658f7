"""Load-time fusion (`torchedge.runtime.fusion`): a default, ExecuTorch-compatible program
runs its attention decompositions and index-free max pools as fused kernels, and only where the
method's dataflow proves nothing else reads what the fused steps no longer write.

Every case runs the same `.pte` three ways: fused at load, instruction by instruction
(``fuse=False``, the program's own semantics) and, for the reference, PyTorch eager; the
counts of fused steps show which groups were (or were not) replaced."""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

from tests.conftest import assert_matches, executorch_run, torch_outputs, torchedge_compile
from torchedge.kernels import registry
from torchedge.runtime import Runtime
from torchedge.runtime.steps import NOP

ATTENTION = "torchedge_fused::attention_exact.out (attention, fused at load)"  # level "exact", the default
FAST_ATTENTION = "torchedge_fused::attention.out (fast_attention, fused at load)"  # level "all"
POOL = "aten::max_pool2d_with_indices.out (values only)"


def _methods(buffer: bytes):
    program = Runtime.get().load_program(buffer)
    return program.load_method("forward"), program.load_method("forward", fuse=False)


def _labels(method) -> list[str]:
    return [step.label for step in method._steps if step.kind != NOP]


def _check(model, inputs, fused_attention=0, fused_pools=0, convolutions=(), copy_chains=None, linear=(), tol=1e-5):
    """Compile ``model``, check how many groups load fusion replaced (``copy_chains``: the labels
    of the fused chains of copies, when given; ``convolutions``: the labels of the fused
    convolutions; ``linear``: the activations fused into linear layers) and that fused, unfused
    and eager agree; returns the fused method and the program."""
    model = model.eval()
    buffer = torchedge_compile(model, inputs).buffer
    fused, plain = _methods(buffer)
    labels = _labels(fused)
    assert labels.count(ATTENTION) == fused_attention
    assert labels.count(POOL) == fused_pools
    assert [label for label in labels if "convolution.out +" in label or "+ convolution" in label] == list(convolutions)
    assert [label.split("(")[1].split(",")[0] for label in labels if "linear_act" in label] == list(linear)
    if copy_chains is not None:
        assert [label for label in labels if label.endswith("(fused at load)") and "copy" in label] == copy_chains
    arrays = [t.numpy() for t in inputs]
    expected = torch_outputs(model, inputs)
    assert_matches(plain.execute(arrays), expected, tol)
    assert_matches(fused.execute(arrays), expected, tol)
    assert_matches(fused.execute(arrays), expected, tol)  # a second run: nothing stale
    for got, want in zip(fused.execute(arrays), plain.execute(arrays)):  # level "exact": the same bits
        np.testing.assert_array_equal(got, want)
    fast = Runtime.get().load_program(buffer).load_method("forward", fuse="all")
    assert _labels(fast).count(FAST_ATTENTION) == fused_attention
    assert_matches(fast.execute(arrays), expected, tol)
    return fused, buffer


class Attention(nn.Module):
    """q, k, v projections, heads, ``scaled_dot_product_attention`` (its math decomposition in the program)."""

    def __init__(self, width=16, heads=2, mask=None, causal=False, scale=None):
        super().__init__()
        self.heads, self.mask, self.causal, self.scale = heads, mask, causal, scale
        self.q, self.k, self.v, self.out = (nn.Linear(width, width) for _ in range(4))

    def forward(self, x):
        b, s, w = x.shape
        q, k, v = (p(x).view(b, s, self.heads, -1).transpose(1, 2) for p in (self.q, self.k, self.v))
        y = nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=self.mask, is_causal=self.causal, scale=self.scale
        )
        return self.out(y.transpose(1, 2).reshape(b, s, w))


def test_attention_without_mask():
    torch.manual_seed(0)
    _check(Attention(), (torch.randn(2, 5, 16),), fused_attention=1)


def test_attention_with_additive_mask_and_scale():
    torch.manual_seed(1)
    mask = torch.randn(1, 1, 5, 5)
    _check(Attention(mask=mask, scale=0.3), (torch.randn(1, 5, 16),), fused_attention=1)


def test_attention_causal_and_boolean_masks():
    torch.manual_seed(2)
    _check(Attention(causal=True), (torch.randn(1, 6, 16),), fused_attention=1)
    keep = torch.rand(1, 2, 6, 6) > 0.3
    _check(Attention(mask=keep), (torch.randn(1, 6, 16),), fused_attention=1)


def test_fully_masked_rows_give_zeros_as_the_program_does():
    """The safe softmax of the decomposition: a query whose keys are all masked out attends to nothing."""
    torch.manual_seed(3)
    mask = torch.zeros(1, 1, 4, 4)
    mask[..., 1, :] = -torch.inf
    model = Attention(mask=mask).eval()
    x = torch.randn(1, 4, 16)
    fused, plain = _methods(torchedge_compile(model, (x,)).buffer)
    assert _labels(fused).count(ATTENTION) == 1
    got, want = fused.execute([x.numpy()])[0], plain.execute([x.numpy()])[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    bias_only = model.out.bias.detach().numpy()  # the masked query's output: its projection's bias alone
    np.testing.assert_allclose(got[0, 1], bias_only, rtol=1e-6, atol=1e-6)


def test_float64_attention():
    torch.manual_seed(4)
    _check(Attention().double(), (torch.randn(1, 5, 16, dtype=torch.float64),), fused_attention=1, tol=1e-12)


class ManualAttention(nn.Module):
    """The decomposition of ``scaled_dot_product_attention`` written out, optionally also
    returning the attention weights: then the group's softmax is read outside it."""

    def __init__(self, return_weights: bool):
        super().__init__()
        self.return_weights = return_weights

    def forward(self, q, k, v, mask):
        scale = 0.25**0.5
        scores = (q * scale) @ (k.transpose(-2, -1) * scale) + mask
        weights = torch.softmax(scores, dim=-1)
        fully_masked = torch.logical_not(torch.logical_not(scores == -torch.inf).any(dim=-1, keepdim=True))
        weights = torch.where(fully_masked, torch.zeros_like(weights), weights)
        out = weights @ v
        return (out, weights) if self.return_weights else out


def test_a_group_whose_intermediate_is_read_elsewhere_stays_unfused():
    torch.manual_seed(5)
    inputs = tuple(torch.randn(1, 2, 5, 4) for _ in range(3)) + (torch.randn(1, 1, 5, 5),)
    _check(ManualAttention(return_weights=False), inputs, fused_attention=1)  # the pattern as written
    _check(ManualAttention(return_weights=True), inputs, fused_attention=0)  # its weights are an output


class Pools(nn.Module):
    def __init__(self, return_indices: bool = False, use_indices: bool = False):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.return_indices, self.use_indices = return_indices, use_indices

    def forward(self, x):
        y, indices = nn.functional.max_pool2d(torch.relu(self.conv(x)), 2, return_indices=True)
        if self.return_indices:
            return y, indices
        if self.use_indices:
            return y + indices.to(y.dtype) * 1e-3
        return y.mean(dim=(2, 3))


def test_max_pool_indices_nobody_reads_are_not_computed():
    torch.manual_seed(6)
    x = torch.randn(2, 3, 8, 8)
    conv = ["convolution.out + relu.out (fused at load)"]
    _check(Pools(), (x,), fused_pools=1, convolutions=conv)
    _check(Pools(return_indices=True), (x,), fused_pools=0, convolutions=conv)  # an output
    _check(Pools(use_indices=True), (x,), fused_pools=0, convolutions=conv)  # read by a later instruction


class Cache(nn.Module):
    """Attention over a mutable key cache: state written in one run is read by the next."""

    def __init__(self):
        super().__init__()
        self.register_buffer("keys", torch.zeros(1, 1, 4, 8))
        self.proj = nn.Linear(8, 8)

    def forward(self, x, position):
        self.keys.index_copy_(2, position, self.proj(x).unsqueeze(1))
        q = x.unsqueeze(1)
        return nn.functional.scaled_dot_product_attention(q, self.keys, self.keys)


def test_mutable_state_survives_fusion():
    torch.manual_seed(7)
    eager = Cache().eval()
    xs = [torch.randn(1, 1, 8) for _ in range(3)]
    buffer = torchedge_compile(copy.deepcopy(eager), (xs[0], torch.tensor([0]))).buffer
    fused, plain = _methods(buffer)
    assert _labels(fused).count(ATTENTION) == 1  # over the cache the index_put wrote
    for position, x in enumerate(xs):
        inputs = [x.numpy(), np.array([position])]
        want = torch_outputs(eager, (x, torch.tensor([position])))
        assert_matches(fused.execute(inputs), want, 1e-5)
        assert_matches(plain.execute(inputs), want, 1e-5)


def test_tracing_runs_fused_and_fuse_false_runs_every_instruction():
    """The run that is profiled is the run that ships; a tracer logging every intermediate value
    and ``fuse=False`` run every instruction as written."""
    buffer = torchedge_compile(Attention().eval(), (torch.randn(1, 5, 16),)).buffer
    traced = Runtime.get().load_program(buffer, enable_etdump=True).load_method("forward")
    assert ATTENTION in _labels(traced)
    logging = Runtime.get().load_program(buffer, enable_etdump=True, debug_buffer_size=1 << 20)
    assert ATTENTION not in _labels(logging.load_method("forward"))
    assert ATTENTION not in _labels(Runtime.get().load_program(buffer).load_method("forward", fuse=False))


def test_a_users_kernel_is_never_fused_away(monkeypatch):
    """A user's replacement of an operator in the group keeps the group as written (it runs)."""
    calls = []
    original = registry.get_kernel("aten::_softmax.out").fn

    def counting_softmax(x, dim, half_to_float, out):
        calls.append(x.shape)
        return original(x, dim, half_to_float, out)

    kernel = registry.Kernel("aten::_softmax.out", counting_softmax, 4)
    monkeypatch.setitem(registry._KERNELS, "aten::_softmax.out", kernel)
    monkeypatch.setitem(registry._MODULES, "aten::_softmax.out", __name__)
    model = Attention().eval()
    x = torch.randn(1, 5, 16)
    fused, _ = _methods(torchedge_compile(model, (x,)).buffer)
    assert ATTENTION not in _labels(fused)
    assert_matches(fused.execute([x.numpy()]), torch_outputs(model, (x,)), 1e-5)
    assert calls


def test_the_same_file_runs_in_executorch():
    torch.manual_seed(8)
    model, x = Attention(mask=torch.randn(1, 1, 5, 5)).eval(), torch.randn(1, 5, 16)
    fused, buffer = _check(model, (x,), fused_attention=1)
    assert_matches(fused.execute([x.numpy()]), executorch_run(buffer, [x.numpy()]), 1e-5)


class Padded(nn.Module):
    """TensorFlow-style "same" padding of a strided convolution: zeros on one side only."""

    def __init__(self, pad, groups=1):
        super().__init__()
        self.pad = pad
        self.conv = nn.Conv2d(4, 8, 3, stride=2, padding=(1, 0), groups=groups)

    def forward(self, x):
        return torch.relu(self.conv(nn.functional.pad(x, self.pad)))


def test_zero_padding_and_clamps_join_the_convolution():
    torch.manual_seed(9)
    x = torch.randn(1, 4, 9, 10)
    block = "constant_pad_nd.out + convolution.out + relu.out (fused at load)"
    _check(Padded((0, 1, 0, 1)), (x,), convolutions=[block])
    _check(Padded((2, 0, 1, 3), groups=4), (x,), convolutions=[block])
    relu6 = nn.Sequential(nn.Conv2d(4, 6, 3, padding=1), nn.ReLU6())
    _check(relu6, (x,), convolutions=["convolution.out + hardtanh.out (fused at load)"])


def test_padding_with_a_value_or_a_result_read_elsewhere_stays():
    torch.manual_seed(10)
    x = torch.randn(1, 4, 9, 10)

    class Filled(Padded):
        def forward(self, x):
            return torch.relu(self.conv(nn.functional.pad(x, self.pad, value=1.0)))

    class Kept(Padded):
        def forward(self, x):
            padded = nn.functional.pad(x, self.pad)
            return self.conv(padded), padded.sum()

    class Both(Padded):
        def forward(self, x):
            y = self.conv(x)
            return torch.relu(y), y

    _check(Filled((0, 1, 0, 1)), (x,), convolutions=["convolution.out + relu.out (fused at load)"])
    _check(Kept((0, 1, 0, 1)), (x,), convolutions=[])
    _check(Both((0, 1, 0, 1)), (x,), convolutions=[])


class Heads(nn.Module):
    """Attention's heads moved back: a permute, a contiguous copy, two more permutes (a reshape
    between them), then a projection."""

    def __init__(self, split_read: bool = False):
        super().__init__()
        self.proj, self.split_read = nn.Linear(12, 12), split_read

    def forward(self, x):  # (B, H, S, D)
        y = x.permute(2, 0, 1, 3).contiguous()  # (S, B, H, D)
        z = y.permute(1, 2, 0, 3).reshape(x.shape).transpose(1, 2)  # (B, S, H, D)
        out = self.proj(z.reshape(x.shape[0], x.shape[2], -1))
        return (out, y.sum()) if self.split_read else out


def test_chains_of_copies_become_one_copy():
    torch.manual_seed(11)
    x = torch.randn(2, 3, 5, 4)
    moves = "permute_copy.out + _clone_dim_order.out + permute_copy.out + permute_copy.out (fused at load)"
    _check(Heads(), (x,), copy_chains=[moves])  # the batched matmul's copy needs a reshape strides cannot give
    halves = [  # y is read twice: two chains; from y's contiguous layout the last reshape is a view
        "permute_copy.out + _clone_dim_order.out (fused at load)",
        "permute_copy.out + permute_copy.out + expand_copy.out (fused at load)",
    ]
    _check(Heads(split_read=True), (x,), copy_chains=halves)


def test_a_reshape_strides_cannot_express_splits_the_chain():
    """(2, 3, 4) -> transpose -> (4, 3, 2) reshaped to (12, 2): the transposed view's first two
    dims do not merge at one stride, so the reshape needs the copy before it; the four copies
    become two, one on each side of it."""

    class Merge(nn.Module):
        def forward(self, x):
            return x.transpose(0, 2).contiguous().reshape(12, 2).t().contiguous() * 2

    pair = "permute_copy.out + _clone_dim_order.out (fused at load)"
    _check(Merge(), (torch.randn(2, 3, 4),), copy_chains=[pair, pair])


def test_a_broadcasting_expand_ends_the_chain_before_it():
    """``expand_copy`` to a larger shape is no plain copy: the chain stops at the copy before it."""

    class Broadcast(nn.Module):
        def forward(self, x):
            return x.t().contiguous().expand(3, 4, 2) + 1

    _check(Broadcast(), (torch.randn(2, 4),), copy_chains=["permute_copy.out + _clone_dim_order.out (fused at load)"])


class Mlp(nn.Module):
    """Linear layers with each activation (silu as core ATen writes it: ``x * sigmoid(x)``)."""

    def __init__(self, activation, bias=True, read_twice=False):
        super().__init__()
        self.up, self.down = nn.Linear(8, 32, bias=bias), nn.Linear(32, 8)
        self.activation, self.read_twice = activation, read_twice

    def forward(self, x):
        h = self.up(x)
        y = self.down(self.activation(h))
        return (y, h.sum()) if self.read_twice else y


def test_activations_fuse_into_their_linear_layer():
    torch.manual_seed(12)
    x = torch.randn(2, 5, 8)
    _check(Mlp(nn.functional.gelu), (x,), linear=["gelu"])
    _check(Mlp(torch.relu, bias=False), (x,), linear=["relu"])
    for model, inputs, tol in (
        (Mlp(nn.functional.silu), x, 1e-5),
        (Mlp(nn.functional.silu).double(), x.double(), 1e-12),
    ):
        _, buffer = _check(model, (inputs,), linear=[], tol=tol)  # silu's kernel rounds otherwise: level "all"
        fast = Runtime.get().load_program(buffer).load_method("forward", fuse="all")
        assert [label for label in _labels(fast) if "linear_act" in label][0].split("(")[1].startswith("silu")
        assert_matches(fast.execute([inputs.numpy()]), torch_outputs(model.eval(), (inputs,)), tol)


def test_activations_the_kernel_does_not_compute_stay():
    torch.manual_seed(13)
    x = torch.randn(2, 5, 8)
    _check(Mlp(lambda h: nn.functional.gelu(h, approximate="tanh")), (x,), linear=[])
    _check(Mlp(torch.relu, read_twice=True), (x,), linear=[])  # the product is read elsewhere
