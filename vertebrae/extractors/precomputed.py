"""Precomputed embeddings: the dataset's own rows, or rows of embedding files aligned to it by row id.

- ``PrecomputedExtractor`` (``{type: precomputed}``): the dataset rows already are embeddings; passed through.
- ``PrecomputedFileExtractor`` (``{type: precomputed, path: ..., ...}``): embeddings computed elsewhere, one file
  per candidate (npy, npz ``key``, HDF5 ``dataset``, Parquet ``column``; row ids from ``ids`` or ``ids_path``, see
  ``vertebrae.data.sources.embedding_files``). For protocols whose endpoints hold different rows (retrieval's query and
  gallery, zero-shot's samples and prompts), ``files: {branch: file declaration}`` gives one file per branch;
  the branches are named like the endpoints (``query`` / ``gallery`` are picked by retrieval on their own;
  zero-shot names them with ``sample_branch`` / ``text_branch``).

A file extractor looks rows up by id: the stage that embeds a batch passes the batch's row ids and its row
positions in the endpoint (``transform(rows, branch=..., row_ids=..., rows=(start, stop))``, announced by
``reads_rows = True``); ``check_rows(row_ids, branch=..., endpoint=...)`` checks a whole endpoint up front (missing
or extra ids, or the row count of a file without ids). Its recipe holds each file's content digest, not its path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.extractors.base import Extractor

FILE_KEYS = ("path", "format", "key", "dataset", "column", "ids", "ids_path")


class PrecomputedExtractor(Extractor):
    """Identity extractor for precomputed embeddings (dense or CSR, dtype kept)."""

    def __init__(self, name: str = "precomputed") -> None:
        self.name = name

    def recipe(self) -> dict[str, Any]:
        return {"type": "precomputed"}

    def transform(self, inputs: Any, *, branch: str | None = None) -> Any:
        return inputs


class PrecomputedFileExtractor(Extractor):
    """Rows of embedding files, looked up by the dataset's row ids (or positions for a file without ids).

    ``files`` maps a branch to an ``EmbeddingFile`` declaration; the branch ``None`` is the one file of a
    branch-less extractor (every endpoint is looked up in it).
    """

    reads_rows = True

    def __init__(self, name: str, files: Mapping[str | None, Any], *, where: str | None = None,
                 base_dir: str | Path = ".") -> None:
        from vertebrae.data.sources.embedding_files import EmbeddingFile

        where = where or f"extractor {name!r}"
        if not isinstance(files, Mapping) or not files:
            raise ConfigError(f"{where}.files: give at least one branch name -> embedding file")
        self.name = name
        self.files: dict[str | None, EmbeddingFile] = {}
        for branch, decl in files.items():
            if branch is not None and (not isinstance(branch, str) or not branch):
                raise ConfigError(f"{where}.files: branch names must be non-empty strings, got {branch!r}")
            at = where if branch is None else f"{where}.files.{branch}"
            self.files[branch] = EmbeddingFile(decl, where=at, base_dir=base_dir)
        if None in self.files and len(self.files) > 1:
            raise ConfigError(f"{where}: declare either one file (path) or one per branch (files), not both")
        self.branches = tuple(b for b in self.files if b is not None)
        self._recipe: dict[str, Any] | None = None

    def recipe(self) -> dict[str, Any]:
        if self._recipe is None:
            if None in self.files:
                self._recipe = {"type": "precomputed", "file": self.files[None].recipe()}
            else:
                self._recipe = {"type": "precomputed", "files": {b: f.recipe() for b, f in sorted(self.files.items())}}
        return self._recipe

    def file_for(self, branch: str | None):
        """The file a branch reads (the one file of a branch-less extractor)."""
        if None in self.files:
            return self.files[None]
        self.check_branch(branch)
        return self.files[branch]

    def check_branch(self, branch: str | None) -> None:
        if self.branches and branch not in self.branches:
            raise ValidationError(f"extractor {self.name!r} reads one file per branch {list(self.branches)}; "
                                  f"got {branch!r} (name the branch: query_branch / gallery_branch, sample_branch / "
                                  "text_branch)")

    def check_rows(self, row_ids: Sequence[str], *, branch: str | None = None, endpoint: str = "samples") -> None:
        """The branch's file covers exactly ``row_ids`` (all of one endpoint, in order); ValidationError otherwise."""
        self.file_for(branch).check_rows(row_ids, endpoint=endpoint)

    def transform(self, inputs: Any, *, branch: str | None = None, row_ids: Sequence[str] | None = None,
                  rows: tuple[int, int] | None = None) -> Any:
        """The file rows of a batch: by ``row_ids`` (semantic keys), or by endpoint positions ``rows`` for a file
        without ids. ``inputs`` (the dataset's own rows) only fixes the batch size."""
        file = self.file_for(branch)
        if row_ids is None and rows is None:
            raise ValidationError(f"extractor {self.name!r} reads rows of {file.describe()} by row id, but was called "
                                  "without the batch's row ids; embed it through vertebrae's stages "
                                  "(embed_rows / embed_endpoint)")
        n = inputs.shape[0] if hasattr(inputs, "shape") else len(inputs)
        if row_ids is not None and len(row_ids) != n:
            raise ValidationError(f"extractor {self.name!r}: {len(row_ids)} row ids for a batch of {n} rows")
        if rows is not None and rows[1] - rows[0] != n:
            raise ValidationError(f"extractor {self.name!r}: rows {rows} for a batch of {n} rows")
        return file.rows_for(row_ids, rows, endpoint=branch or "samples")


def from_decl(name: str, decl: Mapping[str, Any], where: str) -> Extractor:
    """``{type: precomputed}`` (the dataset's rows), ``{type: precomputed, path: ..., key/dataset/column, ids /
    ids_path, format}`` (one file) or ``{type: precomputed, files: {branch: path or {path: ..., ...}}}``."""
    from vertebrae.extractors.torch_runtime import (
        model_options,  # drops the schema's sklearn defaults, refuses others
    )

    foreign = sorted(set(model_options(decl, where=where)) - {*FILE_KEYS, "files"})
    if foreign:
        raise ConfigError(f"{where}: key(s) {foreign} do not apply to type precomputed (it takes path, format, key, "
                          "dataset, column, ids, ids_path or files)")
    single = {k: decl[k] for k in FILE_KEYS if decl.get(k) is not None}
    files = decl.get("files")
    if files is None and not single:
        return PrecomputedExtractor(name)
    if files is not None:
        if single:
            raise ConfigError(f"{where}: declare either path (one file) or files (one per branch), not both "
                              f"(got {sorted(single)} and files)")
        if not isinstance(files, Mapping):
            raise ConfigError(f"{where}.files: must map branch names to embedding files, got {type(files).__name__}")
        return PrecomputedFileExtractor(name, files, where=where)
    if "path" not in single:
        raise ConfigError(f"{where}.path: required with {sorted(single)} (the embedding file to read)")
    return PrecomputedFileExtractor(name, {None: single}, where=where)


__all__ = ["PrecomputedExtractor", "PrecomputedFileExtractor", "from_decl"]
