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
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vertebrae.core.errors import ArtifactError, CorruptArtifactError, StaleArtifactError, ValidationError
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


def _stale(path: str, message: str) -> StaleArtifactError:
    """The file at ``path`` is stale or of another kind: readable, but not the input asked for."""
    return StaleArtifactError(f"artifact {path}: {message}", path)


def _missing(path: str) -> ArtifactError:
    """A missing artifact; when a job moved it aside as corrupt, the message says where and what to do."""
    import glob
    aside = sorted(glob.glob(glob.escape(path) + ".corrupt-*"))
    if aside:
        return ArtifactError(f"artifact {path}: file not found: it was moved aside as corrupt (to {aside[-1]}); run "
                             "the workflow again to rebuild it")
    return ArtifactError(f"artifact {path}: file not found")


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
        error = _stale if manifest["schema"] in SCHEMAS.values() else _fail
        raise error(path, f"unknown schema {manifest['schema']!r}, expected {schema!r}")
    if fingerprint is not None and manifest.get("fingerprint") != fingerprint:
        raise _stale(path, f"stale artifact: fingerprint {manifest.get('fingerprint')}, expected {fingerprint}")
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


_CHUNK_TABLE = "row_chunks"
_CHUNK_BYTES = 1 << 16  # the default chunk of a row-range hash: about this many bytes of values


def _chunk_rows(fmt: str, arrays: Sequence[np.ndarray], shape: Sequence[int]) -> int:
    """Rows per hashed chunk: about ``_CHUNK_BYTES`` of stored values (CSR: at the average row's size)."""
    n = max(1, int(shape[0]))
    if fmt == "dense":
        row_bytes = arrays[0].dtype.itemsize * max(1, int(shape[1]))
    else:
        row_bytes = (arrays[0].dtype.itemsize + 8) * max(1, -(-int(arrays[0].shape[0]) // n)) + 8
    return max(1, _CHUNK_BYTES // row_bytes)


def _chunk_hash(fmt: str, dtype: str, width: int, start: int, stop: int, arrays: Sequence[np.ndarray],
                row_ids: Sequence[str]) -> bytes:
    """SHA-256 (32 raw bytes) of rows [start, stop): a header (format, dtype, width, the row range), the rows'
    little-endian bytes (dense: the values; CSR: data, int64 column indices, int64 row lengths), then the rows'
    ids as canonical JSON. ``arrays`` hold exactly those rows."""
    import numpy as np

    h = hashlib.sha256()
    header = {"format": fmt, "dtype": dtype, "width": int(width), "rows": [int(start), int(stop)]}
    h.update(canonical_json(header).encode("utf-8") + b"\n")
    for array in arrays:
        h.update(np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).data)
    h.update(canonical_json([str(r) for r in row_ids]).encode("utf-8"))
    return h.digest()


def _chunk_arrays(fmt: str, arrays: Sequence[np.ndarray], a: int, b: int, base: int = 0) -> list[np.ndarray]:
    """The hashed arrays of rows [a, b) of a stored matrix whose ``arrays`` start at row ``base`` (CSR: data,
    indices, indptr of those rows with indptr's first entry at ``arrays``' first value)."""
    import numpy as np

    if fmt == "dense":
        return [arrays[0][a - base:b - base]]
    data, indices, indptr = arrays
    lo, hi = int(indptr[a - base] - indptr[0]), int(indptr[b - base] - indptr[0])
    return [data[lo:hi], indices[lo:hi].astype(np.int64), np.diff(indptr[a - base:b - base + 1]).astype(np.int64)]


def _chunk_table(fmt: str, dtype: str, shape: Sequence[int], arrays: Sequence[np.ndarray], ids: Sequence[str],
                 chunk: int) -> np.ndarray:
    """(chunks x 32) uint8: the ``_chunk_hash`` of every run of ``chunk`` rows."""
    import numpy as np

    n, width = int(shape[0]), int(shape[1])
    digests = [_chunk_hash(fmt, dtype, width, a, min(a + chunk, n), _chunk_arrays(fmt, arrays, a, min(a + chunk, n)),
                           ids[a:min(a + chunk, n)]) for a in range(0, n, chunk)]
    return np.frombuffer(b"".join(digests), dtype=np.uint8).reshape(len(digests), 32)


def write_embeddings(path: str | os.PathLike, matrix: Any, row_ids: Sequence[str], *, fingerprint: str,
                     recipe: dict, metadata: dict | None = None, chunk_rows: int | None = None) -> dict:
    """Atomically write an HDF5 embedding artifact and return its manifest.

    ``matrix``: 2-D float32/float64 ndarray (dtype kept) or scipy sparse matrix (stored as canonical CSR).
    ``row_ids``: one str per row. Raises ValidationError on bad input, before anything is written.
    Besides the whole-file content hash, the file holds one SHA-256 per fixed run of ``chunk_rows`` rows (by
    default about 64 KiB of values; ``_chunk_hash``) in its ``row_chunks`` dataset, whose own hash is in the
    manifest (``row_chunks``): :func:`read_embedding_rows` verifies exactly the chunks it reads.
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
    chunk = _chunk_rows(fmt, arrays, shape) if chunk_rows is None else int(chunk_rows)
    if chunk < 1:
        raise ValidationError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
    table = _chunk_table(fmt, dtype, shape, arrays, ids, chunk)
    manifest_text = canonical_json({
        "schema": SCHEMAS["embedding"], "fingerprint": fingerprint, "format": fmt, "shape": shape,
        "dtype": dtype, "nnz": nnz, "content_hash": _content_hash(fmt, dtype, shape, nnz, arrays, ids),
        "row_chunks": {"rows": chunk, "count": int(table.shape[0]), "sha256": sha256_hex(table.tobytes())},
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
        f.create_dataset(_CHUNK_TABLE, data=table)
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


def _layout(path: str, f: h5py.File, manifest: dict) -> tuple[str, str, list, int | None, Any]:
    """(format, dtype, shape, nnz, embeddings node) of an open artifact, checked against its manifest."""
    import h5py

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
    if "row_ids" not in f:
        raise _fail(path, "no 'row_ids' dataset")
    if fmt == "csr" and node["indptr"].shape != (shape[0] + 1,):
        raise _fail(path, f"malformed CSR data (indptr holds {node['indptr'].shape} offsets for {shape[0]} rows)")
    return fmt, dtype, shape, nnz, node


def _verified_chunk_table(path: str, f: h5py.File, manifest: dict) -> tuple[int, np.ndarray] | None:
    """(rows per chunk, chunks x 32 table) of an artifact that records row-chunk hashes, the table checked
    against the manifest's hash of it; None for an artifact written without them."""
    info = manifest.get("row_chunks")
    if info is None:
        return None
    if not isinstance(info, dict) or not isinstance(info.get("rows"), int) or info["rows"] < 1:
        raise _fail(path, f"manifest row_chunks {info!r} is malformed")
    node = f.get(_CHUNK_TABLE)
    if node is None or node.dtype.name != "uint8" or node.ndim != 2 or node.shape[1] != 32:
        raise _fail(path, f"no valid {_CHUNK_TABLE!r} dataset of row-chunk hashes")
    table = node[()]
    n = int(manifest["shape"][0])
    if table.shape[0] != -(-n // info["rows"]) or table.shape[0] != info.get("count"):
        raise _fail(path, f"{table.shape[0]} row-chunk hashes for {n} rows in chunks of {info['rows']}")
    if sha256_hex(table.tobytes()) != info.get("sha256"):
        raise _fail(path, "row-chunk hash table mismatch: it does not hash to the manifest's row_chunks.sha256")
    return info["rows"], table


def _decode_ids(raw: Any) -> tuple[str, ...]:
    return tuple(r.decode("utf-8") if isinstance(r, bytes) else str(r) for r in raw.tolist())


def read_embeddings(path: str | os.PathLike, *, fingerprint: str | None) -> EmbeddingArtifact:
    """Load and fully verify an embedding artifact (schema, fingerprint if given, structure, content hash; the
    row-chunk hash table against the manifest when the file has one)."""
    import numpy as np
    import scipy.sparse

    path = os.fspath(path)
    with _open_h5(path) as f:
        manifest = _h5_manifest(path, f, fingerprint)
        fmt, dtype, shape, nnz, node = _layout(path, f, manifest)
        try:  # reported after the content hash, which names the commoner damage
            table_error = _verified_chunk_table(path, f, manifest) and None
        except ArtifactError as exc:
            table_error = exc
        if fmt == "dense":
            arrays = [node[()]]
        else:
            arrays = [node["data"][()], node["indices"][()].astype(np.int64), node["indptr"][()].astype(np.int64)]
        row_ids = _decode_ids(f["row_ids"][()])
    if len(row_ids) != shape[0]:
        raise _fail(path, f"row id count mismatch: {len(row_ids)} row ids for {shape[0]} rows")
    actual = _content_hash(fmt, dtype, shape, nnz, arrays, row_ids)
    if actual != manifest.get("content_hash"):
        raise _fail(path, f"content hash mismatch: content hashes to {actual}, "
                          f"manifest says {manifest.get('content_hash')}")
    if table_error is not None:
        raise table_error
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
                        recipe: Any = None, metadata: Mapping[str, Any] | None = None) -> dict:
    """Atomically write ``{"manifest", "payload"}`` JSON for an artifact of ``kind``; return the manifest.
    ``metadata`` (given: the manifest's ``metadata``) is in no fingerprint and no content hash: what a job measured
    of itself (its seconds, ``vertebrae.core.throughput.COSTS_KEY``), which differs from run to run."""
    schema = _kind_schema(kind)
    _check_fingerprint_arg(fingerprint)
    payload = to_json_value(payload)
    manifest = {"schema": schema, "kind": kind, "fingerprint": fingerprint,
                "content_hash": sha256_hex(canonical_json(payload)),
                "recipe": to_json_value(recipe, "$.manifest.recipe")}
    if metadata is not None:
        manifest["metadata"] = to_json_value(dict(metadata), "$.manifest.metadata")
    _dump_json(path, {"manifest": manifest, "payload": payload})
    return manifest


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")

def read_json_artifact(path: str | os.PathLike, kind: str, *, fingerprint: str | None) -> Any:
    """The payload of :func:`read_json_document`."""
    return read_json_document(path, kind, fingerprint=fingerprint)[1]


def read_json_document(path: str | os.PathLike, kind: str, *, fingerprint: str | None) -> tuple[dict, Any]:
    """(manifest, payload) of a JSON artifact of ``kind``, after verifying schema, kind, fingerprint (if given)
    and content hash (so ``manifest["content_hash"]`` is the payload's)."""
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
        raise _stale(path, f"kind mismatch: artifact is {manifest.get('kind')!r}, expected {kind!r}")
    _check_manifest(path, manifest, schema, fingerprint)
    payload = document["payload"]
    actual = sha256_hex(canonical_json(payload))
    if actual != manifest.get("content_hash"):
        raise _fail(path, f"content hash mismatch: payload hashes to {actual}, "
                          f"manifest says {manifest.get('content_hash')}")
    return manifest, payload
