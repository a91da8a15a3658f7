"""Reading and writing `.pte` files (the ExecuTorch program format)."""

from torchedge.serialize.extended_header import ExtendedHeader
from torchedge.serialize.pte_reader import PteContents, PteFile, deserialize_pte, is_pte
from torchedge.serialize.pte_writer import serialize_pte

__all__ = ["serialize_pte", "deserialize_pte", "is_pte", "PteFile", "PteContents", "ExtendedHeader"]
