"""`load_method` checks each kernel argument's kind against its operator's schema.

The programs are ExecuTorch's golden `mlp.pte` (permute_copy, addmm, relu) with one argument
of one instruction pointed at a value of another kind; the table is compared with torch's
schemas by regenerating it.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from torchedge.errors import InvalidProgramError
from torchedge.kernels.argument_kinds import TABLE_PATH, argument_kinds, unchecked_operators, written_arguments
from torchedge.kernels.registry import registered_operators
from torchedge.runtime import Runtime
from torchedge.serialize import deserialize_pte, serialize_pte

ROOT = pathlib.Path(__file__).parent.parent.parent
MLP = ROOT / "tests" / "golden" / "mlp.pte"

# mlp.pte's first chain: 0 permute_copy.out [0, 8, 5, 5], 1 addmm.out [1, 4, 5, 10, 11, 9, 9], 2 relu.out [9, 12, 12]
# (values 6, 7, 10, 11: Int; 8: IntList; the rest Tensors).


def _mutated(instruction: int, position: int, value: int) -> bytes:
    contents = deserialize_pte(MLP.read_bytes()).unpack()
    plan = contents.program.execution_plan[0]
    plan.chains[0].instructions[instruction].instr_args.args[position] = value
    return serialize_pte(contents.program, mutable_data=contents.mutable_data, named_data=contents.named_data)


def _load_error(data: bytes) -> str:
    program = Runtime.get().load_program(data)
    with pytest.raises(InvalidProgramError) as info:
        program.load_method("forward")
    return str(info.value)


def test_golden_mlp_loads():
    program = Runtime.get().load_program(MLP.read_bytes())
    program.load_method("forward")


@pytest.mark.parametrize(
    "instruction, position, value, expected",
    [
        # an Int where the schema takes an int[]
        (
            0,
            1,
            6,
            "instruction 0 (aten::permute_copy.out): argument 1 ('dims') expects an IntList, found value 6, an Int",
        ),
        # a Tensor where it takes a Scalar
        (1, 3, 4, "(aten::addmm.out): argument 3 ('beta') expects an Int, Double or Bool, found value 4, a Tensor"),
        # an Int where it takes a Tensor
        (1, 1, 10, "(aten::addmm.out): argument 1 ('mat1') expects a Tensor, found value 10, an Int"),
        # an IntList where it takes a Tensor (a constant one found for a Scalar is named as such)
        (2, 0, 8, "(aten::relu.out): argument 0 ('self') expects a Tensor, found value 8, an IntList"),
        (1, 4, 1, "(aten::addmm.out): argument 4 ('alpha') expects an Int, Double or Bool, found value 1, a constant"),
    ],
)
def test_wrong_kind_is_refused_at_load(instruction, position, value, expected):
    assert expected in _load_error(_mutated(instruction, position, value))


def test_return_slot_must_be_the_out():
    """relu.out [9, 12, 12] with its out pointed at value 13 (a [16, 4] tensor) while the return slot stays 12:
    the shapes checked at load would be those of value 12, the kernel would write value 13."""
    message = _load_error(_mutated(2, 1, 13))
    assert "(aten::relu.out): expected its return value (value 12) to be its out tensors [13], found [12]" in message


def test_table_names_schema_arguments():
    """Hand-read from torch's schemas: ``addmm.out(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1,
    Scalar alpha=1, Tensor(a!) out)``, ``native_layer_norm.out(..., Tensor? weight, Tensor? bias, float eps, ...)``."""
    assert [(a.name, a.kinds) for a in argument_kinds("aten::addmm.out")] == [
        ("self", "Tensor"),
        ("mat1", "Tensor"),
        ("mat2", "Tensor"),
        ("beta", "Int, Double or Bool"),
        ("alpha", "Int, Double or Bool"),
        ("out", "Tensor"),
    ]
    layer_norm = {a.name: a.kinds for a in argument_kinds("aten::native_layer_norm.out")}
    assert layer_norm["normalized_shape"] == "IntList"
    assert layer_norm["weight"] == "Tensor or Null" and layer_norm["eps"] == "Double or Int"
    assert argument_kinds("no_such::op.out") is None


def test_table_covers_the_registry():
    table = json.loads(TABLE_PATH.read_text(encoding="utf-8"))
    assert sorted([*table["operators"], *table["unchecked"]]) == registered_operators()
    assert not any(name.startswith(("aten::", "dim_order_ops::")) for name in unchecked_operators())


def test_table_is_up_to_date():
    """Regenerating the table from torch's schemas gives the file as it is. In a fresh interpreter:
    which operators torch knows depends on what a process has imported (ExecuTorch adds some)."""
    pytest.importorskip("torch")
    tool = ROOT / "tools" / "generate_kernel_schemas.py"
    result = subprocess.run(
        [sys.executable, str(tool), "--check"], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert result.returncode == 0, (
        "argument_kinds.json is out of date: run python tools/generate_kernel_schemas.py\n"
        + (result.stdout + result.stderr)
    )


def test_arguments_written_besides_the_outs_are_those_torch_marks_written():
    for name, positions in [("aten::rrelu_with_noise.out", (1,)), ("aten::add.out", ()), ("aten::copy_", (0,))]:
        schema = _torch_schema(name)
        marked = tuple(
            i
            for i, a in enumerate(schema.arguments)
            if a.alias_info is not None and a.alias_info.is_write and not a.is_out
        )
        assert written_arguments(name) == marked == positions
    assert written_arguments("no_such::op.out") is None  # unknown: it may write any argument


def _torch_schema(name: str):
    torch = pytest.importorskip("torch")
    namespace, _, rest = name.partition("::")
    op, _, overload = rest.partition(".")
    return getattr(getattr(getattr(torch.ops, namespace), op), overload or "default")._schema
