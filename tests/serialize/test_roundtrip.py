"""Decoding then encoding a file the real ExecuTorch wrote gives the same bytes."""

import pytest

from tests.serialize.conftest import INLINE_DELEGATES, WIDE_ALIGNMENT, reserialize

CASES = [
    ("linear_pte", {}),
    ("dict_pte", {}),
    ("no_constants_pte", {}),
    ("xnnpack_pte", {}),
    ("wide_alignment_pte", WIDE_ALIGNMENT),
    ("inline_delegate_pte", INLINE_DELEGATES),
]


@pytest.mark.parametrize("fixture, options", CASES, ids=[name for name, _ in CASES])
def test_byte_identical_round_trip(request, fixture, options):
    data = request.getfixturevalue(fixture)
    assert reserialize(data, **options) == data


def test_round_trip_accepts_every_buffer_type(linear_pte, tmp_path):
    import mmap

    path = tmp_path / "linear.pte"
    path.write_bytes(linear_pte)
    assert reserialize(bytearray(linear_pte)) == linear_pte
    assert reserialize(memoryview(linear_pte)) == linear_pte
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        assert reserialize(mapped) == linear_pte
