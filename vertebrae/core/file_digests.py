"""SHA-256 digests of data files, cached by (absolute path, size, mtime_ns) so a large file is hashed once.

A file-backed dataset's identity is a digest of the files it reads (``DatasetIdentity.from_files``); planning a
workflow computes it every time, so the digests are cached in a small JSON file (``OUT/.vertebrae/digests.json``
in the run's out folder, :data:`CACHE_FILE`). An entry is reused only while the file's absolute path, size
and ``mtime_ns`` are unchanged: any write that moves the modification time is noticed and the file rehashed.
The cache serves planning only (``FileDigests.under`` while a config is planned): no job reads or writes it (a
job's inputs are its declared files, issue 47), so a job that checks a file against its planned digest hashes it.

Two rules keep the cache from ever hiding an edit or breaking a run:

- A file modified within :data:`RACY_SECONDS` of being hashed is not cached ("racily clean", as git calls it):
  a second write in the same timestamp tick, of the same size, would otherwise look unchanged. Such a file is
  simply hashed again next time.
- A digest computed from bytes another reader already holds (``remember_digest``: a small tar shard's headers and
  data come in one read) is kept for this process by the file's device, inode, size and ``mtime_ns``, and used
  for that file exactly as a digest read anew; the racy rule above still decides whether it is cached.
- The cache is an optimisation only: an unreadable, corrupt or foreign cache file is ignored (and rebuilt), a
  malformed entry is dropped, and a cache that cannot be written is skipped. Writes are atomic (temporary file
  + ``os.replace``) and merge with what other processes wrote meanwhile, so parallel jobs never corrupt it.

Files a recipe names by content (a precomputed embedding file, a model's weights) get theirs from
:func:`file_digest`: memoised in the process, and for files of :data:`LARGE_BYTES` or more, while a config is planned,
through the same cache (one digest cache for a run, in its state folder; no other on the machine). A job hashes them.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vertebrae.core.artifacts import atomic_write
from vertebrae.core.errors import ValidationError

CACHE_SCHEMA = "vertebrae.file-digests/v1"
CACHE_FILE = Path(".vertebrae") / "digests.json"
RACY_SECONDS = 2.0
_CHUNK = 1 << 20
_HEX = frozenset("0123456789abcdef")


def sha256_file(path: str | os.PathLike) -> str:
    """SHA-256 (hex) of the file's bytes, read in 1 MiB chunks; ValidationError naming the file if unreadable."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(_CHUNK), b""):
                digest.update(chunk)
    except OSError as exc:
        raise ValidationError(f"cannot read data file {path}: {exc}") from None
    return digest.hexdigest()


#: Digests computed in this process from bytes read for another purpose, by the file's (device, inode, size,
#: mtime_ns) while it was read: ``remember_digest`` fills it, ``FileDigests.digest`` takes from it.
_KNOWN: dict[tuple[int, int, int, int], str] = {}
_KNOWN_KEPT = 1_000_000


def _signature(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def remember_digest(before: os.stat_result, after: os.stat_result, data: bytes) -> None:
    """Keep the SHA-256 of ``data``, the whole content of a file whose stat was ``before`` when its read began and
    ``after`` when it ended (``os.fstat`` of the open file); nothing is kept when the two differ."""
    if _signature(before) == _signature(after) and len(data) == after.st_size:
        if len(_KNOWN) >= _KNOWN_KEPT:
            _KNOWN.clear()
        _KNOWN[_signature(after)] = hashlib.sha256(data).hexdigest()


def _valid_entry(entry: Any) -> bool:
    return (isinstance(entry, Mapping) and set(entry) == {"size", "mtime_ns", "sha256"}
            and all(isinstance(entry[k], int) and not isinstance(entry[k], bool) for k in ("size", "mtime_ns"))
            and isinstance(entry["sha256"], str) and len(entry["sha256"]) == 64 and set(entry["sha256"]) <= _HEX)


#: The last cache file parsed in this process: ``(absolute name, size, mtime_ns)`` and its valid entries. Planning
#: opens the same cache several times (a source's identity, its tar files); an unchanged file is not parsed again.
_PARSED: dict[tuple[str, int, int], dict[str, dict[str, Any]]] = {}


def _file_key(path: Path) -> tuple[str, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return os.path.abspath(path), st.st_size, st.st_mtime_ns


def _read_cache(path: Path | None) -> dict[str, dict[str, Any]]:
    """The valid entries of the cache file (a new dict; entries are replaced, never changed in place); nothing
    (never an error) for a missing, unreadable or corrupt file."""
    if path is None:
        return {}
    key = _file_key(path)
    if key is not None and key in _PARSED:
        return dict(_PARSED[key])
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, Mapping) or data.get("schema") != CACHE_SCHEMA or not isinstance(data.get("files"), Mapping):
        return {}
    entries = {key: dict(entry) for key, entry in data["files"].items() if isinstance(key, str) and _valid_entry(entry)}
    _remember(key, entries)
    return dict(entries)


def _remember(key: tuple[str, int, int] | None, entries: dict[str, dict[str, Any]]) -> None:
    """Keep one parsed cache file. No racy window is needed here: every entry is checked against its data file's
    size and mtime when used, so entries from any version of the cache file give the right digests."""
    _PARSED.clear()
    if key is not None:
        _PARSED[key] = entries


class FileDigests:
    """Digests of files, cached in ``cache_path`` (None: no cache file, digests kept for this object only).

    ``digest(path)`` returns the file's SHA-256; ``save()`` writes the entries learnt since construction.
    ``hashed`` lists the files whose digests were computed from their bytes (the others came from the cache).
    """

    def __init__(self, cache_path: str | os.PathLike | None) -> None:
        self.cache_path = None if cache_path is None else Path(cache_path)
        self._hashed: list[str] = []
        self._entries = _read_cache(self.cache_path)
        self._learnt: dict[str, dict[str, Any]] = {}

    @classmethod
    def under(cls, base_dir: str | os.PathLike) -> FileDigests:
        """While planning (``vertebrae.core.out_folder.writing_to``), the cache of the planned run:
        ``base_dir/OUT/.vertebrae/digests.json`` (:data:`CACHE_FILE` under its out folder); elsewhere (a job, the
        in-process API) no cache file: a job reads only its declared inputs, so it hashes what it checks."""
        from vertebrae.core.out_folder import planning_out

        out = planning_out()
        return cls(None if out is None else Path(base_dir) / out / CACHE_FILE)

    def digest(self, path: str | os.PathLike, *, resolved: bool = False, stat: os.stat_result | None = None) -> str:
        """SHA-256 of ``path``'s bytes: from the cache while its absolute path, size and mtime_ns are unchanged.
        ``resolved``: ``path`` is already absolute under a resolved folder (a tree of 100,000 images listed from
        its resolved root), so the per-file ``resolve()`` (a few system calls each) is skipped; ``stat``: the
        file's stat the caller just took (not a link's own), so it is not taken again."""
        key = os.fspath(path) if resolved else str(Path(path).resolve())
        before = self._stat(key) if stat is None else stat
        entry = self._entries.get(key)
        if entry is not None and (entry["size"], entry["mtime_ns"]) == (before.st_size, before.st_mtime_ns):
            return entry["sha256"]
        self._hashed.append(key)
        digest = _KNOWN.get(_signature(before))
        if digest is None:
            digest = sha256_file(key)
            after = self._stat(key)
        else:  # read whole by another reader of this process, unchanged since
            after = before
        entry = {"size": after.st_size, "mtime_ns": after.st_mtime_ns, "sha256": digest}
        settled = time.time_ns() - after.st_mtime_ns > RACY_SECONDS * 1e9
        if _signature(before) == _signature(after) and settled:  # unchanged while read, not written just now
            self._entries[key] = self._learnt[key] = entry
        return digest

    @property
    def hashed(self) -> list[Path]:
        """The files whose bytes gave their digest here (read by this object, or by ``remember_digest``'s caller)."""
        return [Path(key) for key in self._hashed]

    @staticmethod
    def _stat(path: str) -> os.stat_result:
        try:
            return os.stat(path)
        except OSError as exc:
            raise ValidationError(f"cannot read data file {path}: {exc}") from None

    def save(self) -> None:
        """Merge the entries learnt here into the cache file (re-read first: other jobs may have written it)."""
        if self.cache_path is None or not self._learnt:
            return
        entries = {**_read_cache(self.cache_path), **self._learnt}
        # One line, not indented: json's C encoder writes 100,000 entries in a fraction of a second.
        text = json.dumps({"schema": CACHE_SCHEMA, "files": entries}, sort_keys=True, separators=(",", ":")) + "\n"
        try:
            with atomic_write(self.cache_path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError:  # a read-only working directory: digests are recomputed next time
            return
        self._learnt = {}
        _remember(_file_key(self.cache_path), entries)


#: A file a recipe names at least this large keeps its digest in the run's cache while a config is planned; a smaller
#: one is hashed (~5 ms for 8 MiB) in less time than the cache file takes to rewrite.
LARGE_BYTES = 8 << 20
#: Digests of files recipes name, computed or looked up in this process (``file_digest``), by the file's resolved
#: path, device, inode, size and mtime_ns.
_MEMO: dict[tuple[str, int, int, int, int], str] = {}


def file_digest(path: str | os.PathLike) -> str:
    """SHA-256 of a file a recipe names by content (a precomputed embedding file, a model's weights), memoised in this
    process by its resolved path, device, inode, size and mtime_ns. While a config is planned (``planning_out()``),
    a file of :data:`LARGE_BYTES` or more goes through the run's cache (``FileDigests.under``, relative to the
    working folder, where the extractors resolve their paths), so that a new start does not hash an unchanged one
    again; elsewhere (a job, the in-process API) it is hashed here: a job reads only its declared inputs (issue 47).
    OSError for a file that is not there; ValidationError naming one that cannot be read."""
    from vertebrae.core.out_folder import planning_out

    resolved = Path(path).resolve()
    st = os.stat(resolved)
    key = (str(resolved), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    digest = _MEMO.get(key)
    if digest is None:
        if st.st_size >= LARGE_BYTES and planning_out() is not None:
            cache = FileDigests.under(".")
            digest = cache.digest(resolved, resolved=True, stat=st)
            cache.save()
        else:
            digest = sha256_file(resolved)
        _MEMO[key] = digest
    return digest


__all__ = ["CACHE_FILE", "CACHE_SCHEMA", "FileDigests", "LARGE_BYTES", "RACY_SECONDS", "file_digest", "remember_digest",
           "sha256_file"]
