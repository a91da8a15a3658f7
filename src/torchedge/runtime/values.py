"""Turn a plan's `EValue` table into the Python objects kernels receive.

Tensors become NumPy arrays (planned views into arenas, read-only constants,
or ``None`` for tensors whose memory the caller supplies); scalars become
Python scalars; lists become tuples/lists of the values they reference.
"""

from __future__ import annotations

import math

import numpy as np

from torchedge.errors import InvalidProgramError, KernelError, MemoryPlanError
from torchedge.runtime.memory import MemoryManager, allocate_bytes
from torchedge.runtime.named_data import NamedDataMap
from torchedge.runtime.tensor_view import dtype_of, view_of
from torchedge.schema.program import (
    Bool,
    BoolList,
    Double,
    DoubleList,
    Int,
    IntList,
    Null,
    OptionalTensorList,
    String,
    Tensor,
    TensorDataLocation,
    TensorList,
    TensorShapeDynamism,
)

__all__ = ["ValueTable", "LIST_TYPES"]

LIST_TYPES = (IntList, TensorList, OptionalTensorList)


class ValueTable:
    """The live values of one method, plus which list values depend on which entries.

    Lists that reference other values (boxed int lists, tensor lists) are
    resolved once at load and re-resolved only when an entry they reference is
    rebound (a caller-supplied input, or a scalar computed by an instruction).
    """

    def __init__(self, plan, pte, memory: MemoryManager, method_name: str, named_data: NamedDataMap):
        self.method_name = method_name
        self._named_data = named_data
        self._max_bytes = memory.max_runtime_bytes  # no tensor the file describes may be larger
        self.schema = [ev.val for ev in plan.values or []]
        self.values: list = [None] * len(self.schema)
        # DYNAMIC_BOUND planned tensors: the memory of their upper-bound shape, to resize within.
        self.capacity: dict[int, tuple] = {}
        # DYNAMIC_UNBOUND tensors without planned memory: (dtype, dim_order), allocated when resized.
        self.unbounded: dict[int, tuple] = {}
        self._dependents: dict[int, list[int]] = {}
        self.constants: set[int] = set()  # read-only tensors (the program's or external data)
        for i, val in enumerate(self.schema):
            if not isinstance(val, LIST_TYPES):
                self.values[i] = self._load_leaf(i, val, pte, memory)
        for i, val in enumerate(self.schema):
            if isinstance(val, LIST_TYPES):
                for item in val.items:
                    self._check_index(item, i, allow_none=isinstance(val, OptionalTensorList))
                    self._check_item_kind(item, i, val)
                    self._dependents.setdefault(item, []).append(i)
                self.values[i] = self._resolve_list(val)

    def __getitem__(self, index: int):
        return self.values[index]

    def set(self, index: int, value) -> None:
        """Rebind a value and refresh every list that references it."""
        self.values[index] = value
        for list_index in self._dependents.get(index, ()):
            self.values[list_index] = self._resolve_list(self.schema[list_index])

    def resize(self, index: int, shape: tuple[int, ...]) -> bool:
        """Rebind a dynamic tensor to ``shape`` over its planned memory (no bytes move);
        False when it already has that shape."""
        current = self.values[index]
        if current is not None and current.shape == shape:
            return False
        if index in self.unbounded:
            dtype, dim_order = self.unbounded[index]
            self._check_rank(index, shape, dim_order)
            nbytes = math.prod(shape) * dtype.itemsize
            if nbytes > self._max_bytes:
                raise MemoryPlanError(
                    f"{self._where(index)}: shape {list(shape)} needs {nbytes} bytes, more than the "
                    f"limit of {self._max_bytes}; raise max_arena_bytes if intended"
                )
            buffer = allocate_bytes(nbytes, self._where(index))
            self.set(index, view_of(buffer, 0, dtype, shape, dim_order, self._where(index)))
            return True
        buffer, offset, dtype, bound, dim_order = self.capacity[index]
        if len(shape) != len(bound) or math.prod(shape) > math.prod(bound):
            raise KernelError(
                f"{self._where(index)}: shape {list(shape)} does not fit the memory planned for "
                f"at most {list(bound)} (export with a larger Dim max)"
            )
        self.set(index, view_of(buffer, offset, dtype, shape, dim_order, self._where(index)))
        return True

    def _check_rank(self, index: int, shape: tuple[int, ...], dim_order) -> None:
        if len(shape) != len(dim_order):
            raise KernelError(f"{self._where(index)}: shape {list(shape)} is not of the tensor's rank {len(dim_order)}")

    def is_dynamic(self, index: int) -> bool:
        return index in self.capacity or index in self.unbounded

    def is_unallocated_tensor(self, index: int) -> bool:
        return isinstance(self.schema[index], Tensor) and self.values[index] is None

    # -- loading ---------------------------------------------------------------

    def _where(self, index: int) -> str:
        return f"method '{self.method_name}', value {index}"

    def _check_index(self, item: int, owner: int, allow_none: bool = False) -> None:
        if allow_none and item == -1:
            return
        if not 0 <= item < len(self.schema):
            raise InvalidProgramError(f"{self._where(owner)}: list item {item} is not a value index")

    def _check_item_kind(self, item: int, owner: int, val) -> None:
        """Tensor lists hold tensors; boxed int lists hold ints (symbolic sizes included)."""
        if item == -1 and isinstance(val, OptionalTensorList):
            return
        expected = Int if isinstance(val, IntList) else Tensor
        found = self.schema[item]
        if not isinstance(found, expected) and not (isinstance(val, OptionalTensorList) and isinstance(found, Null)):
            raise InvalidProgramError(
                f"{self._where(owner)}: expected the items of a {type(val).__name__} to be {expected.__name__} "
                f"values, found value {item}, a {type(found).__name__}"
            )

    def _resolve_list(self, val):
        if isinstance(val, IntList):
            return tuple(self.values[i] for i in val.items)
        if isinstance(val, OptionalTensorList):
            return [None if i == -1 else self.values[i] for i in val.items]
        return [self.values[i] for i in val.items]

    def _load_leaf(self, index: int, val, pte, memory: MemoryManager):
        if isinstance(val, Tensor):
            return self._load_tensor(index, val, pte, memory)
        if isinstance(val, Null) or val is None:
            return None
        if isinstance(val, Int):
            return int(val.int_val)
        if isinstance(val, Bool):
            return bool(val.bool_val)
        if isinstance(val, Double):
            return float(val.double_val)
        if isinstance(val, String):
            return val.string_val
        if isinstance(val, (DoubleList, BoolList)):
            return tuple(val.items)
        raise InvalidProgramError(f"{self._where(index)}: unsupported value type {type(val).__name__}")

    def _check_size(self, sizes: list[int], dtype: np.dtype, where: str, limit: int) -> None:
        """Refuse, before anything is allocated or viewed, a size no buffer of this method may hold."""
        if any(s < 0 for s in sizes):
            raise InvalidProgramError(f"{where}: expected sizes >= 0, found {sizes}")
        nbytes = math.prod(sizes) * dtype.itemsize
        if nbytes > limit:
            raise MemoryPlanError(
                f"{where}: tensor of sizes {sizes} ({dtype}) needs {nbytes} bytes, more than the "
                f"limit of {limit}; raise max_arena_bytes if intended"
            )

    def _external_tensor(self, key: str, dtype, sizes, dim_order, where: str) -> np.ndarray:
        """A constant stored by name outside the program (a `.ptd`): exactly its bytes, read-only."""
        blob = self._named_data.get(key)
        nbytes = dtype.itemsize * math.prod(sizes)
        if len(blob) != nbytes:
            raise InvalidProgramError(
                f"{where}: external tensor '{key}' of {list(sizes)} {dtype} needs {nbytes} bytes, "
                f"the data file holds {len(blob)}"
            )
        array = view_of(blob, 0, dtype, sizes, dim_order, where)
        array.flags.writeable = False
        return array

    def _load_tensor(self, index: int, t: Tensor, pte, memory: MemoryManager):
        where = self._where(index)
        info = t.extra_tensor_info
        if t.storage_offset:
            raise InvalidProgramError(f"{where}: storage_offset {t.storage_offset} is not supported (must be 0)")
        dtype = dtype_of(t.scalar_type, where)
        sizes, dim_order = list(t.sizes or []), list(t.dim_order or [])
        external = info is not None and info.location == TensorDataLocation.EXTERNAL
        # A constant's bytes are the file's (view_of bounds them); planned and runtime memory has the cap.
        constant = external or (t.allocation_info is None and t.data_buffer_idx > 0)
        self._check_size(sizes, dtype, where, 1 << 62 if constant else self._max_bytes)
        if external and info is not None:
            self.constants.add(index)
            return self._external_tensor(info.fully_qualified_name or "", dtype, sizes, dim_order, where)
        if t.allocation_info is not None:
            a = t.allocation_info
            offset = a.memory_offset_low | (a.memory_offset_high << 32)
            array = view_of(memory.arena(a.memory_id), offset, dtype, sizes, dim_order, where)
            if t.shape_dynamism != TensorShapeDynamism.STATIC:
                self.capacity[index] = (memory.arena(a.memory_id), offset, dtype, tuple(sizes), dim_order)
            if t.data_buffer_idx > 0 and a.memory_id not in memory.live:  # mutable buffer: its initial state
                segment = t.extra_tensor_info.mutable_data_segments_idx if t.extra_tensor_info else 0
                initial = view_of(pte.mutable_data(t.data_buffer_idx, segment), 0, dtype, sizes, dim_order, where)
                np.copyto(array, initial)
            return array
        if t.data_buffer_idx > 0:
            self.constants.add(index)
            return view_of(pte.constant_data(t.data_buffer_idx), 0, dtype, sizes, dim_order, where)
        if t.shape_dynamism == TensorShapeDynamism.DYNAMIC_UNBOUND:
            self.unbounded[index] = (dtype, dim_order or list(range(len(sizes))))
        return None  # memory supplied by the caller at execute time, or allocated by the run
