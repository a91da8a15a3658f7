"""Emit one method: walk the final graph and build an `ExecutionPlan`.

`MethodEmitter` is a `torch.fx.Interpreter` with one method per node kind.
Instead of computing tensors it returns `Value` handles (indices into the
plan's value table) and appends instructions.
"""

from __future__ import annotations

import operator

import torch
from torch.utils._pytree import treespec_dumps

from torchedge.errors import ExportError
from torchedge.exir.backend.lowered_module import LoweredBackendModule
from torchedge.exir.control_flow import is_control_flow
from torchedge.exir.emit.constants import ConstantTable, ExternalConstants, tensor_bytes
from torchedge.exir.emit.control_flow import emit_control_flow
from torchedge.exir.emit.delegates import DelegateTable
from torchedge.exir.emit.dim_order import dim_order_variant
from torchedge.exir.emit.value_table import Value, ValueTable, literal_evalue, scalar_placeholder
from torchedge.exir.ir import bind_arguments, constant_value, executorch_call_delegate, pte_operator_name
from torchedge.exir.memory import alloc, view
from torchedge.exir.op_schema import is_inplace, out_argument_names, returns_nothing
from torchedge.exir.source import describe_node, frames
from torchedge.exir.symbolic import is_scalar_call, scalar_kernel_name
from torchedge.exir.tensor_spec import TensorSpec
from torchedge.schema.program import (
    BackendDelegate,
    BackendDelegateDataReference,
    Chain,
    ContainerMetadata,
    DataLocation,
    DelegateCall,
    ExecutionPlan,
    Frame,
    FrameList,
    Instruction,
    KernelCall,
    Operator,
    TensorList,
)
from torchedge.schema.program import CompileSpec as SchemaCompileSpec

__all__ = ["MethodEmitter", "emit_constant_method"]


class MethodEmitter(torch.fx.Interpreter):
    """Build the `ExecutionPlan` of one method from its out-variant, planned graph."""

    def __init__(
        self,
        name: str,
        graph_module: torch.fx.GraphModule,
        exported_program,
        constants: ConstantTable,
        non_const_buffer_sizes: list[int],
        emit_stacktrace: bool = False,
        delegate_data: DelegateTable | None = None,
        mutable_data: ConstantTable | None = None,
        emit_mutable_buffer_names: bool = False,
        external_constants: ExternalConstants | None = None,
    ):
        super().__init__(graph_module, garbage_collect_values=False)
        self.name = name
        self.exported_program = exported_program
        mutable_data = mutable_data if mutable_data is not None else ConstantTable()
        self.constants = constants
        self.table = ValueTable(constants, mutable_data, emit_mutable_buffer_names, external_constants)
        self.constants_outside = external_constants is not None  # by name, in a .ptd
        self.non_const_buffer_sizes = non_const_buffer_sizes
        self.instructions: list[Instruction] = []
        self.operators: dict[tuple[str, str], int] = {}
        self.inputs: list[int] = []
        self.outputs: list[int] = []
        self.node: torch.fx.Node | None = None
        self.emit_stacktrace = emit_stacktrace
        self.delegate_data = delegate_data if delegate_data is not None else DelegateTable()
        self.delegates: list[BackendDelegate] = []
        self.debug_handles: list[int | None] = []  # per instruction: the Edge node's debug handle
        self._stacktraces: list[FrameList] = []

    # -- driving ---------------------------------------------------------------

    def emit(self) -> ExecutionPlan:
        placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        self.run(*([None] * len(placeholders)))
        call_spec = self.exported_program.call_spec
        return ExecutionPlan(
            name=self.name,
            container_meta_type=ContainerMetadata(
                encoded_inp_str=treespec_dumps(call_spec.in_spec) if call_spec.in_spec else "",
                encoded_out_str=treespec_dumps(call_spec.out_spec) if call_spec.out_spec else "",
            ),
            values=self.table.values,
            inputs=self.inputs,
            outputs=self.outputs,
            chains=[
                Chain(
                    inputs=[],
                    outputs=[],
                    instructions=self.instructions,
                    stacktrace=self._stacktraces if self.emit_stacktrace else None,
                )
            ],
            operators=[Operator(name=n, overload=o) for (n, o) in self.operators],
            delegates=self.delegates,
            non_const_buffer_sizes=list(self.non_const_buffer_sizes),
        )

    def run_node(self, n: torch.fx.Node):
        self.node = n
        try:
            return super().run_node(n)
        except ExportError:
            raise
        except Exception as e:  # re-raise with the node and the user's source line
            raise ExportError(f"cannot emit {describe_node(n)}: {e}") from e

    # -- node kinds ------------------------------------------------------------

    def placeholder(self, target, args, kwargs):
        node = self.node
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            index = self.table.literal(val)
            self.inputs.append(index)
            return Value(index)
        spec: TensorSpec = node.meta["spec"]
        if spec.const:
            name = self._constant_name(node.name) if self.constants_outside else None
            return Value(self.table.constant_tensor(self.constants.view(self._constant_of(node.name)), spec, name))
        if spec.state:  # a copy: the module's own buffer changes when it runs
            return Value(self.table.state_tensor(spec, tensor_bytes(self._constant_of(node.name))))
        index = self.table.tensor(spec)
        self.inputs.append(index)
        return Value(index)

    def call_function(self, target, args, kwargs):
        if target is alloc:  # planned memory: a value, no instruction
            return Value(self.table.tensor(self.node.meta["spec"]))
        if target is view:
            return self._emit_view(args[0], args[1], self.node.meta["spec"])
        if target is operator.getitem:
            return args[0][args[1]]
        if target is executorch_call_delegate:
            return self._emit_delegate_call(args[0], args[1:], kwargs["out"])
        if is_control_flow(self.node):
            return emit_control_flow(self, args)
        if is_scalar_call(self.node):
            return self._emit_scalar_call(target, args, kwargs)
        if not isinstance(target, torch._ops.OpOverload):
            raise ExportError(f"cannot emit call to {target!r}")
        return self._emit_kernel_call(target, args, kwargs)

    def output(self, target, args, kwargs):
        outputs = args[0] if isinstance(args[0], (tuple, list)) else [args[0]]
        for out in outputs:
            self.outputs.append(out.index if isinstance(out, Value) else self.table.literal(out))
        return None

    def get_attr(self, target, args, kwargs):
        module = getattr(self.module, target, None)
        if isinstance(module, (LoweredBackendModule, torch.fx.GraphModule)):
            return module  # a delegate, or a sub-graph of control flow
        raise ExportError(f"get_attr '{target}' is not supported: lift it to a constant with torch.export")

    def _emit_delegate_call(self, lowered: LoweredBackendModule, inputs, outs) -> list[Value]:
        """A DelegateCall over the inputs then the planned outputs; the blob goes to the program table."""
        data_index = self.delegate_data.add(lowered.processed_bytes, lowered.named_data)
        self.delegates.append(
            BackendDelegate(
                id=lowered.backend_id,
                processed=BackendDelegateDataReference(location=DataLocation.INLINE, index=data_index),
                compile_specs=[SchemaCompileSpec(key=c.key, value=bytes(c.value)) for c in lowered.compile_specs],
            )
        )
        self.append(
            DelegateCall(
                delegate_index=len(self.delegates) - 1, args=[v.index for v in inputs] + [o.index for o in outs]
            )
        )
        return list(outs)

    # -- kernel calls ----------------------------------------------------------

    def _emit_kernel_call(self, op: torch._ops.OpOverload, args, kwargs):
        schema = op._schema
        bound = bind_arguments(op, args, kwargs)
        if is_inplace(op):  # ``copy_(self, src)``: returns the tensor it wrote, ``self``
            written = bound[schema.arguments[0].name]
            self._append_kernel_call(schema, self._schema_arguments(schema, bound) + [written.index])
            return written
        converted = dim_order_variant(op, bound, self.node.meta["val"])
        if converted is not None:
            return self._emit_dim_order_copy(*converted, out=bound["out"])
        arg_indices = self._schema_arguments(schema, bound)
        out_names = out_argument_names(op)
        outs = _flatten([bound[name] for name in out_names])
        if len(out_names) == 1 and not isinstance(bound[out_names[0]], (list, tuple)):
            arg_indices.append(outs[0].index)
        elif outs:  # several outs, or a Tensor[] out (even when the schema returns nothing, as ExecuTorch emits)
            arg_indices.append(self.table.add(TensorList(items=[o.index for o in outs])))
        self._append_kernel_call(schema, arg_indices)
        if returns_nothing(op):  # a check: it writes nothing
            return None
        if not outs:
            raise ExportError(f"operator {schema.name}.{schema.overload_name} is not an out variant")
        single = len(out_names) == 1 and not isinstance(bound[out_names[0]], (list, tuple))
        return outs[0] if single else list(outs)  # a Tensor[] out of one tensor is still a list

    def _schema_arguments(self, schema, bound: dict) -> list[int]:
        """Value indices of every schema argument in order, omitted ones from their defaults."""
        arg_indices = []
        for schema_arg in schema.arguments:
            if schema_arg.name in bound:
                value = bound[schema_arg.name]
            elif schema_arg.has_default_value():
                value = schema_arg.default_value
            else:
                raise ExportError(
                    f"operator {schema.name}.{schema.overload_name} is missing argument '{schema_arg.name}'"
                )
            arg_indices.append(self.table.argument(value, schema_arg.type))
        return arg_indices

    def _append_kernel_call(self, schema, arg_indices: list[int]) -> None:
        self.append_call(*pte_operator_name(schema), arg_indices)

    def emit_sub_graph(self, graph_module: torch.fx.GraphModule, bindings: list[Value]) -> list[Value]:
        """Emit a control-flow sub-graph here, its inputs bound to ``bindings``; returns its outputs."""
        return SubGraphEmitter(self, graph_module, bindings).run()

    def append_call(self, name: str, overload: str, arg_indices: list[int]) -> None:
        """A kernel call of operator ``name.overload`` on these value indices."""
        op_index = self.operators.setdefault((name, overload), len(self.operators))
        self.append(KernelCall(op_index=op_index, args=arg_indices))

    def _emit_scalar_call(self, target, args, kwargs) -> Value:
        """Size arithmetic: a kernel that returns a scalar into a fresh Int/Double/Bool value."""
        if isinstance(target, torch._ops.OpOverload):
            bound = bind_arguments(target, args, kwargs)
            arguments = target._schema.arguments
            arg_indices = [self.table.argument(bound.get(a.name, a.default_value), a.type) for a in arguments]
        else:
            arg_indices = [self.table.argument(a, None) for a in args]
        ret = self.table.literal(scalar_placeholder(self.node.meta.get("val")))
        self.append_call(*scalar_kernel_name(self.node), arg_indices + [ret])
        return Value(ret)

    def _emit_dim_order_copy(self, name: str, arguments: list, out: Value) -> Value:
        """``[self, non_blocking, dim_order, out, out]``, as ExecuTorch emits its dim-order copies."""
        self_value, non_blocking, order = arguments
        table = self.table
        indices = [self_value.index, table.literal(non_blocking), table.list(order, None), out.index, out.index]
        self.append_call(name, "out", indices)
        return out

    def _emit_view(self, base: Value, shape, spec: TensorSpec) -> Value:
        """A static view of planned memory is just a value; a view of caller-supplied memory or
        with sizes known only at run time is an ``et_view`` call."""
        out = self.table.tensor(spec)
        if spec.mem_id is None or spec.dynamic:
            size = self.table.list(list(shape), None)
            self.append_call("executorch_prim::et_view", "default", [base.index, size, out])
        return Value(out)

    def append(self, call) -> None:
        """Add an instruction for the current node, with its debug handle and stack trace."""
        self.instructions.append(Instruction(instr_args=call))
        self.debug_handles.append(self.node.meta.get("debug_handle"))
        if self.emit_stacktrace:
            self._stacktraces.append(
                FrameList(
                    items=[
                        Frame(filename=f, lineno=line, name=name, context=context)
                        for f, line, name, context in frames(self.node)
                    ]
                )
            )

    def _constant_name(self, placeholder_name: str) -> str:
        """The constant's fully qualified name (``layer.weight``)."""
        sig = self.exported_program.graph_signature
        for mapping in (sig.inputs_to_parameters, sig.inputs_to_buffers, sig.inputs_to_lifted_tensor_constants):
            if placeholder_name in mapping:
                return mapping[placeholder_name]
        raise ExportError(f"placeholder '{placeholder_name}' is marked constant but has no value")

    def _constant_of(self, placeholder_name: str) -> torch.Tensor:
        return constant_value(self.exported_program, self._constant_name(placeholder_name))


def emit_constant_method(name: str, value) -> ExecutionPlan:
    """A method with no instructions that returns ``value`` (ExecuTorch's "prim getter")."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not all(isinstance(item, (bool, int, float, str)) for item in items):
        raise ExportError(
            f"constant method '{name}': unsupported value {value!r} (use int, float, bool, str or a list of them)"
        )
    values = [literal_evalue(item) for item in items]
    return ExecutionPlan(
        name=name,
        container_meta_type=ContainerMetadata(encoded_inp_str="", encoded_out_str=""),
        values=values,
        inputs=[],
        outputs=list(range(len(values))),
        chains=[Chain(inputs=[], outputs=[], instructions=[])],
        operators=[],
        delegates=[],
        non_const_buffer_sizes=[0],
    )


def _flatten(values: list) -> list:
    """Out arguments, with ``Tensor[]`` outs expanded into their tensors."""
    return [v for value in values for v in (value if isinstance(value, (list, tuple)) else [value])]


class SubGraphEmitter(MethodEmitter):
    """Emits a control-flow sub-graph inline into its method: same values, instructions and
    operators; each input is bound to a given value, the outputs are returned."""

    _SHARED = (
        "name",
        "exported_program",
        "table",
        "instructions",
        "operators",
        "delegates",
        "delegate_data",
        "debug_handles",
        "_stacktraces",
        "emit_stacktrace",
        "non_const_buffer_sizes",
    )

    def __init__(self, parent: MethodEmitter, graph_module: torch.fx.GraphModule, bindings: list[Value]):
        torch.fx.Interpreter.__init__(self, graph_module, garbage_collect_values=False)
        for attribute in self._SHARED:
            setattr(self, attribute, getattr(parent, attribute))
        self.node = None
        self._bindings = iter(bindings)

    def placeholder(self, target, args, kwargs):
        return next(self._bindings)

    def output(self, target, args, kwargs):
        outputs = args[0] if isinstance(args[0], (tuple, list)) else [args[0]]
        return list(outputs)
