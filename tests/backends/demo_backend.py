"""A test backend: its processed bytes are a nested torchedge .pte, run by the portable runtime.

The runtime half records the compile specs it was given, so tests can check
they arrived.
"""

import torch

from torchedge.exir import EdgeCompileConfig, EdgeProgramManager
from torchedge.exir.backend import (
    BackendDetails,
    CompileSpec,
    DelegationSpec,
    Partitioner,
    PartitionResult,
    PreprocessResult,
    tag_supported_partitions,
)
from torchedge.runtime import BackendInterface, Runtime, register_backend


class NestedPteBackend(BackendDetails):
    @staticmethod
    def preprocess(edge_program, compile_specs):
        program = EdgeProgramManager({"forward": edge_program}, {}, EdgeCompileConfig()).to_executorch()
        return PreprocessResult(processed_bytes=program.buffer)


class OpsPartitioner(Partitioner):
    """Delegates the ATen ops named in ``ops`` (e.g. {"aten.add.Tensor"})."""

    def __init__(self, ops, compile_specs=()):
        self.ops = set(ops)
        self.spec = DelegationSpec("NestedPteBackend", [CompileSpec(k, v) for k, v in compile_specs])

    def partition(self, exported_program):
        tags = tag_supported_partitions(
            exported_program.graph_module, lambda node: str(node.target) in self.ops, self.spec
        )
        return PartitionResult(exported_program, tags)


class NestedPteRuntime(BackendInterface):
    def __init__(self):
        self.seen_specs = []
        self.executions = 0

    def init(self, processed, compile_specs, named_data):
        self.seen_specs.append(dict(compile_specs))
        return Runtime.get().load_program(bytes(processed)).load_method("forward")

    def execute(self, handle, args):
        n_in = len(handle.meta.inputs)
        results = handle.execute(args[:n_in])
        for out, value in zip(args[n_in:], results):
            out[...] = value
        self.executions += 1


RUNTIME = NestedPteRuntime()
register_backend("NestedPteBackend", RUNTIME)
assert torch  # torch is imported for the AOT half above
