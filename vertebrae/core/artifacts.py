"""Artifact I/O with verification on every read.

Every artifact carries a manifest (schema, fingerprint, content hash, recipe). Writers go through
:func:`atomic_write`, so nothing half-written ever appears under the final name. Readers check the file,
the schema, the fingerprint (when one is expected), the structure and the content hash, and raise
ArtifactError naming the path and the mismatch: CorruptArtifactError when the file's own bytes are bad
(unreadable, malformed, any h5py failure, a hash mismatch), plain ArtifactError when it is missing or stale.
:func:`move_aside` renames a corrupt file out of the way so that the workflow rebuilds it.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vertebrae.core.errors import ArtifactError, CorruptArtifactError, ValidationError
from vertebrae.core.fingerprint import SCHEMAS, canonical_json, sha256_hex, to_json_value

if TYPE_CHECKING:
    import h5py
    import numpy as np

# numpy, scipy.sparse and h5py are imported by the embedding readers and writers that use them, so that jobs
# writing JSON artifacts only (``vertebrae plan`` runs about fifty times per workflow) start without them.
_FLOAT_DTYPES = ("float32", "float64")


@contextmanager
def atomic_write(path: str | os.PathLike) -> Iterator[str]:
    """Yield a temporary path next to ``path``; on success fsync it and ``os.replace`` it into place.

    Parent directories are created. On any exception the temporary file is deleted and the exception
    re-raised, so ``path`` holds either its previous content or the complete new content.
    """
    path = os.path.abspath(os.fspath(path))
    directory, name = os.path.split(path)
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{name}.tmp-{os.getpid()}-{secrets.token_hex(6)}")
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    with suppress(OSError):  # persist the rename; not possible on every platform
        _fsync(directory)


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fail(path: str, message: str) -> CorruptArtifactError:
    """The file at ``path`` is corrupt: its bytes cannot be what a writer here wrote."""
    return CorruptArtifactError(f"artifact {path}: {message}", path)


def _refuse(path: str, message: str) -> ArtifactError:
    """The file at ``path`` is missing, stale or of another kind (not corrupt: it is left in place)."""
    return ArtifactError(f"artifact {path}: {message}")


def _missing(path: str) -> ArtifactError:
    """A missing artifact; when a job moved it aside as corrupt, the message says where and what to do."""
    import glob

    aside = sorted(glob.glob(glob.escape(path) + ".corrupt-*"))
    if aside:
        return _refuse(path, f"file not found: it was moved aside as corrupt (to {aside[-1]}); run the workflow "
                             "again to rebuild it")
    return _refuse(path, "file not found")


def move_aside(path: str | os.PathLike) -> str:
    """Rename ``path`` to ``<path>.corrupt-<UTC time>`` (``-2``, ``-3``... if taken); return the new path."""
    import time

    path = os.fspath(path)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target, n = f"{path}.corrupt-{stamp}", 1
    while os.path.lexists(target):
        n += 1
        target = f"{path}.corrupt-{stamp}-{n}"
    os.replace(path, target)
    return target


def _check_manifest(path: str, manifest: Any, schema: str, fingerprint: str | None) -> dict:
    """Check a parsed manifest's schema and (when expected) fingerprint; return it."""
    if not isinstance(manifest, dict):
        raise _fail(path, "manifest is not a JSON object")
    if "schema" not in manifest:
        raise _fail(path, f"manifest has no schema, expected {schema!r}")
    if manifest["schema"] != schema:  # another known kind is a valid artifact given in the wrong place
        error = _refuse if manifest["schema"] in SCHEMAS.values() else _fail
        raise error(path, f"unknown schema {manifest['schema']!r}, expected {schema!r}")
    if fingerprint is not None and manifest.get("fingerprint") != fingerprint:
        raise _refuse(path, f"stale artifact: fingerprint {manifest.get('fingerprint')}, expected {fingerprint}")
    return manifest


def _check_fingerprint_arg(fingerprint: Any) -> None:
    if not isinstance(fingerprint, str) or not fingerprint:
        raise ValidationError(f"fingerprint must be a non-empty str, got {fingerprint!r}")



@dataclass(frozen=True)
class EmbeddingArtifact:
    """A verified embedding artifact: ``matrix`` (ndarray or ``scipy.sparse.csr_array``), one row id per row."""

    matrix: Any
    row_ids: tuple[str, ...]
    manifest: dict
    path: str


def _content_hash(fmt: str, dtype: str, shape: Sequence[int], nnz: int | None,
                  arrays: Sequence[np.ndarray], row_ids: Sequence[str]) -> str:
    """SHA-256 over a header (format, dtype, shape, nnz), the arrays' little-endian bytes, then the row ids."""
    import numpy as np

    h = hashlib.sha256()
    header = {"format": fmt, "dtype": dtype, "shape": [int(s) for s in shape], "nnz": nnz}
    h.update(canonical_json(header).encode("utf-8") + b"\n")
    for array in arrays:
        h.update(np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).data)
    h.update(canonical_json(list(row_ids)).encode("utf-8"))
    return h.hexdigest()


def _normalise_matrix(matrix: Any) -> tuple[str, str, Any, list[np.ndarray]]:
    """Return (format, dtype name, matrix, arrays to store and hash); raise ValidationError if unusable."""
    import numpy as np
    import scipy.sparse

    if scipy.sparse.issparse(matrix):
        if matrix.ndim != 2:
            raise ValidationError(f"embedding matrix must be 2-D, got shape {matrix.shape}")
        csr = scipy.sparse.csr_array(matrix, copy=True)  # never mutate the caller's matrix
        if csr.dtype.name not in _FLOAT_DTYPES:
            raise ValidationError(f"embedding matrix dtype must be float32 or float64, got {csr.dtype}")
        csr.sum_duplicates()
        csr.sort_indices()
        arrays = [csr.data.astype(csr.dtype.newbyteorder("="), copy=False),
                  csr.indices.astype(np.int64), csr.indptr.astype(np.int64)]
        return "csr", csr.dtype.name, csr, arrays
    if not isinstance(matrix, np.ndarray):
        raise ValidationError(f"embedding matrix must be a numpy array or scipy sparse matrix, "
                              f"got {type(matrix).__name__}")
    if matrix.ndim != 2:
        raise ValidationError(f"embedding matrix must be 2-D, got shape {matrix.shape}")
    if matrix.dtype.name not in _FLOAT_DTYPES:
        raise ValidationError(f"embedding matrix dtype must be float32 or float64, got {matrix.dtype}")
    dense = np.ascontiguousarray(matrix, dtype=matrix.dtype.newbyteorder("="))
    return "dense", dense.dtype.name, dense, [dense]


def write_embeddings(path: str | os.PathLike, matrix: Any, row_ids: Sequence[str], *, fingerprint: str,
                     recipe: dict, metadata: dict | None = None) -> dict:
    """Atomically write an HDF5 embedding artifact and return its manifest.

    ``matrix``: 2-D float32/float64 ndarray (dtype kept) or scipy sparse matrix (stored as canonical CSR).
    ``row_ids``: one str per row. Raises ValidationError on bad input, before anything is written.
    """
    import h5py
    import numpy as np

    _check_fingerprint_arg(fingerprint)
    fmt, dtype, matrix, arrays = _normalise_matrix(matrix)
    if isinstance(row_ids, (str, bytes)) or not hasattr(row_ids, "__iter__"):
        raise ValidationError(f"row_ids must be a sequence of str, got {type(row_ids).__name__}")
    ids = list(row_ids)
    if len(ids) != matrix.shape[0]:
        raise ValidationError(f"{len(ids)} row ids for a matrix of {matrix.shape[0]} rows")
    for i, rid in enumerate(ids):
        if not isinstance(rid, str):
            raise ValidationError(f"row id at index {i} is {type(rid).__name__} {rid!r}, expected str")
        if rid.endswith("\x00"):
            raise ValidationError(f"row id at index {i} ({rid!r}) ends in a NUL character, which HDF5 cannot keep")
    ids = [str(rid) for rid in ids]
    nnz = int(matrix.nnz) if fmt == "csr" else None
    shape = [int(s) for s in matrix.shape]
    manifest_text = canonical_json({
        "schema": SCHEMAS["embedding"], "fingerprint": fingerprint, "format": fmt, "shape": shape,
        "dtype": dtype, "nnz": nnz, "content_hash": _content_hash(fmt, dtype, shape, nnz, arrays, ids),
        "recipe": recipe, "metadata": metadata or {},
    })
    with atomic_write(path) as tmp, h5py.File(tmp, "w", libver="latest") as f:
        if fmt == "dense":
            f.create_dataset("embeddings", data=arrays[0])
        else:
            group = f.create_group("embeddings")
            group.attrs["shape"] = np.asarray(shape, dtype=np.int64)
            for name, array in zip(("data", "indices", "indptr"), arrays):
                group.create_dataset(name, data=array)
        # fixed-length UTF-8 bytes: variable-length strings live in HDF5's global heap, which has no checksum and
        # where a single damaged byte can make libhdf5 loop forever
        encoded = [rid.encode("utf-8") for rid in ids]
        width = max([1, *map(len, encoded)])
        f.create_dataset("row_ids", data=np.array(encoded, dtype=f"S{width}"))
        f.attrs["manifest"] = manifest_text
        f.attrs["manifest_sha256"] = sha256_hex(manifest_text)  # the manifest's own integrity (older files lack it)
    return json.loads(manifest_text)


@contextmanager
def _open_h5(path: str) -> Iterator[h5py.File]:
    """Open an HDF5 file read-only; a missing file is an ArtifactError, and every failure of h5py while it is
    open or read (a damaged header raises OSError, KeyError, AttributeError, SystemError...) a
    CorruptArtifactError naming the path."""
    import h5py

    if not os.path.isfile(path):
        raise _missing(path)
    try:
        with h5py.File(path, "r") as f:
            yield f
    except ArtifactError:
        raise
    except Exception as exc:  # noqa: BLE001 - any library failure on these bytes means the file is corrupt
        raise _fail(path, f"not a readable HDF5 artifact ({type(exc).__name__}: {exc})") from exc


def _h5_manifest(path: str, f: h5py.File, fingerprint: str | None) -> dict:
    if "manifest" not in f.attrs:
        raise _fail(path, "no manifest attribute")
    text = f.attrs["manifest"]
    if not isinstance(text, (bytes, str)):
        raise _fail(path, f"manifest attribute is a {type(text).__name__}, not text")
    try:
        text = text.decode("utf-8") if isinstance(text, bytes) else str(text)
        manifest = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _fail(path, f"manifest is not valid JSON ({exc})") from exc
    if "manifest_sha256" in f.attrs:
        expected = f.attrs["manifest_sha256"]
        expected = expected.decode("utf-8", "replace") if isinstance(expected, bytes) else str(expected)
        if sha256_hex(text) != expected:
            raise _fail(path, f"manifest hash mismatch: manifest hashes to {sha256_hex(text)}, file says {expected}")
    return _check_manifest(path, manifest, SCHEMAS["embedding"], fingerprint)


def read_manifest(path: str | os.PathLike) -> dict:
    """Parse and return an embedding artifact's manifest (schema checked; content not verified)."""
    path = os.fspath(path)
    with _open_h5(path) as f:
        return _h5_manifest(path, f, None)


def read_embeddings(path: str | os.PathLike, *, fingerprint: str | None) -> EmbeddingArtifact:
    """Load and fully verify an embedding artifact (schema, fingerprint if given, structure, content hash)."""
    import h5py
    import numpy as np
    import scipy.sparse

    path = os.fspath(path)
    with _open_h5(path) as f:
        manifest = _h5_manifest(path, f, fingerprint)
        fmt, dtype, shape, nnz = (manifest.get(k) for k in ("format", "dtype", "shape", "nnz"))
        if fmt not in ("dense", "csr") or dtype not in _FLOAT_DTYPES or not (
                isinstance(shape, list) and len(shape) == 2):
            raise _fail(path, f"manifest format {fmt!r} / dtype {dtype!r} / shape {shape!r} not supported")
        node = f.get("embeddings")
        if fmt == "dense":
            if not isinstance(node, h5py.Dataset):
                raise _fail(path, "format mismatch: manifest says dense, no 'embeddings' dataset")
            stored_shape, stored_dtype, stored_nnz = list(node.shape), node.dtype.name, None
        else:
            if not isinstance(node, h5py.Group) or not {"data", "indices", "indptr"} <= set(node):
                raise _fail(path, "format mismatch: manifest says csr, no 'embeddings' group with "
                                  "data/indices/indptr")
            stored_shape = [int(s) for s in node.attrs.get("shape", [])]
            stored_dtype, stored_nnz = node["data"].dtype.name, int(node["data"].shape[0])
        if stored_shape != shape:
            raise _fail(path, f"shape mismatch: file holds {stored_shape}, manifest says {shape}")
        if stored_dtype != dtype:
            raise _fail(path, f"dtype mismatch: file holds {stored_dtype}, manifest says {dtype}")
        if stored_nnz != nnz:
            raise _fail(path, f"nnz mismatch: file holds {stored_nnz}, manifest says {nnz}")
        if fmt == "dense":
            arrays = [node[()]]
        else:
            arrays = [node["data"][()], node["indices"][()].astype(np.int64), node["indptr"][()].astype(np.int64)]
        if "row_ids" not in f:
            raise _fail(path, "no 'row_ids' dataset")
        row_ids = tuple(r.decode("utf-8") if isinstance(r, bytes) else str(r) for r in f["row_ids"][()].tolist())
    if len(row_ids) != shape[0]:
        raise _fail(path, f"row id count mismatch: {len(row_ids)} row ids for {shape[0]} rows")
    actual = _content_hash(fmt, dtype, shape, nnz, arrays, row_ids)
    if actual != manifest.get("content_hash"):
        raise _fail(path, f"content hash mismatch: content hashes to {actual}, "
                          f"manifest says {manifest.get('content_hash')}")
    matrix = arrays[0]
    if fmt == "csr":
        try:
            matrix = scipy.sparse.csr_array(tuple(arrays), shape=tuple(shape))
            matrix.check_format(full_check=True)
        except ValueError as exc:
            raise _fail(path, f"malformed CSR data ({exc})") from exc
    return EmbeddingArtifact(matrix=matrix, row_ids=row_ids, manifest=manifest, path=path)



def _dump_json(path: str | os.PathLike, data: Any) -> None:
    text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
    with atomic_write(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)


def write_json(path: str | os.PathLike, data: Any) -> None:
    """Atomically write ``data`` as JSON (sorted keys, indent 2); non-finite floats raise ValidationError."""
    _dump_json(path, to_json_value(data))


def _kind_schema(kind: str) -> str:
    if kind not in SCHEMAS:
        raise ValidationError(f"unknown artifact kind {kind!r}; known kinds: {sorted(SCHEMAS)}")
    return SCHEMAS[kind]


def write_json_artifact(path: str | os.PathLike, kind: str, payload: Any, *, fingerprint: str,
                        recipe: Any = None) -> dict:
    """Atomically write ``{"manifest", "payload"}`` JSON for an artifact of ``kind``; return the manifest."""
    schema = _kind_schema(kind)
    _check_fingerprint_arg(fingerprint)
    payload = to_json_value(payload)
    manifest = {"schema": schema, "kind": kind, "fingerprint": fingerprint,
                "content_hash": sha256_hex(canonical_json(payload)),
                "recipe": to_json_value(recipe, "$.manifest.recipe")}
    _dump_json(path, {"manifest": manifest, "payload": payload})
    return manifest


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")

def read_json_artifact(path: str | os.PathLike, kind: str, *, fingerprint: str | None) -> Any:
    """Load a JSON artifact of ``kind`` and return its payload after verifying schema, kind,
    fingerprint (if given) and content hash."""
    schema = _kind_schema(kind)
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise _missing(path)
    try:
        with open(path, encoding="utf-8") as fh:
            document = json.loads(fh.read(), parse_constant=_refuse_constant)
    except (OSError, ValueError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise _fail(path, f"not valid JSON ({exc})") from exc
    if not isinstance(document, dict) or "manifest" not in document or "payload" not in document:
        raise _fail(path, "not a JSON artifact (expected an object with 'manifest' and 'payload')")
    manifest = _check_manifest(path, document["manifest"], schema, None)
    if manifest.get("kind") != kind:
        raise _refuse(path, f"kind mismatch: artifact is {manifest.get('kind')!r}, expected {kind!r}")
    _check_manifest(path, manifest, schema, fingerprint)
    payload = document["payload"]
    actual = sha256_hex(canonical_json(payload))
    if actual != manifest.get("content_hash"):
        raise _fail(path, f"content hash mismatch: payload hashes to {actual}, "
                          f"manifest says {manifest.get('content_hash')}")
    return payload
