"""Bundled programs, the AOT half: bundle test cases with a compiled program and write a ``.bpte``.

ExecuTorch 1.5.1's names (``executorch.devtools.bundled_program``), so scripts port::

    cases = [MethodTestCase(inputs=(x,), expected_outputs=(model(x),)) for x in samples]
    bundle = BundledProgram(executorch_program, [MethodTestSuite("forward", cases)])
    data = serialize_from_bundled_program_to_flatbuffer(bundle)  # the .bpte bytes

As in ExecuTorch, expected outputs are optional (a test case without them only feeds inputs)
and are never computed here; test suites are stored sorted by method name. Each test case is
checked against its method's signature (count, kind, dtype and shape of every input and
expected output) with typed errors. Run and verify a ``.bpte`` with
`torchedge.runtime.bundled_program.load_bundled_program`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.utils._pytree import tree_flatten

from torchedge.errors import InputError, MethodMissingError
from torchedge.exir.dtypes import to_numpy, torch_dtype
from torchedge.exir.tensor_spec import TensorSpec
from torchedge.schema import bundled_program as bp
from torchedge.schema import program as schema
from torchedge.serialize import deserialize_pte
from torchedge.serialize.bundled_program import SCHEMA_VERSION, deserialize_bundled_program, serialize_bundled_program
from torchedge.serialize.bundled_values import tensor_from_array

__all__ = [
    "MethodTestCase",
    "MethodTestSuite",
    "BundledProgram",
    "serialize_from_bundled_program_to_flatbuffer",
    "deserialize_from_flatbuffer_to_bundled_program",
]

ConfigValue = torch.Tensor | int | bool | float
# Kinds of program values a bundled value can stand for -> the Python type it must have.
_PYTHON_TYPES: dict[type, type] = {
    schema.Tensor: torch.Tensor,
    schema.Int: int,
    schema.Double: float,
    schema.Bool: bool,
}


class MethodTestCase:
    """One run of a method: `inputs` and, optionally, the `expected_outputs` (containers are flattened)."""

    def __init__(self, inputs, expected_outputs=None) -> None:
        self.inputs: list[ConfigValue] = _flatten(inputs, "inputs")
        self.expected_outputs: list[ConfigValue] = (
            [] if expected_outputs is None else _flatten(expected_outputs, "expected_outputs")
        )


@dataclass
class MethodTestSuite:
    """The test cases of the method named `method_name`."""

    method_name: str
    test_cases: Sequence[MethodTestCase]


class BundledProgram:
    """A compiled program (an `ExecutorchProgramManager`, or the `.pte` at `pte_file_path`) and its test suites."""

    def __init__(self, executorch_program, method_test_suites: Sequence[MethodTestSuite], pte_file_path=None):
        if (executorch_program is None) == (pte_file_path is None):
            raise InputError("BundledProgram takes either executorch_program or pte_file_path (exactly one)")
        if executorch_program is not None and not hasattr(executorch_program, "buffer"):
            raise InputError(
                f"executorch_program: expected an ExecutorchProgramManager (to_executorch()'s result), "
                f"got {type(executorch_program).__name__}"
            )
        self.executorch_program = executorch_program
        self._pte_file_path = None if pte_file_path is None else os.fspath(pte_file_path)
        self.method_test_suites = sorted(method_test_suites, key=lambda suite: suite.method_name)
        self._check(self._program())
        self._schema: bp.BundledProgram | None = None

    def serialize_to_schema(self) -> bp.BundledProgram:
        """The bundle as schema objects (`torchedge.schema.bundled_program`), computed once."""
        if self._schema is None:
            suites = [
                bp.BundledMethodTestSuite(
                    suite.method_name,
                    [
                        bp.BundledMethodTestCase(
                            [_value(v) for v in case.inputs], [_value(v) for v in case.expected_outputs]
                        )
                        for case in suite.test_cases
                    ],
                )
                for suite in self.method_test_suites
            ]
            self._schema = bp.BundledProgram(SCHEMA_VERSION, suites, self._program_bytes())
        return self._schema

    def _program_bytes(self) -> bytes:
        if self.executorch_program is not None:
            return self.executorch_program.buffer
        with open(self._pte_file_path or "", "rb") as f:
            return f.read()

    def _program(self) -> schema.Program:
        if self.executorch_program is not None:
            return self.executorch_program.program
        return deserialize_pte(self._program_bytes()).program

    def _check(self, program: schema.Program) -> None:
        plans = {plan.name: plan for plan in program.execution_plan}
        seen: set[str] = set()
        for suite in self.method_test_suites:
            plan = plans.get(suite.method_name)
            if plan is None:
                raise MethodMissingError(
                    f"a test suite is for method '{suite.method_name}', but the program's methods are "
                    f"{', '.join(plans) or 'none'}"
                )
            if suite.method_name in seen:
                raise InputError(f"two test suites for method '{suite.method_name}': give one with all its cases")
            seen.add(suite.method_name)
            for index, case in enumerate(suite.test_cases):
                where = f"method '{suite.method_name}', test case {index}"
                if not isinstance(case, MethodTestCase):
                    raise InputError(f"{where}: expected a MethodTestCase, got {type(case).__name__}")
                _check_values(plan, plan.inputs, case.inputs, where, "input")
                if case.expected_outputs:
                    _check_values(plan, plan.outputs, case.expected_outputs, where, "expected output")


def serialize_from_bundled_program_to_flatbuffer(bundled_program: BundledProgram) -> bytes:
    """The ``.bpte`` bytes of `bundled_program`."""
    return serialize_bundled_program(bundled_program.serialize_to_schema())


def deserialize_from_flatbuffer_to_bundled_program(flatbuffer) -> bp.BundledProgram:
    """The schema objects of a ``.bpte`` (`torchedge.schema.bundled_program.BundledProgram`)."""
    return deserialize_bundled_program(flatbuffer)


# -- helpers -------------------------------------------------------------------


def _flatten(data, what: str) -> list[ConfigValue]:
    leaves, _ = tree_flatten(data)
    for position, leaf in enumerate(leaves):
        if not isinstance(leaf, (torch.Tensor, int, float, bool)):
            raise InputError(
                f"MethodTestCase {what}[{position}]: expected a tensor, int, float or bool, got {type(leaf).__name__}"
            )
    return leaves


def _check_values(plan: schema.ExecutionPlan, indices: list[int], values: list, where: str, what: str) -> None:
    """Checks `values` (the test case's inputs or expected outputs) against the method's values at `indices`."""
    if len(values) != len(indices):
        raise InputError(f"{where}: the method has {len(indices)} {what.split()[-1]}s, got {len(values)} {what}s")
    for position, (index, value) in enumerate(zip(indices, values)):
        val = plan.values[index].val
        expected_type = _PYTHON_TYPES.get(type(val))
        at = f"{where}, {what} {position}"
        if expected_type is None:
            raise InputError(
                f"{at}: the method's value is a {type(val).__name__}; bundled programs hold tensors, ints, floats "
                "and bools only"
            )
        if not isinstance(value, expected_type) or (expected_type is int and isinstance(value, bool)):
            raise InputError(f"{at}: expected {expected_type.__name__}, got {type(value).__name__}")
        if isinstance(val, schema.Tensor):
            _check_tensor(val, value, at)


def _check_tensor(spec: schema.Tensor, tensor: torch.Tensor, at: str) -> None:
    dtype = torch_dtype(spec.scalar_type)
    bound = [int(s) for s in spec.sizes]
    shape = list(tensor.shape)
    if tensor.dtype != dtype:
        raise InputError(f"{at}: expected dtype {dtype}, got {tensor.dtype}")
    dynamism = spec.shape_dynamism
    if dynamism == schema.TensorShapeDynamism.STATIC:
        fits = shape == bound
    else:  # dynamic: the planned sizes are upper bounds (none where unbounded)
        unbounded = dynamism == schema.TensorShapeDynamism.DYNAMIC_UNBOUND
        fits = len(shape) == len(bound) and (unbounded or all(s <= b for s, b in zip(shape, bound)))
    if not fits:
        kind = "shape" if dynamism == schema.TensorShapeDynamism.STATIC else "a shape within the upper bounds"
        raise InputError(f"{at}: expected {kind} {bound}, got {shape}")


def _value(value: ConfigValue) -> bp.Value:
    if isinstance(value, torch.Tensor):
        dim_order = TensorSpec.from_tensor(value, const=True).dim_order
        return bp.Value(tensor_from_array(to_numpy(value), dim_order))
    if isinstance(value, bool):
        return bp.Value(bp.Bool(value))
    if isinstance(value, int):
        return bp.Value(bp.Int(value))
    return bp.Value(bp.Double(float(value)))
