"""Rebuild the regression files: ``python -m tests.runtime.fuzz_regressions.make_cases``.

Each case is a golden program with the one mutation that reproduced a bug the fuzzer found
(`tests/runtime/test_fuzz.py`); `cases.json` says what each must now raise. The ONNX Runtime
case needs torch and onnxruntime to compile its seed.
"""

from __future__ import annotations

import json
import pathlib

from torchedge.schema.program import AllocationDetails, BackendDelegateInlineData, Int, TensorShapeDynamism
from torchedge.serialize import deserialize_pte, serialize_pte

HERE = pathlib.Path(__file__).parent
GOLDEN = HERE.parent.parent / "golden"


def _mutated(seed: bytes, mutate) -> bytes:
    contents = deserialize_pte(seed).unpack()
    mutate(contents.program, contents.program.execution_plan[0])
    return serialize_pte(contents.program, mutable_data=contents.mutable_data, named_data=contents.named_data)


def _value(plan, index):
    return plan.values[index].val


def _set(obj, **changes):
    for key, value in changes.items():
        object.__setattr__(obj, key, value)


def _args(plan, pc):
    return plan.chains[0].instructions[pc].instr_args


# name: (seed, mutation, bug before the fix, expected error type, message fragment)
CASES = {
    "meta_output_index": (
        "mlp",
        lambda prog, plan: _set(plan, outputs=[20]),
        "IndexError in MethodMeta.from_plan (describe): output index outside the value table",
        "InvalidProgramError",
        "output 0: expected a value index below 20, found 20",
    ),
    "input_is_constant": (
        "mlp",
        lambda prog, plan: _set(plan, inputs=[0]),
        "ValueError 'assignment destination is read-only' in Method.set_inputs",
        "InvalidProgramError",
        "input 0: expected a non-constant Tensor",
    ),
    "jump_before_start": (
        "cond",
        lambda prog, plan: _set(_args(plan, 6), destination_instruction=-1),  # the unconditional jump
        "hang: the dispatch loop jumped to pc -1 and ran the last step forever",
        "InvalidProgramError",
        "expected a jump destination between 0 and 10",
    ),
    "endless_loop": (
        "map",
        lambda prog, plan: _set(plan.values[13], val=Int(0)),  # the loop counter's increment
        "hang: a backward jump whose condition never turns true",
        "KernelError",
        "backward jumps in one run",
    ),
    "planned_arena_over_cap": (
        "mlp",
        lambda prog, plan: _set(plan, non_const_buffer_sizes=[0, 5 << 30]),
        "a 5 GiB arena allocated at load_method (the default bound was 16 GiB, whatever the machine)",
        "MemoryPlanError",
        "more than the limit",
    ),
    "planned_total_over_cap": (
        "mlp",
        lambda prog, plan: _set(plan, non_const_buffer_sizes=[0, 40 << 20, 40 << 20]),
        "arenas checked one by one, never their total",
        "MemoryPlanError",
        "need 83886080 bytes together",
    ),
    "tensor_size_overflow": (
        "mlp",
        lambda prog, plan: _set(_value(plan, 9), sizes=[2**31 - 1] * 3, dim_order=[0, 1, 2]),
        "the byte count of a tensor wrapped around int64 (the error named a wrong size)",
        "MemoryPlanError",
        "value 9: tensor of sizes",
    ),
    "unbounded_tensor_over_cap": (
        "mlp",
        lambda prog, plan: _set(
            _value(plan, 17),
            sizes=[1 << 20, 1 << 20],
            allocation_info=None,
            shape_dynamism=TensorShapeDynamism.DYNAMIC_UNBOUND,
        ),
        "a tensor size from the file allocated at run without a bound",
        "MemoryPlanError",
        "value 17: tensor of sizes",
    ),
    "tensor_without_memory": (
        "mlp",
        lambda prog, plan: _set(_value(plan, 2), data_buffer_idx=0),
        "KernelError wrapping AttributeError: 'NoneType' object has no attribute 'ndim'",
        "InvalidProgramError",
        "value 2: expected a tensor with memory",
    ),
    "out_shape_mismatch": (
        "mlp",
        lambda prog, plan: _set(_value(plan, 17), sizes=[2, 5]),
        "KernelError wrapping NumPy's 'non-broadcastable output operand'",
        "InvalidProgramError",
        "expected outs of shapes [[2, 4]]",
    ),
    "out_is_constant": (
        "mlp",
        lambda prog, plan: _set(_args(plan, 2), args=[9, 1, 1]),
        "KernelError wrapping NumPy's 'assignment destination is read-only'",
        "InvalidProgramError",
        "found value 1, a constant Tensor",
    ),
    "int_list_holds_tensor": (
        "mlp",
        lambda prog, plan: _set(_value(plan, 8), items=[6, 4]),
        "KernelError wrapping a NumPy TypeError (a tensor among permute's dims)",
        "InvalidProgramError",
        "expected the items of a IntList to be Int values, found value 4, a Tensor",
    ),
    "int_where_int_list": (
        "mlp",
        lambda prog, plan: _set(_args(plan, 0), args=[0, 6, 5, 5]),
        "KernelError wrapping 'object of type int has no len()' in permute_copy",
        "InvalidProgramError",
        "do not fit the operator",
    ),
    "planned_offset_high": (
        "mlp",
        lambda prog, plan: _set(_value(plan, 9), allocation_info=AllocationDetails(1, 0, 0xFFFFFFFF)),
        "(already typed: kept to pin the bound check of view_of)",
        "InvalidProgramError",
        "does not fit in a buffer of 704 bytes",
    ),
}


# Files the fuzzer wrote as they were (``python -m tests.runtime.test_fuzz --save DIR``), not rebuilt here.
SAVED = {
    "slow_runaway_loop.pte": {
        "seed": "tests/golden/scan.pte, fuzz seed 100 case 9719: "
        "AllocationDetails.memory_offset_low 0->1, list.1 16->17 (the loop adds a Bool to its counter)",
        "bug": "a loop that never ends ran until the harness's time limit (no bound on backward jumps)",
        "expect": "KernelError",
        "match": "backward jumps in one run",
    }
}


def _ort_case() -> dict:
    """A delegate blob ONNX Runtime cannot parse: InvalidProtobuf escaped from the delegate's init."""
    from tests.runtime.test_fuzz import compiled_seeds

    seed = compiled_seeds().get("c_ort")
    if seed is None:
        return {}
    contents = deserialize_pte(seed).unpack()
    contents.program.backend_delegate_data = [BackendDelegateInlineData(b"\xff" * 64)]
    data = serialize_pte(contents.program, mutable_data=contents.mutable_data, named_data=contents.named_data)
    (HERE / "ort_invalid_protobuf.pte").write_bytes(data)
    return {
        "ort_invalid_protobuf.pte": {
            "bug": "onnxruntime InvalidProtobuf escaped from OnnxRuntimeDelegate.init",
            "expect": "InvalidProgramError",
            "match": "expected a valid ONNX model",
            "needs": "onnxruntime",
        }
    }


def main() -> None:
    manifest = {}
    for name, (seed, mutate, bug, expect, match) in CASES.items():
        data = _mutated((GOLDEN / f"{seed}.pte").read_bytes(), mutate)
        (HERE / f"{name}.pte").write_bytes(data)
        manifest[f"{name}.pte"] = {"seed": f"tests/golden/{seed}.pte", "bug": bug, "expect": expect, "match": match}
    manifest.update(SAVED)
    manifest.update(_ort_case())
    (HERE / "cases.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
