"""Constants kept outside the program in `.ptd` files (ExecuTorch's external data), both ways:
torchedge runs ExecuTorch's `.pte` + `.ptd`, ExecuTorch runs torchedge's; the `.ptd` codec reads
ExecuTorch's files and refuses malformed ones with typed errors."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import torch

from torchedge.errors import InvalidProgramError
from torchedge.exir import ExecutorchBackendConfig, to_edge
from torchedge.runtime import Runtime
from torchedge.serialize import deserialize_pte
from torchedge.serialize.ptd import read_ptd, write_ptd


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.second = torch.nn.Linear(4, 8), torch.nn.Linear(8, 2)
        self.register_buffer("shift", torch.arange(2, dtype=torch.float32))

    def forward(self, x):
        return self.second(torch.relu(self.first(x))) + self.shift


def _inputs():
    return (torch.randn(3, 4, generator=torch.Generator().manual_seed(0)),)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return Net().eval()


def test_torchedge_keeps_constants_in_a_ptd_that_both_runtimes_load(model, tmp_path, has_executorch):
    program = to_edge(torch.export.export(model, _inputs())).to_executorch(
        ExecutorchBackendConfig(external_constants=True)
    )
    inline = to_edge(torch.export.export(model, _inputs())).to_executorch()
    assert len(program.buffer) < len(inline.buffer) - 100  # the weights left the program
    program.save(tmp_path / "net.pte")
    (ptd,) = program.write_tensor_data_to_file(tmp_path)
    stored = set(read_ptd(open(ptd, "rb").read()).data)
    named = {  # every external tensor of the program, by name (folded weights take the folded name)
        v.val.extra_tensor_info.fully_qualified_name
        for v in deserialize_pte(program.buffer).program.execution_plan[0].values
        if getattr(v.val, "extra_tensor_info", None) is not None
    }
    assert stored == named and {"first.bias", "second.bias", "shift"} <= stored
    expected = model(*_inputs()).detach().numpy()
    method = Runtime.get().load_program(tmp_path / "net.pte", data_path=ptd).load_method()
    np.testing.assert_allclose(method.execute([_inputs()[0].numpy()])[0], expected, rtol=1e-6, atol=1e-6)
    if has_executorch:
        from executorch.runtime import Runtime as ETRuntime

        et_method = ETRuntime.get().load_program(tmp_path / "net.pte", data_path=str(ptd)).load_method("forward")
        np.testing.assert_allclose(et_method.execute(list(_inputs()))[0].numpy(), expected, rtol=1e-6, atol=1e-6)


def test_executorch_external_constants_run_on_torchedge(model, tmp_path, has_executorch):
    if not has_executorch:
        pytest.skip("ExecuTorch is not installed")
    from executorch.exir import ExecutorchBackendConfig as ETConfig
    from executorch.exir import to_edge as et_to_edge

    program = et_to_edge(torch.export.export(model, _inputs())).to_executorch(ETConfig(external_constants=True))
    (tmp_path / "net.pte").write_bytes(program.buffer)
    program.write_tensor_data_to_file(str(tmp_path))
    (ptd,) = tmp_path.glob("*.ptd")
    expected = model(*_inputs()).detach().numpy()
    method = Runtime.get().load_program(tmp_path / "net.pte", data_path=[ptd]).load_method()
    np.testing.assert_allclose(method.execute([_inputs()[0].numpy()])[0], expected, rtol=1e-6, atol=1e-6)
    with pytest.raises(InvalidProgramError, match="no named data 'first.weight'.*data_path"):
        Runtime.get().load_program(tmp_path / "net.pte").load_method()


def test_ptd_round_trip_shares_identical_blobs():
    blobs = {"a": b"\x01" * 10, "b": b"\x02" * 3, "c": b"\x01" * 10}
    contents = read_ptd(write_ptd(blobs))
    assert {k: bytes(v) for k, v in contents.data.items()} == blobs
    assert contents.data["a"].obj is contents.data["c"].obj


@pytest.mark.parametrize(
    ("corrupt", "match"),
    [
        (lambda b: b[:20], "not a .ptd file"),
        (lambda b: b[:4] + b"XX01" + b[8:], "not a .ptd file"),
        (lambda b: b[:8] + b"FH02" + b[12:], "header"),
        (lambda b: b[:24] + struct.pack("<Q", 1 << 40) + b[32:], "do not fit"),
        (lambda b: b[: len(b) - 4], "do not fit"),
    ],
)
def test_malformed_ptd_is_a_typed_error(corrupt, match):
    data = write_ptd({"w": b"\x00" * 64})
    with pytest.raises(InvalidProgramError, match=match):
        read_ptd(corrupt(data))


def test_delegate_weights_in_a_ptd(tmp_path, has_executorch):
    """An XNNPACK program whose named data (the delegate's weights) moved to a `.ptd`: the delegate
    finds its weights there, on torchedge and on ExecuTorch, and nowhere without the file."""
    if not has_executorch:
        pytest.skip("ExecuTorch is not installed")
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower as et_lower
    from executorch.runtime import Runtime as ETRuntime

    from torchedge.serialize import serialize_pte

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
    (x,) = _inputs()
    buffer = et_lower(torch.export.export(model, (x,)), partitioner=[XnnpackPartitioner()]).to_executorch().buffer
    contents = deserialize_pte(buffer).unpack()
    assert len(contents.named_data) == 4  # the two weights and biases, by hash
    (tmp_path / "mlp.pte").write_bytes(serialize_pte(contents.program, mutable_data=contents.mutable_data))
    (tmp_path / "mlp.ptd").write_bytes(write_ptd(contents.named_data))
    expected = model(x).detach().numpy()
    method = Runtime.get().load_program(tmp_path / "mlp.pte", data_path=tmp_path / "mlp.ptd").load_method()
    np.testing.assert_allclose(method.execute([x.numpy()])[0], expected, rtol=1e-5, atol=1e-6)
    et_program = ETRuntime.get().load_program(tmp_path / "mlp.pte", data_path=str(tmp_path / "mlp.ptd"))
    np.testing.assert_allclose(
        et_program.load_method("forward").execute([x])[0].numpy(), expected, rtol=1e-5, atol=1e-6
    )
    with pytest.raises(InvalidProgramError, match="no named data"):
        Runtime.get().load_program(tmp_path / "mlp.pte").load_method()
