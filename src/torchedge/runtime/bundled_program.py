"""`load_bundled_program`: load a bundled program (``.bpte``) and run and verify its test cases.

A bundled program wraps a `.pte` with test cases, per method: inputs and (optionally) the
outputs expected from them. ExecuTorch 1.5.1's Python names are kept so scripts port::

    bundle = load_bundled_program("model.bpte")
    outputs = bundle.verify_result_with_bundled_expected_output("forward", 0)  # runs, raises on mismatch
    method = bundle.program.load_method("forward")
    outputs = method.execute(bundle.load_bundled_input(method, "forward", 0))
    bundle.verify_result_with_bundled_expected_output("forward", 0, outputs=outputs)
    for result in bundle.verify():  # every test case; a mismatch is reported, not raised
        print(result)

Outputs are compared as ExecuTorch does (`torchedge.runtime.bundled_compare`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from torchedge.errors import InputError, InvalidProgramError, MethodMissingError, OutputMismatchError, TorchEdgeError
from torchedge.runtime.bundled_compare import DEFAULT_ATOL, DEFAULT_RTOL, compare_output
from torchedge.runtime.data_loader import DataLoader, loader_for
from torchedge.runtime.method import Method
from torchedge.runtime.program import Program
from torchedge.runtime.runtime import Runtime
from torchedge.schema.bundled_program import BundledMethodTestCase, BundledMethodTestSuite
from torchedge.serialize.bundled_program import deserialize_bundled_program
from torchedge.serialize.bundled_values import python_from_value

__all__ = ["OutputMismatchError", "TestCaseResult", "BundledProgram", "load_bundled_program"]


@dataclass(frozen=True)
class TestCaseResult:
    """The verdict on one test case. ``passed`` is None when the case bundles no expected outputs."""

    __test__ = False  # not a pytest test class

    method_name: str
    index: int
    passed: bool | None
    max_abs_error: float  # over every element of every output; nan when nothing was compared
    message: str = ""  # what differs, output by output


def load_bundled_program(source, runtime: Runtime | None = None) -> BundledProgram:
    """Load a ``.bpte`` from a path (memory-mapped), bytes or a binary file; its program with `runtime`.

    The wrapped program is loaded from the bundle's bytes without a copy (``Runtime.get()``
    by default). A malformed file raises `InvalidProgramError`.
    """
    if isinstance(source, (str, os.PathLike)) and not os.path.isfile(source):
        raise FileNotFoundError(f"no such bundled program file: '{os.fspath(source)}'")
    loader = loader_for(source)
    bundled = deserialize_bundled_program(loader.data)
    try:
        program = (runtime or Runtime.get()).load_program(bundled.program)
    except InvalidProgramError as error:
        raise InvalidProgramError(f"the program inside the bundled program: {error}") from None
    return BundledProgram(program, bundled.method_test_suites, bundled.version, loader)


class BundledProgram:
    """A loaded bundled program: `program` (a runtime `Program`) and its `method_test_suites`."""

    def __init__(
        self,
        program: Program,
        method_test_suites: list[BundledMethodTestSuite],
        version: int = 0,
        loader: DataLoader | None = None,
    ):
        self.program = program
        self.method_test_suites = method_test_suites
        self.version = version
        self._loader = loader  # the program and the bundled tensors are views onto its bytes
        self._methods: dict[str, Method] = {}
        methods = set(program.method_names)
        seen: set[str] = set()
        for position, suite in enumerate(method_test_suites):
            if suite.method_name not in methods:
                raise InvalidProgramError(
                    f"BundledProgram.method_test_suites[{position}]: tests method '{suite.method_name}', but the "
                    f"program's methods are {', '.join(program.method_names) or 'none'}"
                )
            if suite.method_name in seen:
                raise InvalidProgramError(
                    f"BundledProgram.method_test_suites[{position}]: a second test suite for '{suite.method_name}'"
                )
            seen.add(suite.method_name)

    @property
    def method_names(self) -> list[str]:
        """The methods that have a test suite."""
        return [suite.method_name for suite in self.method_test_suites]

    def num_test_cases(self, method_name: str) -> int:
        return len(self._suite(method_name).test_cases)

    def bundled_inputs(self, method_name: str, testset_idx: int) -> list:
        """The inputs of a test case: NumPy arrays (copies) and Python scalars."""
        case = self._test_case(method_name, testset_idx)
        where = f"method '{method_name}', test case {testset_idx}, input"
        values = [python_from_value(v, f"{where} {i}") for i, v in enumerate(case.inputs)]
        return [np.array(v) if isinstance(v, np.ndarray) else v for v in values]

    def bundled_expected_outputs(self, method_name: str, testset_idx: int) -> list:
        """The expected outputs of a test case (read-only arrays and scalars; empty: none bundled)."""
        case = self._test_case(method_name, testset_idx)
        where = f"method '{method_name}', test case {testset_idx}, expected output"
        return [python_from_value(v, f"{where} {i}") for i, v in enumerate(case.expected_outputs)]

    def load_bundled_input(self, method: Method, method_name: str, testset_idx: int) -> list:
        """Set the inputs of test case `testset_idx` on `method`; returns them (for `Method.execute`)."""
        inputs = self.bundled_inputs(method_name, testset_idx)
        with _context(method_name, testset_idx):
            method.set_inputs(inputs)
        return inputs

    def verify_result_with_bundled_expected_output(
        self,
        method_name: str,
        testset_idx: int,
        rtol: float = DEFAULT_RTOL,
        atol: float = DEFAULT_ATOL,
        *,
        outputs: list | None = None,
    ) -> list:
        """Check a test case's outputs; raises `OutputMismatchError` if they differ, else returns them.

        Without `outputs`, runs the method on the test case's inputs first (as ExecuTorch
        1.5.1's ``BundledModule`` does). A test case without expected outputs raises `InputError`.
        """
        if outputs is None:
            outputs = self._run(method_name, testset_idx)
        result = self._judge(method_name, testset_idx, outputs, rtol, atol)
        if result.passed is None:
            raise InputError(f"method '{method_name}', test case {testset_idx}: no expected outputs to verify with")
        if not result.passed:
            raise OutputMismatchError(
                f"method '{method_name}', test case {testset_idx}: the outputs differ from the expected ones "
                f"(max abs error {result.max_abs_error:.3g}): {result.message}"
            )
        return outputs

    def verify(
        self, method_name: str | None = None, rtol: float = DEFAULT_RTOL, atol: float = DEFAULT_ATOL
    ) -> list[TestCaseResult]:
        """Run every test case (of `method_name`, or of every method) and report each; never raises on a mismatch."""
        names = self.method_names if method_name is None else [self._suite(method_name).method_name]
        results = []
        for name in names:
            for index in range(self.num_test_cases(name)):
                results.append(self._judge(name, index, self._run(name, index), rtol, atol))
        return results

    # -- helpers ---------------------------------------------------------------

    def _suite(self, method_name: str) -> BundledMethodTestSuite:
        for suite in self.method_test_suites:
            if suite.method_name == method_name:
                return suite
        raise MethodMissingError(
            f"the bundled program has no test suite for method '{method_name}'; "
            f"it has test suites for: {', '.join(self.method_names) or 'none'}"
        )

    def _test_case(self, method_name: str, testset_idx: int) -> BundledMethodTestCase:
        cases = self._suite(method_name).test_cases
        if not isinstance(testset_idx, int) or not 0 <= testset_idx < len(cases):
            raise InputError(
                f"method '{method_name}': test case index {testset_idx!r} is out of range: "
                f"expected 0 <= index < {len(cases)}"
            )
        return cases[testset_idx]

    def _method(self, method_name: str) -> Method:
        if method_name not in self._methods:
            self._methods[method_name] = self.program.load_method(method_name)
        return self._methods[method_name]

    def _run(self, method_name: str, testset_idx: int) -> list:
        inputs = self.bundled_inputs(method_name, testset_idx)
        method = self._method(method_name)
        with _context(method_name, testset_idx):
            return method.execute(inputs)

    def _judge(self, method_name: str, index: int, outputs: list, rtol: float, atol: float) -> TestCaseResult:
        expected = self.bundled_expected_outputs(method_name, index)
        if not expected:
            return TestCaseResult(method_name, index, None, math.nan, "no expected outputs")
        if len(expected) != len(outputs):
            raise InvalidProgramError(
                f"method '{method_name}', test case {index}: bundles {len(expected)} expected outputs, "
                f"but the method has {len(outputs)} outputs"
            )
        comparisons = [compare_output(want, got, rtol, atol) for want, got in zip(expected, outputs)]
        message = "; ".join(f"output {i}: {c.message}" for i, c in enumerate(comparisons) if not c.ok)
        max_error = max(c.max_abs_error for c in comparisons)
        return TestCaseResult(method_name, index, all(c.ok for c in comparisons), max_error, message)


class _context:
    """Re-raises a typed error of a test case's run with the method and test case named."""

    def __init__(self, method_name: str, index: int):
        self.prefix = f"bundled test case {index} of method '{method_name}'"

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        if isinstance(error, TorchEdgeError) and not str(error).startswith(self.prefix):
            raise type(error)(f"{self.prefix}: {error}") from error
        return False
