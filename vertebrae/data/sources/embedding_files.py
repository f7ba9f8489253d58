"""Embedding files computed elsewhere, read row by row and aligned to a dataset by row id.

A declaration (a precomputed extractor's ``path`` and its keys, see ``vertebrae.extractors.precomputed``)::

    {"path": "emb/a.npz", "format": None, "key": None, "ids": None, "ids_path": None}

- ``format``: npy, npz, hdf5 or parquet; by default from the suffix (.npy, .npz, .h5 / .hdf5, .parquet / .pq).
- ``key`` (npz member), ``dataset`` (HDF5 dataset) or ``column`` (Parquet column of lists of numbers): the
  embedding matrix. Default: ``embeddings`` if the file has it, else the file's only other array / column.
- ``ids``: the member / dataset / column of the same file holding each row's id (str or int); ``ids_path``: a
  separate file of ids instead (``.npy``, or UTF-8 text with one id per line). Without either, the file's rows
  are the dataset's rows in order and the row counts must be equal.

Parquet is read with pyarrow (the ``models`` extra); the other formats need only numpy and h5py.

Content, not the path, names the file: ``EmbeddingFile.recipe()`` holds the SHA-256 of its bytes (and of the ids
file), so editing one file changes only the fingerprints computed from it. ``file_sha256``
(``vertebrae.core.file_digests.file_digest``) memoises digests per (path, device, inode, size, modification time) in
the process; while a config is planned, a file of 8 MiB or more keeps its digest in the run's cache
(``OUT/.vertebrae/digests.json``), so a new start does not hash it again. A job reads no cache: the plan job that
re-derives an embedding's fingerprint hashes its file (about 0.65 s per GB from the page cache here).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vertebrae.core.arrays import encode_row_ids
from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.file_digests import file_digest as file_sha256
from vertebrae.core.labels import describe_key

FORMATS = ("npy", "npz", "hdf5", "parquet")
SUFFIXES = {".npy": "npy", ".npz": "npz", ".h5": "hdf5", ".hdf5": "hdf5", ".parquet": "parquet", ".pq": "parquet"}
MEMBER_KEYS = {"npy": None, "npz": "key", "hdf5": "dataset", "parquet": "column"}  # the key naming the matrix
_MEMBER_FORMAT = {"key": "npz", "dataset": "hdf5", "column": "parquet"}
DECL_KEYS = ("path", "format", "key", "dataset", "column", "ids", "ids_path")
DEFAULT_MEMBER = "embeddings"
_SHOWN = 5  # ids named in an alignment error


# --------------------------------------------------------------------------------------------------------
# declarations


def _resolve(value: Any, where: str, base_dir: Path) -> Path:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: must be a non-empty path string, got {value!r}")
    path = Path(value)
    if not path.is_absolute():
        path = base_dir / path
    if not path.exists():
        raise ConfigError(f"{where}: file not found: {path}")
    if not path.is_file():
        raise ConfigError(f"{where}: not a file: {path}")
    return path


def _listing(names: Sequence[str]) -> str:
    names = list(names)
    return ", ".join(repr(n) for n in names[:50]) + (f", ... ({len(names) - 50} more)" if len(names) > 50 else "") \
        if names else "(none)"


def _pick_member(names: Sequence[str], given: str | None, ids: str | None, *, key: str, path: Path, where: str,
                 kind: str) -> str:
    if given is not None:
        if given not in names:
            raise ConfigError(f"{where}.{key}: {kind} {given!r} not found in {path}; available: {_listing(names)}")
        return given
    if DEFAULT_MEMBER in names:
        return DEFAULT_MEMBER
    others = [n for n in names if n != ids]
    if len(others) == 1:
        return others[0]
    raise ConfigError(f"{where}.{key}: {path} holds {len(others)} {kind}s besides the ids and none is named "
                      f"{DEFAULT_MEMBER!r}; name the embeddings' {kind} (available: {_listing(others)})")


class EmbeddingFile:
    """One declared embedding file: its matrix (rows read on demand), optional row ids, and its recipe.

    Construction checks the declaration and the file's layout (members, shapes) without reading the rows.
    """

    def __init__(self, decl: Mapping[str, Any] | str | os.PathLike, *, where: str, base_dir: str | Path = ".") -> None:
        if not isinstance(decl, Mapping):
            decl = {"path": decl}
        unknown = sorted(set(decl) - set(DECL_KEYS))
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {unknown} for an embedding file; allowed: {list(DECL_KEYS)}")
        if "path" not in decl:
            raise ConfigError(f"{where}.path: required (the embedding file)")
        self.where = where
        self.path = _resolve(decl["path"], f"{where}.path", Path(base_dir))
        fmt = decl.get("format")
        if fmt is None:
            fmt = SUFFIXES.get(self.path.suffix.lower())
            if fmt is None:
                raise ConfigError(f"{where}.format: cannot tell the format of {self.path} from its suffix; "
                                  f"declare one of {list(FORMATS)}")
        elif fmt not in FORMATS:
            raise ConfigError(f"{where}.format: must be one of {list(FORMATS)}, got {fmt!r}")
        self.format = fmt
        for member_key in ("key", "dataset", "column"):
            if decl.get(member_key) is not None and MEMBER_KEYS[fmt] != member_key:
                allowed = MEMBER_KEYS[fmt]
                raise ConfigError(f"{where}.{member_key}: applies to {_MEMBER_FORMAT[member_key]} files, not {fmt}"
                                  + (f" (a {fmt} file's matrix is named by {allowed})" if allowed else ""))
        for key in ("ids", "key", "dataset", "column"):
            value = decl.get(key)
            if value is not None and (not isinstance(value, str) or not value):
                raise ConfigError(f"{where}.{key}: must be a non-empty string, got {value!r}")
        self.ids_member = decl.get("ids")
        if self.ids_member is not None and fmt == "npy":
            raise ConfigError(f"{where}.ids: an .npy file holds one array; give the row ids in a separate file "
                              "with ids_path")
        self.ids_path = None if decl.get("ids_path") is None else _resolve(decl["ids_path"], f"{where}.ids_path",
                                                                           Path(base_dir))
        if self.ids_member is not None and self.ids_path is not None:
            raise ConfigError(f"{where}: declare the row ids once: ids (inside the file) or ids_path (a separate file)")
        given = decl.get(MEMBER_KEYS[fmt]) if MEMBER_KEYS[fmt] else None
        self.member, self.n_rows, self.width = _LAYOUT[fmt](self, given)
        self._matrix: Any = None
        self._ids: tuple[str, ...] | None = None
        self._index: dict[str, int] | None = None

    # ---- identity

    def recipe(self) -> dict[str, Any]:
        """What determines the rows this file yields: its bytes, format and member names (never its path)."""
        return {"format": self.format, "sha256": file_sha256(self.path), "member": self.member,
                "ids": self.ids_member, "ids_sha256": None if self.ids_path is None else file_sha256(self.ids_path)}

    @property
    def has_ids(self) -> bool:
        return self.ids_member is not None or self.ids_path is not None

    def describe(self) -> str:
        return f"{self.path}" + (f"[{self.member!r}]" if self.member else "")

    # ---- row ids

    def row_ids(self) -> tuple[str, ...] | None:
        """The file's row ids as semantic keys (None when it declares none); duplicates are refused."""
        if not self.has_ids:
            return None
        if self._ids is None:
            values = self._read_ids()
            what = f"row ids of {self.ids_path or f'{self.path}[{self.ids_member!r}]'}"
            self._ids = encode_row_ids(values, self.n_rows, what=what)
        return self._ids

    def _read_ids(self) -> list:
        from vertebrae.data.sources.checks import _ID_KINDS, _Column, _values_from_array

        if self.ids_path is not None:
            column = _Column(self.ids_path, "ids", _ID_KINDS)
            if column.length != self.n_rows:
                raise ValidationError(f"ids file {self.ids_path} has {column.length} entries but {self.describe()} has "
                                      f"{self.n_rows} rows")
            return column.read(0, column.length)
        what = f"{self.path}[{self.ids_member!r}]"
        if self.format == "parquet":
            values = _parquet_table(self.path, [self.ids_member]).column(0).to_pylist()
            for i, value in enumerate(values):
                if isinstance(value, bool) or not isinstance(value, (str, int)):
                    raise ValidationError(f"ids in {what}: row {i} is {value!r}; ids must be strings or integers")
            return values
        array = _read_member(self, self.ids_member)
        if array.shape[:1] != (self.n_rows,):
            raise ValidationError(f"ids in {what} have shape {array.shape} but {self.describe()} has {self.n_rows} rows")
        return _values_from_array(array, _ID_KINDS, "ids", what)

    def _row_index(self) -> dict[str, int]:
        if self._index is None:
            self._index = {key: i for i, key in enumerate(self.row_ids() or ())}
        return self._index

    # ---- alignment

    def check_rows(self, row_ids: Sequence[str], *, endpoint: str) -> None:
        """The file covers exactly the endpoint's rows: every id present and no other (or, without ids, as many
        rows); ValidationError naming the file and some of the missing or extra ids."""
        if not self.has_ids:
            if len(row_ids) != self.n_rows:
                raise ValidationError(
                    f"{self.where}: {self.describe()} declares no row ids, so its rows must be endpoint {endpoint!r}'s "
                    f"rows in order; it has {self.n_rows} rows, the endpoint {len(row_ids)} (declare ids or ids_path "
                    "to align by id)")
            return
        index = self._row_index()
        wanted = set(row_ids)
        missing = [rid for rid in row_ids if rid not in index]
        extra = [rid for rid in self.row_ids() or () if rid not in wanted]
        problems = []
        if missing:
            problems.append(f"{len(missing)} of endpoint {endpoint!r}'s row id(s) are missing from it "
                            f"({self._names(missing)})")
        if extra:
            problems.append(f"it holds {len(extra)} row id(s) the endpoint does not have ({self._names(extra)})")
        if problems:
            raise ValidationError(f"{self.where}: {self.describe()}: " + "; ".join(problems))

    @staticmethod
    def _names(keys: Sequence[str]) -> str:
        shown = ", ".join(describe_key(k) for k in keys[:_SHOWN])
        return shown + (f", ... ({len(keys) - _SHOWN} more)" if len(keys) > _SHOWN else "")

    def rows_for(self, row_ids: Sequence[str] | None, positions: tuple[int, int] | None, *, endpoint: str) -> Any:
        """The file's rows for endpoint rows ``row_ids`` (by id), or, for a file without ids, rows
        ``positions = (start, stop)`` of the endpoint (by position)."""
        if not self.has_ids:
            if positions is None:
                raise ValidationError(f"{self.where}: {self.describe()} declares no row ids, and the caller gave no row "
                                      "positions to read")
            start, stop = positions
            if stop > self.n_rows:
                raise ValidationError(
                    f"{self.where}: {self.describe()} declares no row ids and has {self.n_rows} rows, but endpoint "
                    f"{endpoint!r} has rows up to {stop - 1}: the file's rows must be the endpoint's rows in order")
            return self._take(np.arange(start, stop))
        if row_ids is None:
            raise ValidationError(f"{self.where}: {self.describe()} is aligned by row id, and the caller gave no row ids")
        index = self._row_index()
        missing = [rid for rid in row_ids if rid not in index]
        if missing:
            raise ValidationError(f"{self.where}: {len(missing)} of endpoint {endpoint!r}'s row id(s) are missing from "
                                  f"{self.describe()} ({self._names(missing)})")
        return self._take(np.fromiter((index[rid] for rid in row_ids), dtype=np.int64, count=len(row_ids)))

    def _take(self, rows: np.ndarray) -> np.ndarray:
        if self._matrix is None:
            self._matrix = _MATRIX[self.format](self)
        return np.asarray(self._matrix[rows]) if self.format != "hdf5" else _h5_take(self._matrix, rows)


# --------------------------------------------------------------------------------------------------------
# per-format layout (checked at construction) and matrix access


def _check_matrix(shape: tuple[int, ...], dtype: np.dtype, what: str) -> tuple[int, int]:
    if len(shape) != 2:
        raise ValidationError(f"embeddings in {what} must be 2-D (rows x dims), got shape {tuple(shape)}")
    if dtype.kind not in "iuf":
        raise ValidationError(f"embeddings in {what} must be numeric, got dtype {dtype}")
    if shape[0] == 0 or shape[1] == 0:
        raise ValidationError(f"embeddings in {what} are empty (shape {tuple(shape)})")
    return int(shape[0]), int(shape[1])


def _layout_npy(f: EmbeddingFile, given: str | None) -> tuple[str | None, int, int]:
    from vertebrae.data.sources.checks import _npy_header

    shape, dtype = _npy_header(f.path)
    return (None, *_check_matrix(shape, dtype, str(f.path)))


def _open_npz(path: Path) -> Any:
    from vertebrae.data.sources.checks import open_npz

    return open_npz(path, single_array_hint="; use format npy")


def _layout_npz(f: EmbeddingFile, given: str | None) -> tuple[str | None, int, int]:
    from vertebrae.data.sources.checks import READ_ERRORS, _read_npy_header

    with _open_npz(f.path) as archive:
        names = list(archive.files)
        if f.ids_member is not None and f.ids_member not in names:
            raise ConfigError(f"{f.where}.ids: key {f.ids_member!r} not found in {f.path}; available: {_listing(names)}")
        member = _pick_member(names, given, f.ids_member, key="key", path=f.path, where=f.where, kind="key")
        entries = archive.zip.namelist()
        try:
            handle = archive.zip.open(member + ".npy" if member + ".npy" in entries else member)
        except READ_ERRORS as exc:  # a damaged member's local header
            raise ValidationError(f"{f.path}[{member!r}] is not a readable array (truncated or corrupt?): "
                                  f"{exc}") from None
        with handle:
            shape, dtype = _read_npy_header(handle, f"{f.path}[{member!r}]")
    return (member, *_check_matrix(shape, dtype, f"{f.path}[{member!r}]"))


def _h5_names(handle: Any) -> list[str]:
    import h5py

    names: list[str] = []
    handle.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
    return names


def _open_h5(path: Path) -> Any:
    import h5py

    try:
        return h5py.File(path, "r")
    except OSError as exc:
        raise ValidationError(f"{path} is not a readable HDF5 file: {exc}") from None


def _layout_hdf5(f: EmbeddingFile, given: str | None) -> tuple[str | None, int, int]:
    """The matrix and ids must be stored in the file, whose bytes name it (``h5_refuse_indirect``): an external
    link counts as a member, so that it is refused by name rather than reported missing or passed over."""
    from vertebrae.data.sources.hdf5 import h5_external_links, h5_refuse_indirect

    with _open_h5(f.path) as handle:
        if f.ids_member is not None:
            h5_refuse_indirect(handle, f.ids_member, f.path, f"{f.where}.ids")
        names = _h5_names(handle)
        names += [name for name in h5_external_links(handle) if name not in names]
        if f.ids_member is not None and f.ids_member not in names:
            raise ConfigError(f"{f.where}.ids: dataset {f.ids_member!r} not found in {f.path}; available: {_listing(names)}")
        member = _pick_member(names, given, f.ids_member, key="dataset", path=f.path, where=f.where, kind="dataset")
        h5_refuse_indirect(handle, member, f.path, f"{f.where}.dataset")
        ds = handle[member]
        return (member, *_check_matrix(ds.shape, ds.dtype, f"{f.path}[{member!r}]"))


def _pyarrow_parquet(where: str) -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError(f"{where}.format: reading Parquet needs pyarrow (pip install 'vertebrae[models]' or pyarrow)"
                          ) from None
    return pq


def _parquet_table(path: Path, columns: list[str]) -> Any:
    pq = _pyarrow_parquet(str(path))
    try:
        return pq.read_table(path, columns=columns)
    except (OSError, ValueError) as exc:
        raise ValidationError(f"{path} is not a readable Parquet file: {exc}") from None


def _layout_parquet(f: EmbeddingFile, given: str | None) -> tuple[str | None, int, int]:
    pq = _pyarrow_parquet(f.where)
    try:
        meta = pq.ParquetFile(f.path)
    except (OSError, ValueError) as exc:
        raise ValidationError(f"{f.path} is not a readable Parquet file: {exc}") from None
    schema = meta.schema_arrow
    names = list(schema.names)
    if f.ids_member is not None and f.ids_member not in names:
        raise ConfigError(f"{f.where}.ids: column {f.ids_member!r} not found in {f.path}; available: {_listing(names)}")
    member = _pick_member(names, given, f.ids_member, key="column", path=f.path, where=f.where, kind="column")
    import pyarrow as pa

    field = schema.field(member)
    value_type = getattr(field.type, "value_type", None)
    if not (pa.types.is_list(field.type) or pa.types.is_large_list(field.type) or pa.types.is_fixed_size_list(field.type)) \
            or not (pa.types.is_floating(value_type) or pa.types.is_integer(value_type)):
        raise ValidationError(f"column {member!r} of {f.path} must hold lists of numbers (one embedding per row), "
                              f"got {field.type}")
    n = int(meta.metadata.num_rows)
    if n == 0:
        raise ValidationError(f"embeddings in {f.path}[{member!r}] are empty (no rows)")
    width = field.type.list_size if pa.types.is_fixed_size_list(field.type) else -1
    return member, n, width


def _read_member(f: EmbeddingFile, name: str) -> np.ndarray:
    if f.format == "npz":
        with _open_npz(f.path) as archive:
            from vertebrae.data.sources.checks import READ_ERRORS

            try:
                return archive[name]
            except READ_ERRORS as exc:  # a truncated member: zipfile.BadZipFile, EOFError or zlib.error
                raise ValidationError(f"{f.path}[{name!r}] is not a readable array (truncated or corrupt?): "
                                      f"{exc}") from None
    with _open_h5(f.path) as handle:
        return np.asarray(handle[name][()])


def _matrix_parquet(f: EmbeddingFile) -> np.ndarray:
    column = _parquet_table(f.path, [f.member]).column(0).combine_chunks()
    what = f"{f.path}[{f.member!r}]"
    if column.null_count:
        raise ValidationError(f"embeddings in {what}: {column.null_count} row(s) are null")
    lengths = np.asarray(column.value_lengths()) if hasattr(column, "value_lengths") else None
    if lengths is not None and lengths.size and (lengths != lengths[0]).any():
        bad = int(np.flatnonzero(lengths != lengths[0])[0])
        raise ValidationError(f"embeddings in {what}: row {bad} has {lengths[bad]} values, row 0 has {lengths[0]}")
    values = np.asarray(column.flatten())
    width = values.size // max(len(column), 1)
    if width == 0:
        raise ValidationError(f"embeddings in {what} have no dimensions")
    f.width = width
    return values.reshape(len(column), width)


class _H5Rows:
    def __init__(self, path: Path, member: str) -> None:
        self.path, self.member = path, member


def _h5_take(ref: _H5Rows, rows: np.ndarray) -> np.ndarray:
    """Rows in any order: h5py reads increasing unique indices, then they are put in the asked order."""
    if rows.size == 0:
        return np.zeros((0, 0))
    unique, inverse = np.unique(rows, return_inverse=True)
    with _open_h5(ref.path) as handle:
        ds = handle[ref.member]
        if unique.size == unique[-1] - unique[0] + 1:
            block = np.asarray(ds[int(unique[0]):int(unique[-1]) + 1])
        else:
            block = np.asarray(ds[unique])
    return block[inverse]


_LAYOUT = {"npy": _layout_npy, "npz": _layout_npz, "hdf5": _layout_hdf5, "parquet": _layout_parquet}
_MATRIX = {
    "npy": lambda f: np.load(f.path, mmap_mode="r", allow_pickle=False),
    "npz": lambda f: _read_member(f, f.member),
    "hdf5": lambda f: _H5Rows(f.path, f.member),
    "parquet": _matrix_parquet,
}

__all__ = ["DECL_KEYS", "FORMATS", "EmbeddingFile", "file_sha256"]
