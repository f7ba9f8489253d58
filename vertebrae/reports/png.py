"""A report figure (PNG) that ``vertebrae verify`` can check without drawing it again.

:func:`stamp` adds one ``tEXt`` chunk (keyword ``vertebrae``) after the header: JSON with the schema, the figure's
name (``ranking``, ``detail``, ``comparison``), the ``content_hash`` of the report.json it was drawn from, and the
SHA-256 of every other chunk (type, length and data, in order). :func:`read_stamp` reads a file back strictly: the
PNG signature, every chunk's CRC, one stamp, an ``IEND`` at the very end and the digest of the other chunks; a
flipped byte, a truncated file, trailing bytes or pixels changed after drawing raise CorruptArtifactError naming the
file. Standard library only (no image decoding).
"""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from pathlib import Path
from typing import Any

from vertebrae.core.errors import CorruptArtifactError

SCHEMA = "vertebrae.figure/v1"
SIGNATURE = b"\x89PNG\r\n\x1a\n"
KEYWORD = b"vertebrae"


def _chunks(data: bytes, where: str) -> list[tuple[bytes, bytes]]:
    """``(type, data)`` of every chunk, CRCs checked; the last one is IEND and nothing follows it."""
    def bad(why: str) -> CorruptArtifactError:
        return CorruptArtifactError(f"figure {where}: not a PNG vertebrae wrote: {why}", where)

    if not data.startswith(SIGNATURE):
        raise bad("no PNG signature")
    chunks, at = [], len(SIGNATURE)
    while at < len(data):
        if at + 12 > len(data):
            raise bad(f"truncated at byte {at}")
        (length,), kind = struct.unpack(">I", data[at:at + 4]), data[at + 4:at + 8]
        body, end = data[at + 8:at + 8 + length], at + 12 + length
        if end > len(data):
            raise bad(f"truncated in its {kind!r} chunk")
        if struct.unpack(">I", data[end - 4:end])[0] != zlib.crc32(kind + body):
            raise bad(f"CRC mismatch in its {kind!r} chunk at byte {at}")
        chunks.append((kind, body))
        at = end
        if kind == b"IEND":
            break
    if not chunks or chunks[-1][0] != b"IEND":
        raise bad("no IEND chunk")
    if at != len(data):
        raise bad(f"{len(data) - at} byte(s) after its IEND chunk")
    return chunks


def _digest(chunks: list[tuple[bytes, bytes]]) -> str:
    h = hashlib.sha256()
    for kind, body in chunks:
        h.update(struct.pack(">I", len(body)) + kind + body)
    return h.hexdigest()


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _is_stamp(kind: bytes, body: bytes) -> bool:
    return kind == b"tEXt" and body.startswith(KEYWORD + b"\x00")


def stamp(data: bytes, *, figure: str, report_hash: str | None) -> bytes:
    """``data`` (a PNG) with the stamp chunk after its header (see the module docstring)."""
    chunks = [c for c in _chunks(data, "being written") if not _is_stamp(*c)]
    meta = {"schema": SCHEMA, "figure": figure, "report": report_hash, "chunks": _digest(chunks)}
    text = KEYWORD + b"\x00" + json.dumps(meta, sort_keys=True).encode("latin-1")
    return SIGNATURE + _chunk(*chunks[0]) + _chunk(b"tEXt", text) + b"".join(_chunk(*c) for c in chunks[1:])


def read_stamp(path: str | Path) -> dict[str, Any]:
    """The stamp of the PNG at ``path`` once the file checks out (see the module docstring)."""
    where = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise CorruptArtifactError(f"figure {where}: unreadable ({exc})", where) from None
    chunks = _chunks(data, where)
    stamps = [body for kind, body in chunks if _is_stamp(kind, body)]
    if len(stamps) != 1:
        raise CorruptArtifactError(f"figure {where}: {len(stamps)} vertebrae stamps, expected 1 (not a figure "
                                   "vertebrae drew, or edited)", where)
    try:
        meta = json.loads(stamps[0][len(KEYWORD) + 1:].decode("latin-1"))
    except ValueError:
        meta = None
    if not isinstance(meta, dict) or meta.get("schema") != SCHEMA:
        raise CorruptArtifactError(f"figure {where}: its stamp is not a {SCHEMA} stamp", where)
    if meta.get("chunks") != _digest([c for c in chunks if not _is_stamp(*c)]):
        raise CorruptArtifactError(f"figure {where}: edited: its image differs from the one drawn", where)
    return meta


__all__ = ["SCHEMA", "read_stamp", "stamp"]
