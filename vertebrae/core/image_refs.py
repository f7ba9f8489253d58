"""Images held inside a container file: a tar shard member or a cell of an Arrow / Parquet table.

An image row of :class:`~vertebrae.core.inputs.RawInputs` is a string: an absolute file path, or a reference to
bytes inside a container, so the rows of a WebDataset shard or a Hugging Face dataset with embedded images
travel, slice and pickle (to DataLoader workers) like file paths, and are decoded only when a model reads them:

- ``vertebrae-tar:<offset>:<size>:<tar path>``: ``size`` bytes at ``offset`` in an uncompressed tar file
  (its member's data; the offsets come from the tar headers, read once when the shard is listed);
- ``vertebrae-table:<row>:<column>:<file path>``: the image in row ``row`` (0-based, within that file) of
  column ``column`` of an Arrow IPC stream (``.arrow``, as ``datasets.save_to_disk`` writes it) or Parquet
  file: binary bytes, or a ``{bytes, path}`` struct (a ``datasets`` Image feature).

``read_image_bytes(value)`` returns the bytes of either form or of a plain file; ``describe(value)`` a short
name for messages (the shard or file and the member). Column names and paths may hold ``:`` (the path is last,
the column is percent-encoded).
"""

from __future__ import annotations

import functools
import os
from typing import Any
from urllib.parse import quote, unquote

from vertebrae.core.errors import ValidationError

TAR_PREFIX = "vertebrae-tar:"
TABLE_PREFIX = "vertebrae-table:"


def tar_ref(path: str | os.PathLike, offset: int, size: int) -> str:
    return f"{TAR_PREFIX}{int(offset)}:{int(size)}:{os.fspath(path)}"


def table_ref(path: str | os.PathLike, row: int, column: str) -> str:
    return f"{TABLE_PREFIX}{int(row)}:{quote(column, safe='')}:{os.fspath(path)}"


def is_ref(value: str) -> bool:
    return value.startswith(TAR_PREFIX) or value.startswith(TABLE_PREFIX)


def _split(value: str, prefix: str) -> tuple[str, str, str]:
    first, second, path = value[len(prefix):].split(":", 2)
    return first, second, path


def container_path(value: str) -> str:
    """The file an image row reads: the path itself, or the tar / table file of a reference."""
    for prefix in (TAR_PREFIX, TABLE_PREFIX):
        if value.startswith(prefix):
            return _split(value, prefix)[2]
    return value


def describe(value: str) -> str:
    """``value`` for a message: the path, or ``<tar> (bytes at offset N)`` / ``<file> (row N, column C)``."""
    if value.startswith(TAR_PREFIX):
        offset, size, path = _split(value, TAR_PREFIX)
        return f"{path} (member data at byte {offset}, {size} bytes)"
    if value.startswith(TABLE_PREFIX):
        row, column, path = _split(value, TABLE_PREFIX)
        return f"{path} (row {row}, column {unquote(column)!r})"
    return value


@functools.lru_cache(maxsize=8)
def _table_column(path: str, column: str) -> Any:
    """The column of a memory-mapped Arrow stream or a Parquet file (cached: a shard reads many rows of few files)."""
    import pyarrow as pa

    if path.endswith((".parquet", ".pq")):
        import pyarrow.parquet as pq

        return pq.read_table(path, columns=[column], memory_map=True).column(column)
    source = pa.memory_map(path)
    try:
        table = pa.ipc.open_stream(source).read_all()
    except pa.ArrowInvalid:
        table = pa.ipc.open_file(source).read_all()
    return table.column(column)


def _table_bytes(value: str) -> bytes:
    row, column, path = _split(value, TABLE_PREFIX)
    cell = _table_column(path, unquote(column))[int(row)].as_py()
    if isinstance(cell, dict):
        if cell.get("bytes") is not None:
            return bytes(cell["bytes"])
        if cell.get("path"):
            with open(cell["path"], "rb") as handle:
                return handle.read()
        raise ValidationError(f"{describe(value)}: the image cell holds neither bytes nor a path")
    if isinstance(cell, (bytes, bytearray)):
        return bytes(cell)
    raise ValidationError(f"{describe(value)}: the image cell holds {type(cell).__name__}, not image bytes")


def read_image_bytes(value: str) -> bytes:
    """The encoded image a row names (OSError subclasses propagate for a missing or unreadable file)."""
    if value.startswith(TAR_PREFIX):
        offset, size, path = _split(value, TAR_PREFIX)
        with open(path, "rb") as handle:
            handle.seek(int(offset))
            data = handle.read(int(size))
        if len(data) != int(size):
            raise OSError(f"{path} is shorter than its tar index says (truncated shard?)")
        return data
    if value.startswith(TABLE_PREFIX):
        try:
            return _table_bytes(value)
        except (KeyError, IndexError, ValueError) as exc:
            if isinstance(exc, ValidationError):
                raise
            raise OSError(f"cannot read {describe(value)}: {exc}") from None
    with open(value, "rb") as handle:
        return handle.read()


__all__ = ["TABLE_PREFIX", "TAR_PREFIX", "container_path", "describe", "is_ref", "read_image_bytes", "table_ref",
           "tar_ref"]
