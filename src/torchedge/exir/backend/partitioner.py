"""`Partitioner`: decides which nodes of an Edge program go to which backend."""

from __future__ import annotations

from dataclasses import dataclass, field

from torch.export import ExportedProgram

from torchedge.exir.backend.compile_spec import CompileSpec

__all__ = ["DelegationSpec", "PartitionResult", "Partitioner", "TAG_KEY"]

TAG_KEY = "delegation_tag"  # node.meta key holding the partition tag


@dataclass(frozen=True)
class DelegationSpec:
    backend_id: str
    compile_specs: list[CompileSpec] = field(default_factory=list)


@dataclass
class PartitionResult:
    """The program with ``node.meta[TAG_KEY]`` set on delegated nodes, and what each tag means."""

    tagged_exported_program: ExportedProgram
    partition_tags: dict[str, DelegationSpec]


class Partitioner:
    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        raise NotImplementedError

    def supported_operators(self) -> set[str] | None:
        """Operator names the backend runs (for "will it load?" checks); None if not declared."""
        return None
