"""Bad input gets a typed error with a clear message: never a crash or a hang."""

import dataclasses

import numpy as np
import pytest

from torchedge.errors import InputError, InvalidProgramError, MethodMissingError, OperatorMissingError
from torchedge.runtime import Runtime
from torchedge.serialize import deserialize_pte, serialize_pte


def test_not_a_pte():
    with pytest.raises(InvalidProgramError, match="ET12"):
        Runtime.get().load_program(b"PK\x03\x04" + bytes(60))


def test_empty_and_truncated(add_relu):
    _, _, pte = add_relu
    with pytest.raises(InvalidProgramError):
        Runtime.get().load_program(b"")
    for cut in (7, 16, len(pte) // 2, len(pte) - 1):
        try:
            program = Runtime.get().load_program(pte[:cut])
            program.load_method("forward")
        except InvalidProgramError:
            continue


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        Runtime.get().load_program(tmp_path / "nope.pte")


def _with_operator_renamed(pte: bytes, name: str) -> bytes:
    from torchedge.schema.program import Buffer

    decoded = deserialize_pte(pte)
    program = decoded.program
    plan = program.execution_plan[0]
    plan.operators[0] = dataclasses.replace(plan.operators[0], name=name)
    # Put the constants back inline so that the serializer lays the segment out again.
    count = len(program.constant_segment.offsets)
    program.constant_buffer = [Buffer(storage=bytes(decoded.constant_data(i))) for i in range(count)]
    program.constant_segment = None
    program.segments = []
    return serialize_pte(program)


def test_unknown_operator_is_named(add_relu):
    _, _, pte = add_relu
    bad = _with_operator_renamed(pte, "custom::does_not_exist")
    program = Runtime.get().load_program(bad)
    with pytest.raises(OperatorMissingError, match="custom::does_not_exist"):
        program.load_method("forward")


def test_wrong_inputs(add_relu):
    _, _, pte = add_relu
    method = Runtime.get().load_program(pte).load_method("forward")
    with pytest.raises(InputError, match="1 input"):
        method.execute([])
    with pytest.raises(InputError, match=r"shape \[2, 3\]"):
        method.execute([np.zeros((3, 2), np.float32)])
    with pytest.raises(InputError, match="dtype float32"):
        method.execute([np.zeros((2, 3), np.float64)])
    with pytest.raises(InputError, match="NumPy array"):
        method.execute([object()])


def test_unknown_method(add_relu):
    _, _, pte = add_relu
    with pytest.raises(MethodMissingError, match="no method 'nope'"):
        Runtime.get().load_program(pte).load_method("nope")
