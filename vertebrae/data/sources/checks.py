"""What a source loader returns (:class:`SourceData`) and the checks every file loader shares: feature
shapes and dtypes, label/id lengths and dtypes, UTF-8 decoding, ``.npy`` headers and labels/ids files."""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vertebrae.core.errors import ValidationError
from vertebrae.data.sources.keys import _resolve

_FEATURE_KINDS = "iuf"  # numeric feature dtypes: signed/unsigned integers and floats
_LABEL_KINDS = "biufUS"  # bool, numbers, text
_ID_KINDS = "iuUS"  # integers and text
_GROUP_KINDS = _ID_KINDS  # independence groups: integers and text, like row ids
#: What reading a damaged file raises: a truncated or corrupt .npz (a zip archive) fails in zipfile or zlib
READ_ERRORS = (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error)


@dataclass(frozen=True)
class SourceData:
    """Rows of one source: ``features`` (2-D numeric ndarray or scipy.sparse CSR; RawInputs for a manifest),
    ``labels`` (one Python scalar per row), ``row_ids`` (one str/int per row, or None when the source declares
    no ids), ``groups`` (one str/int independence group per row, or None) and ``groups_name`` (the declared
    key, column or dataset the groups come from; a groups file's stem)."""

    features: Any
    labels: list
    row_ids: list | None = None
    groups: list | None = None
    groups_name: str | None = None
    labels_only: str | None = None  # why a table has no feature rows (``features`` is then a zero placeholder)

    @property
    def n_rows(self) -> int:
        return int(self.features.shape[0])


def labels_only_rows(n: int) -> np.ndarray:
    """The placeholder rows of a labels-only table: one zero column per row, never embedded (every candidate of such
    a dataset reads its own rows from a file, which the planner checks)."""
    return np.zeros((n, 1), dtype=np.float32)


def _check_features_meta(shape: tuple[int, ...], dtype: np.dtype, what: str) -> None:
    if len(shape) != 2:
        raise ValidationError(f"features in {what} must be 2-D (rows x dims), got shape {tuple(shape)}")
    if dtype.kind not in _FEATURE_KINDS:
        raise ValidationError(f"features in {what} must be numeric, got dtype {dtype}")
    if shape[0] == 0:
        raise ValidationError(f"features in {what} have no rows (shape {tuple(shape)}); a source needs at least one row")
    if shape[1] == 0:
        raise ValidationError(f"features in {what} have no columns (shape {tuple(shape)})")


def _check_length(length: int, n: int, role: str, what: str, features_what: str) -> None:
    if length != n:
        raise ValidationError(
            f"{role} in {what} have {length} entries but the features in {features_what} have {n} rows"
        )


def _decode(value: Any, what: str, row: int) -> str:
    if isinstance(value, str):
        return value
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        raise ValidationError(f"{what}: row {row} is not valid UTF-8: {value!r}") from None


def _values_from_array(arr: np.ndarray, kinds: str, role: str, what: str, offset: int = 0) -> list:
    """Python scalars from a 1-D array slice (``offset`` = row index of its first item, for messages).

    Labels may also be a 2-D numeric array (a multi-label 0/1 indicator or a multi-output regression target),
    returned as the array itself.
    """
    if arr.ndim == 2 and role == "labels" and arr.dtype.kind in "biuf":
        return np.asarray(arr)
    if arr.ndim != 1:
        raise ValidationError(f"{role} in {what} must be 1-D, got shape {arr.shape}")
    kind = arr.dtype.kind
    if kind == "S" and "S" in kinds:
        return [_decode(v, what, offset + i) for i, v in enumerate(arr.tolist())]
    if kind == "O":  # h5py variable-length strings only (pickled objects are never loaded)
        return [_decode(v, what, offset + i) for i, v in enumerate(arr.tolist())]
    if kind in kinds:
        return arr.tolist()
    raise ValidationError(f"{role} in {what} have unsupported dtype {arr.dtype}")


def _check_aux_meta(shape: tuple[int, ...], dtype: np.dtype, kinds: str, role: str, what: str) -> None:
    if len(shape) == 2 and role == "labels" and dtype.kind in "biuf":
        return
    if len(shape) != 1:
        raise ValidationError(f"{role} in {what} must be 1-D, got shape {tuple(shape)}")
    if dtype.kind not in kinds:
        raise ValidationError(f"{role} in {what} have unsupported dtype {dtype}")


def _read_npy_header(fh: Any, what: str) -> tuple[tuple[int, ...], np.dtype]:
    fmt = np.lib.format
    try:
        version = fmt.read_magic(fh)
        if version == (1, 0):
            shape, _fortran, dtype = fmt.read_array_header_1_0(fh)
        else:
            shape, _fortran, dtype = fmt.read_array_header_2_0(fh)
    except READ_ERRORS as exc:
        raise ValidationError(f"{what} is not a readable .npy array (truncated or corrupt?): {exc}") from None
    return tuple(shape), np.dtype(dtype)


def _npy_header(path: Path) -> tuple[tuple[int, ...], np.dtype]:
    with open(path, "rb") as fh:
        return _read_npy_header(fh, str(path))


def _npy_mmap(path: Path) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise ValidationError(f"{path} is not a readable .npy array: {exc}") from None


def _read_text_lines(path: Path, role: str) -> list[str]:
    try:
        with open(path, encoding="utf-8-sig", newline=None) as fh:
            text = fh.read()
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{role} file {path} is not UTF-8 text: {exc}") from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # trailing newline (or empty file)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            raise ValidationError(f"{role} file {path}: line {number} is blank")
    return lines


class _Column:
    """A labels or ids file (``.npy`` or one-value-per-line text) with its length known up front."""

    def __init__(self, path: Path, role: str, kinds: str) -> None:
        self.path, self.role, self.kinds = path, role, kinds
        self.what = str(path)
        if path.suffix.lower() == ".npy":
            shape, dtype = _npy_header(path)
            _check_aux_meta(shape, dtype, kinds, role, self.what)
            self._array: np.ndarray | None = _npy_mmap(path)
            self._lines: list[str] | None = None
            self.length = int(shape[0])
        else:
            self._array = None
            self._lines = _read_text_lines(path, role)
            self.length = len(self._lines)

    def read(self, start: int, stop: int) -> list:
        if self._lines is not None:
            return self._lines[start:stop]
        assert self._array is not None
        return _values_from_array(np.asarray(self._array[start:stop]), self.kinds, self.role, self.what, start)


def _optional_column(opts: Mapping[str, Any], key: str, role: str, kinds: str, base_dir: Path, where: str, n: int,
                     features_what: str) -> _Column | None:
    path = _resolve(opts, key, base_dir, where)
    if path is None:
        return None
    column = _Column(path, role, kinds)
    _check_length(column.length, n, role, column.what, features_what)
    return column


def _aux_columns(
    opts: Mapping[str, Any], base_dir: Path, where: str, n: int, features_what: str
) -> tuple[_Column, _Column | None, _Column | None]:
    """The labels, ids and groups files of an ``npy`` / ``sparse_npz`` source, each one entry per feature row."""
    labels = _Column(_resolve(opts, "labels_path", base_dir, where), "labels", _LABEL_KINDS)  # type: ignore[arg-type]
    _check_length(labels.length, n, "labels", labels.what, features_what)
    ids = _optional_column(opts, "ids_path", "ids", _ID_KINDS, base_dir, where, n, features_what)
    groups = _optional_column(opts, "groups_path", "groups", _GROUP_KINDS, base_dir, where, n, features_what)
    return labels, ids, groups


def open_npz(path: Path, *, single_array_hint: str = "") -> Any:
    """``np.load`` of an .npz archive without pickles; ValidationError naming ``path`` for an unreadable file or a
    plain .npy (one array), followed by ``single_array_hint``."""
    try:
        archive = np.load(path, allow_pickle=False)
    except READ_ERRORS as exc:  # a truncated archive: zipfile.BadZipFile
        raise ValidationError(f"{path} is not a readable .npz archive (truncated or corrupt?): {exc}") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValidationError(f"{path} is not an .npz archive (it holds a single array){single_array_hint}")
    return archive
