"""Edge operators, the `edge.yaml` dtype-constraint spec, and its agreement with the kernels.

The spec is checked against the portable kernel library itself: every core operator's
probe calls (`kernel_probe`, one per dtype combination) run on the kernel and in eager.
The combinations the spec admits must be exactly those the kernel supports (it runs them
and returns eager's dtypes and shapes), which no floating-point result decides; apart from
that, the kernel must compute them as eager does, within tolerances, but where `WRONG` says
(and as torchedge defines where C leaves eager's values undefined: `kernel_check.defined_expectation`).
"""

import copy
import functools
import random

import numpy as np
import pytest
import torch

from tools.qa.kernel_check import DTYPES, Status, kernel_op
from tools.qa.kernel_probe import Draw, kernel_spec
from tools.qa.probe_templates import TEMPLATES, WRONG
from torchedge.errors import ExportError
from torchedge.exir.core_operators import core_operators
from torchedge.exir.dialects import constraints
from torchedge.exir.dialects import ops as exir_ops
from torchedge.exir.dialects.constraints import check_node_dtypes, satisfies, spec_from_combinations
from torchedge.exir.dialects.edge_op import EdgeOpOverload, edge_op
from torchedge.exir.dialects.spec import (
    DTYPE_NAMES,
    SPEC_PATH,
    OpSpec,
    edge_spec,
    format_spec,
    load_spec,
    parse_spec,
    tensor_io_names,
)
from torchedge.exir.ir import op_name
from torchedge.kernels.registry import Kernel, get_kernel, has_kernel

CORE = {c.name: c.op for c in core_operators()}
INTEGRAL = {torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64}
FLOATING = {torch.float16, torch.bfloat16, torch.float32, torch.float64}
COMPLEX = {torch.complex64, torch.complex128}
# Outputs that are random or uninitialised: only their shape and dtype can match.
NONDETERMINISTIC = {"aten::empty.memory_format", "aten::empty_strided", "aten::native_dropout"}


def _names(op) -> list[str]:
    args, rets = tensor_io_names(op._schema)
    return args + rets


# -- the spec --------------------------------------------------------------------------------------


def test_sigmoid_example():
    sigmoid = exir_ops.edge.aten.sigmoid.default
    self_types = sigmoid._schema.arguments[0].allowed_types
    assert INTEGRAL | {torch.float32, torch.float64} | COMPLEX <= self_types <= INTEGRAL | FLOATING | COMPLEX
    assert sigmoid._schema.returns[0].allowed_types == self_types - INTEGRAL | {torch.float32}
    for dtype in self_types:
        admitted = {ret for ret in (*DTYPES, *COMPLEX) if check_node_dtypes(sigmoid, {"self": dtype}, [ret]) is None}
        assert admitted == ({torch.float32} if dtype in INTEGRAL else {dtype}), dtype


def test_every_core_operator_is_in_the_spec():
    spec = edge_spec()
    assert len(spec) == len(CORE) and set(spec) == set(CORE)


@pytest.mark.parametrize("name", sorted(CORE))
def test_constraints_name_the_operators_tensors(name):
    spec, names = edge_spec()[name], set(_names(CORE[name]))
    assert all(set(constraint) <= names for constraint in spec.type_constraint)
    assert all(dtypes for dtypes in spec.type_alias.values())


def test_the_spec_file_reads_back_what_format_spec_writes():
    specs = load_spec()
    assert parse_spec(format_spec(specs.values(), header="a\nb")) == specs
    assert format_spec(specs.values()) in SPEC_PATH.read_text()


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "- func: aten::relu\n  type_alias: {T0: [Float32]}\n  type_constraint: [{self: T0}]",
            "unknown dtype 'Float32'",
        ),
        (
            "- func: aten::relu\n  type_alias: {T0: [Float]}\n  type_constraint: [{self: T1}]",
            "undefined aliases ['T1']",
        ),
        ("- func: aten::relu\n  inherits: aten::gelu", "'func' equal to 'inherits'"),
    ],
)
def test_malformed_spec_is_rejected(text, message):
    with pytest.raises(ExportError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_spec(text)


@pytest.mark.parametrize("seed", range(5))
def test_spec_from_combinations_admits_exactly_them(seed):
    """Exactly the given combinations of present tensors; an absent (None) tensor is not checked."""
    rng = random.Random(seed)
    names, choices = ["self", "other", "__ret_0"], [torch.bool, torch.int32, torch.float16, torch.float32]
    universe = [(a, b, c) for a in choices for b in choices for c in choices]
    combos = set(rng.sample(universe, 30)) | {(torch.int32, None, torch.int32), (None, None, torch.bool)}
    spec = spec_from_combinations("aten::x", names, combos)
    admitted = {combo for combo in universe if satisfies(spec, dict(zip(names, combo)))}
    assert admitted == {combo for combo in combos if None not in combo}
    assert all(satisfies(spec, dict(zip(names, combo))) for combo in combos)


# -- the spec against the kernels ------------------------------------------------------------------


@functools.cache
def _probe(name: str):
    return kernel_spec(CORE[name], TEMPLATES[name], WRONG.get(name))


@pytest.mark.parametrize("name", sorted(CORE))
def test_spec_agrees_with_the_portable_kernel(name):
    assert _probe(name)[0] == edge_spec()[name], (
        "edge.yaml differs from what the kernels support: run tools/generate_edge_spec.py"
    )


@pytest.mark.parametrize("name", sorted(CORE))
def test_the_kernel_computes_the_supported_combinations_as_eager(name):
    op, wrong = CORE[name], WRONG.get(name)
    results = _probe(name)[1]
    inaccurate = {s for s, r in results.items() if r.status is Status.INACCURATE}
    known = {s for s, r in results.items() if r.status.supported and wrong and wrong.picks(dict(zip(_names(op), s)))}
    assert not inaccurate - known, "wrong values:\n" + "\n".join(str(results[s]) for s in inaccurate - known)
    assert not known - inaccurate, f"WRONG lists combinations the kernel now computes right: {wrong.reason}"


def _rewriting(change):
    """The portable kernels, with ``change`` applied to the float16 outs they write."""

    def kernels(name):
        kernel = get_kernel(name)

        def fn(*args):
            returned = kernel.fn(*args)
            for out in args:  # inputs are read-only
                if isinstance(out, np.ndarray) and out.dtype == np.float16 and out.flags.writeable:
                    change(out)
            return returned

        return Kernel(name, fn, kernel.num_args)

    return kernels


def _three_ulps_up(out):
    for _ in range(3):
        np.nextafter(out, np.inf, out=out)


def _negate(out):
    np.negative(out, out=out)


def test_float16_rounding_cannot_change_the_spec_and_wrong_values_are_reported():
    """Float16 results a few ulps off (as another CPU may round) keep the spec and pass the
    values check; wrong values fail the values check, and keep the spec too."""
    name = "aten::convolution"
    for change, status in [(_three_ulps_up, Status.PASS), (_negate, Status.INACCURATE)]:
        spec, results = kernel_spec(CORE[name], TEMPLATES[name], WRONG.get(name), _rewriting(change))
        assert spec == edge_spec()[name]
        half = [r for signature, r in results.items() if signature[-1] == torch.float16]
        assert half and all(r.status is status for r in half), change.__name__


@pytest.mark.parametrize("name", sorted(CORE))
def test_operators_the_spec_admits_have_a_kernel(name):
    if edge_spec()[name].type_constraint:
        assert has_kernel(op_name(kernel_op(CORE[name])))


# -- Edge operators --------------------------------------------------------------------------------


def _call(op, call):
    args, kwargs = copy.deepcopy(call)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        try:
            return op(*args, **kwargs)
        except Exception as e:
            return type(e)


@pytest.mark.parametrize("name", sorted(CORE))
def test_calling_an_edge_op_calls_the_aten_op(name):
    aten = CORE[name]
    edge = edge_op(aten)
    call = TEMPLATES[name][0](Draw(torch.float32))
    got, want = _call(edge, call), _call(aten, call)
    if isinstance(want, type):
        assert got is want
    elif name in NONDETERMINISTIC:
        assert [(t.shape, t.dtype) for t in torch.utils._pytree.tree_leaves(got)] == [
            (t.shape, t.dtype) for t in torch.utils._pytree.tree_leaves(want)
        ]
    else:
        torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)


def test_edge_op_wraps_the_aten_op():
    op = exir_ops.edge.aten.add.Tensor
    assert isinstance(op, EdgeOpOverload) and op is edge_op(torch.ops.aten.add.Tensor)
    assert op._op is torch.ops.aten.add.Tensor
    assert op.name() == "aten::add.Tensor" and op.__name__ == "aten.add.Tensor"
    assert op._schema.name == "aten::add" and str(op._schema) == str(torch.ops.aten.add.Tensor._schema)
    assert copy.deepcopy(op) is op and "aten.add.Tensor" in repr(op)
    alpha = op._schema.arguments[2]
    assert alpha.name == "alpha" and not hasattr(alpha, "allowed_types")  # a Scalar: unconstrained


def test_named_returns_carry_allowed_types():
    returns = exir_ops.edge.aten.max.dim._schema.returns
    assert [r.name for r in returns] == ["values", "indices"]
    assert returns[1].allowed_types == {torch.int64}


def test_operators_outside_the_spec_admit_every_dtype():
    op = exir_ops.edge.aten.linear.default  # not core: decomposed before the Edge dialect
    assert op._schema.arguments[0].allowed_types == set(DTYPE_NAMES.values())
    assert check_node_dtypes(op, {"input": torch.int8, "weight": torch.float16}, [torch.float64]) is None
    other_namespace = exir_ops.edge.prims.convert_element_type.default
    assert other_namespace._op is torch.ops.prims.convert_element_type.default


def test_unknown_operators_raise_attribute_error():
    with pytest.raises(AttributeError, match="no operator 'aten::no_such_op'"):
        _ = exir_ops.edge.aten.no_such_op
    with pytest.raises(AttributeError, match="has no overload 'Nope'"):
        _ = exir_ops.edge.aten.add.Nope


# -- check_node_dtypes -----------------------------------------------------------------------------


def test_check_explains_a_rejected_combination():
    message = check_node_dtypes(torch.ops.aten.sigmoid.default, {"self": torch.int32}, [torch.int32])
    assert message.startswith("aten::sigmoid: dtypes self=Int, __ret_0=Int match no type constraint")
    assert "self=__ret_0 in [" in message
    assert "(self in [Bool, Byte, Char, Int, Long, Short]; __ret_0 in [Float])" in message


def test_check_handles_lists_optionals_and_non_tensor_returns():
    cat = exir_ops.edge.aten.cat.default
    assert check_node_dtypes(cat, {"tensors": [torch.float32, torch.float32]}, [torch.float32]) is None
    assert "different dtypes" in check_node_dtypes(cat, {"tensors": [torch.float32, torch.int64]}, [torch.float32])
    layer_norm = torch.ops.aten.native_layer_norm.default
    assert (
        check_node_dtypes(layer_norm, {"input": torch.float32, "weight": None, "bias": None}, [torch.float32] * 3)
        is None
    )
    assert check_node_dtypes(torch.ops.aten.sym_size.int, {"self": torch.float32}, [None]) is None


def test_check_rejects_names_and_return_counts_the_schema_lacks():
    relu = torch.ops.aten.relu.default
    assert "['x'] are not tensor arguments" in check_node_dtypes(relu, {"x": torch.float32}, [torch.float32])
    assert "2 return dtypes given for the 1 returns" in check_node_dtypes(relu, {"self": torch.float32}, [None, None])


def test_check_names_operators_without_any_combination(monkeypatch):
    monkeypatch.setattr(constraints, "op_spec", lambda op: OpSpec(op_name(op), {}, ()))
    message = check_node_dtypes(torch.ops.aten.relu.default, {"self": torch.float32}, [torch.float32])
    assert message.endswith("the portable kernels support no dtype combination of it")
