"""What `Method.execute` takes and gives beyond NumPy arrays: DLPack and buffer-protocol inputs,
outputs copied into the caller's arrays, and a clear error for an input not passed in a list."""

import array
import pathlib

import numpy as np
import pytest

from torchedge.errors import InputError
from torchedge.runtime import Runtime

GOLDEN = pathlib.Path(__file__).parent.parent / "golden"


@pytest.fixture
def mlp():
    expected = np.load(GOLDEN / "mlp.npz")
    method = Runtime.get().load_program((GOLDEN / "mlp.pte").read_bytes()).load_method()
    return method, [expected["forward/0/in0"]]


class DLPackOnly:
    """An array from another library, seen only through the DLPack protocol."""

    def __init__(self, data: np.ndarray):
        self._data = data

    def __dlpack__(self, **kwargs):
        return self._data.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()


def test_one_array_not_in_a_list_is_named(mlp):
    method, inputs = mlp
    with pytest.raises(InputError, match=r"execute takes a list of inputs, got one ndarray: pass \[value\]"):
        method.execute(inputs[0])


def test_dlpack_and_buffer_protocol_inputs_equal_arrays(mlp):
    method, inputs = mlp
    (x,) = inputs
    expected = method.execute([x])
    assert np.array_equal(method.execute([DLPackOnly(x)])[0], expected[0])
    assert np.array_equal(method.execute([memoryview(np.ascontiguousarray(x))])[0], expected[0])
    # array.array is 1-D: a (2, 8) input comes as a memoryview of one, cast to the shape
    rows = memoryview(array.array("f", x.ravel().tolist())).cast("B").cast("f", x.shape)
    assert np.array_equal(method.execute([rows])[0], expected[0])


def test_a_buffer_of_another_dtype_is_an_input_error(mlp):
    method, inputs = mlp
    with pytest.raises(InputError, match="expected dtype float32, got float64"):
        method.execute([memoryview(inputs[0].astype(np.float64))])


def test_planned_outputs_are_copied_into_the_callers_arrays(mlp):
    method, inputs = mlp
    expected = method.execute(inputs)
    into = [np.full_like(e, np.nan) for e in expected]
    got = method.execute(inputs, outputs=into)
    assert all(g is i for g, i in zip(got, into))
    assert all(np.array_equal(i, e) for i, e in zip(into, expected))
    method.execute([inputs[0] * 2])  # a later run leaves the caller's arrays alone
    assert all(np.array_equal(i, e) for i, e in zip(into, expected))


def test_a_callers_output_array_of_another_shape_is_an_input_error(mlp):
    method, inputs = mlp
    (first, *rest) = method.execute(inputs)
    wrong = np.zeros(first.shape + (1,), first.dtype)
    with pytest.raises(InputError, match="output buffer 0: the output is float32"):
        method.execute(inputs, outputs=[wrong] + [None] * len(rest))
