"""The emitter: an out-variant, memory-planned graph -> program schema objects."""

from torchedge.exir.emit.constants import ConstantTable
from torchedge.exir.emit.emitter import MethodEmitter, emit_constant_method

__all__ = ["ConstantTable", "MethodEmitter", "emit_constant_method"]
