"""`.pte` files written by the real ExecuTorch, and programs built by hand.

The exported files are the independent reference for the reader and writer;
each is produced once per session.
"""

from __future__ import annotations

import struct

import pytest
import torch

from torchedge.schema import (
    AllocationDetails,
    BackendDelegate,
    BackendDelegateDataReference,
    BackendDelegateInlineData,
    Buffer,
    Chain,
    CompileSpec,
    ContainerMetadata,
    DataLocation,
    Double,
    EValue,
    ExecutionPlan,
    Instruction,
    Int,
    KernelCall,
    Null,
    Operator,
    Program,
    ScalarType,
    Tensor,
)
from torchedge.serialize import deserialize_pte, serialize_pte


class LinearRelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.linear(x))


class DictInOut(torch.nn.Module):
    """Dict input and output; `a * 2` lifts an int64 scalar constant."""

    def forward(self, d):
        return {"s": d["a"] + d["b"], "t": (d["a"] * 2,)}


class NoConstants(torch.nn.Module):
    def forward(self, x, y):
        return x * y + x


def _export(model, inputs, **config):
    from executorch.exir import ExecutorchBackendConfig, to_edge

    program = to_edge(torch.export.export(model, inputs))
    return program.to_executorch(ExecutorchBackendConfig(**config)).buffer


def _export_xnnpack(model, inputs, **config):
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower

    program = to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[XnnpackPartitioner()])
    return program.to_executorch(ExecutorchBackendConfig(**config)).buffer


@pytest.fixture(scope="session")
def linear_model():
    return LinearRelu().eval()


@pytest.fixture(scope="session")
def linear_pte(linear_model):
    return _export(linear_model, (torch.randn(2, 4),))


@pytest.fixture(scope="session")
def dict_pte():
    inputs = ({"a": torch.ones(2), "b": torch.ones(2)},)
    return _export(DictInOut(), inputs)


@pytest.fixture(scope="session")
def no_constants_pte():
    return _export(NoConstants(), (torch.ones(3), torch.ones(3)))


@pytest.fixture(scope="session")
def xnnpack_pte(linear_model):
    return _export_xnnpack(linear_model, (torch.randn(2, 4),))


# Files exported with non-default serializer options, and the matching
# `serialize_pte` options that must reproduce them.
WIDE_ALIGNMENT = {"constant_tensor_alignment": 64, "segment_alignment": 256}
INLINE_DELEGATES = {"extract_delegate_segments": False}


@pytest.fixture(scope="session")
def wide_alignment_pte(linear_model):
    return _export(linear_model, (torch.randn(2, 4),), **WIDE_ALIGNMENT)


@pytest.fixture(scope="session")
def inline_delegate_pte(linear_model):
    return _export_xnnpack(linear_model, (torch.randn(2, 4),), **INLINE_DELEGATES)


def reserialize(data: bytes, **options) -> bytes:
    """Decodes `data` and encodes it again with `serialize_pte`."""
    contents = deserialize_pte(data).unpack()
    return serialize_pte(
        contents.program, named_data=contents.named_data, mutable_data=contents.mutable_data, **options
    )


def float_bytes(*values: float) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def add_program(constant: bytes, *, extra_constants: tuple[bytes, ...] = ()) -> Program:
    """forward(x: float[2]) = aten::add.out(x, const, alpha=1), built by hand.

    v0 input (planned @0), v1 constant (buffer 1), v2 Int alpha, v3 output
    (planned @16); `extra_constants` are stored as buffers 2.. but unused.
    """

    def planned(offset: int) -> Tensor:
        return Tensor(
            scalar_type=ScalarType.FLOAT,
            sizes=[2],
            dim_order=[0],
            allocation_info=AllocationDetails(memory_id=1, memory_offset_low=offset),
        )

    values = [
        EValue(planned(0)),
        EValue(Tensor(scalar_type=ScalarType.FLOAT, sizes=[2], dim_order=[0], data_buffer_idx=1)),
        EValue(Int(1)),
        EValue(planned(16)),
    ]
    plan = ExecutionPlan(
        name="forward",
        container_meta_type=ContainerMetadata("", ""),
        values=values,
        inputs=[0],
        outputs=[3],
        chains=[Chain(instructions=[Instruction(KernelCall(0, [0, 1, 2, 3, 3]))])],
        operators=[Operator("aten::add", "out")],
        non_const_buffer_sizes=[0, 32],
    )
    buffers = [Buffer(b""), Buffer(constant), *(Buffer(c) for c in extra_constants)]
    return Program(execution_plan=[plan], constant_buffer=buffers)


def _delegate(index: int, name: str) -> BackendDelegate:
    return BackendDelegate(
        id=name,
        processed=BackendDelegateDataReference(DataLocation.INLINE, index),
        compile_specs=[CompileSpec("level", b"\3")],
    )


def delegate_program():
    """Three delegates: two blobs with the same bytes, one empty blob."""
    program = add_program(float_bytes(10, 20))
    program.backend_delegate_data = [
        BackendDelegateInlineData(b"blob" * 9),
        BackendDelegateInlineData(bytearray(b"blob" * 9)),
        BackendDelegateInlineData(b""),
    ]
    program.execution_plan[0].delegates = [_delegate(i, f"Backend{i}") for i in range(3)]
    program.execution_plan[0].values += [EValue(Double(float("inf"))), EValue(Null())]
    return program


def run_forward(pte: bytes, *inputs: torch.Tensor) -> list:
    """Executes `forward` on the real ExecuTorch runtime."""
    from executorch.runtime import Runtime

    method = Runtime.get().load_program(pte).load_method("forward")
    return list(method.execute(list(inputs)))
