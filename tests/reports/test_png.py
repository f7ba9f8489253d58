"""Stamped report figures (issue 32, item 2): ``reports.png`` stamps a PNG with its name, its report's content hash
and the digest of its chunks, and reads it back strictly; the oracle for "a PNG" is matplotlib's own reader."""

from __future__ import annotations

import io
import struct
import zlib

import pytest

from vertebrae.core.errors import CorruptArtifactError
from vertebrae.reports.png import read_stamp, stamp


@pytest.fixture(scope="module")
def drawn() -> bytes:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots(figsize=(2, 1))
    ax.bar(["a", "b"], [1, 2])
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=40, metadata={"Software": None})
    plt.close(figure)
    return buffer.getvalue()


def _idat(data: bytes) -> int:
    return data.index(b"IDAT") + 4  # first byte of the first image data chunk's data


def test_a_stamped_png_reads_back_and_is_still_a_png(drawn, tmp_path):
    import matplotlib.image

    path = tmp_path / "ranking.png"
    path.write_bytes(stamp(drawn, figure="ranking", report_hash="ab" * 32))
    assert read_stamp(path) == {"schema": "vertebrae.figure/v1", "figure": "ranking", "report": "ab" * 32,
                                "chunks": read_stamp(path)["chunks"]}
    assert (matplotlib.image.imread(path) == matplotlib.image.imread(io.BytesIO(drawn))).all()
    path.write_bytes(stamp(path.read_bytes(), figure="detail", report_hash=None))  # stamped again: one stamp
    assert read_stamp(path)["figure"] == "detail"


def _recrc(data: bytes, at: int) -> bytes:
    """``data`` with the CRC of the chunk holding byte ``at`` recomputed (an edit a CRC check cannot see)."""
    start = data.rindex(b"IDAT", 0, at + 1) - 4
    (length,) = struct.unpack(">I", data[start:start + 4])
    body = data[start + 4:start + 8 + length]
    return data[:start + 8 + length] + struct.pack(">I", zlib.crc32(body)) + data[start + 12 + length:]


@pytest.mark.parametrize("edit,message", [
    (lambda d: d[:_idat(d)] + bytes([d[_idat(d)] ^ 1]) + d[_idat(d) + 1:], "CRC mismatch in its b'IDAT' chunk"),
    (lambda d: _recrc(d[:_idat(d)] + bytes([d[_idat(d)] ^ 1]) + d[_idat(d) + 1:], _idat(d)), "edited: its image"),
    (lambda d: d[:len(d) // 2], "truncated"),
    (lambda d: d + b"\x00", r"1 byte\(s\) after its IEND chunk"),
    (lambda d: b"GIF89a" + d[6:], "no PNG signature"),
])
def test_a_flipped_byte_a_cut_or_an_appended_byte_is_refused_naming_the_file(drawn, tmp_path, edit, message):
    path = tmp_path / "detail.png"
    path.write_bytes(edit(stamp(drawn, figure="detail", report_hash="cd" * 32)))
    with pytest.raises(CorruptArtifactError, match=message) as info:
        read_stamp(path)
    assert str(path) in str(info.value) and info.value.path == str(path)


def test_a_png_vertebrae_did_not_stamp_is_refused(drawn, tmp_path):
    path = tmp_path / "ranking.png"
    path.write_bytes(drawn)
    with pytest.raises(CorruptArtifactError, match="0 vertebrae stamps, expected 1"):
        read_stamp(path)
