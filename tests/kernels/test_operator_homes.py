"""Each operator has one home: the module that registers its kernel names it in full and
declares its shape function and traits there; nobody else keeps lists of operator names."""

import importlib
import importlib.util
import inspect

from torchedge.kernels.registry import op_traits, registered_operators, registering_module


def test_every_registered_name_is_written_out_in_its_module():
    sources: dict[str, str] = {}
    hidden = []
    for name in registered_operators():
        module = registering_module(name)
        if module not in sources:
            sources[module] = inspect.getsource(importlib.import_module(module))
        if f'"{name}"' not in sources[module]:
            hidden.append(f"{name} (registered by {module})")
    assert not hidden, f"operator names not written out in full where they are registered: {hidden}"


def test_operators_register_from_the_kernel_libraries():
    modules = {registering_module(name) for name in registered_operators()}
    outside = sorted(m for m in modules if not m.startswith("torchedge.kernels."))
    assert not outside, f"operators registered outside torchedge.kernels: {outside}"


def test_traits_that_exclude_each_other():
    for name in registered_operators():
        traits = op_traits(name)
        no_out = traits.returns_value or traits.view or traits.data_dependent or traits.checks_only
        assert not (no_out and traits.shape is not None), f"{name}: a shape function for an out it does not size"
        assert not (traits.inplace_safe and traits.shape is None), f"{name}: in-place safe without a tensor out"
        assert not (traits.value_from_data and not traits.returns_value), f"{name}: value_from_data without a value"


def test_executor_and_planner_ask_the_registry_not_name_lists():
    for module in ("torchedge.runtime.method", "torchedge.exir.memory_planning.inplace"):
        source = open(importlib.util.find_spec(module).origin).read()
        for namespace in ("aten::", "executorch_prim::", "quantized_decomposed::", "torchedge_fused::"):
            assert f'"{namespace}' not in source, f"{module} names {namespace} operators; give them a trait instead"
