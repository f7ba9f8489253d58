"""Datasets declared in a workflow config: ``{"source": {...}, "identity": {...}}``.

Without ``identity``, a file-backed source is tracked by content: its identity is
``DatasetIdentity.from_files`` of every file it reads (arrays, labels, ids, groups, a manifest and the images it
names; see :mod:`vertebrae.data.sources.files`), each hashed once and cached by path, size and mtime under the
working directory (``.vertebrae/digests.json``), so editing a file changes the fingerprints below it. A declared
``identity`` is ``{kind: declared, name, revision}`` (the user promises that name + revision pin the data: an
edit without a new revision is not noticed), ``{kind: manifest, name, manifest: {...}}`` or ``{kind: content}``
(hashes the whole loaded dataset each time the workflow is planned). A ``sklearn`` source reads no file of the
user's and must declare one. Ephemeral identities make no sense for a workflow whose files outlive the process,
so a config cannot declare one.

A source that declares independence groups (``groups_key``, ``groups_path``, ``groups_dataset`` or
``groups_column``) gives a grouped dataset (``BenchmarkDataset.with_groups``, named after that key); its identity
key folds the groups in, so the plan reads the groups (not the features) to know it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vertebrae.core.arrays import encode_row_ids
from vertebrae.core.errors import ConfigError
from vertebrae.core.file_digests import FileDigests
from vertebrae.core.identity import DatasetIdentity, grouped_key
from vertebrae.core.labels import semantic_key
from vertebrae.data.labelled import BenchmarkDataset, group_keys
from vertebrae.data.declared.names import dataset_name
from vertebrae.data.sources.files import source_files_recipe
from vertebrae.data.sources import load_source, source_groups, source_row_count

# raw rows an extractor embeds (manifest and the formats of source_formats.py: texts or images)
FEATURE_SOURCES = ("sklearn", "csv", "manifest", "image_folder", "hf_dataset", "webdataset")


def identity_from_decl(decl: Mapping[str, Any], *, where: str) -> DatasetIdentity:
    kind = decl.get("kind")
    try:
        if kind == "declared":
            revision = decl.get("revision")
            return DatasetIdentity.declared(decl.get("name"), revision if revision is None else str(revision))
        if kind == "manifest":
            return DatasetIdentity.from_manifest(decl.get("name"), decl.get("manifest"))
        if kind == "content":
            return DatasetIdentity.from_content()
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    raise ConfigError(f"{where}.kind: expected declared, manifest or content, got {kind!r}")


def dataset_identity(decl: Mapping[str, Any], *, base_dir: Path, where: str) -> DatasetIdentity:
    """The identity of a config dataset: its declared ``identity``, else the digest of the files of its source
    (cached under ``base_dir``, see :class:`FileDigests`)."""
    if decl.get("identity") is not None:
        return identity_from_decl(decl["identity"], where=f"{where}.identity")
    digests = FileDigests.under(base_dir)
    recipe = source_files_recipe(decl["source"], base_dir=base_dir, where=f"{where}.source", digests=digests)
    digests.save()
    return DatasetIdentity.from_files(recipe)


def load_declared_dataset(decl: Mapping[str, Any], *, base_dir: Path, where: str) -> BenchmarkDataset:
    """The full, validated dataset of a declaration."""
    data = load_source(decl["source"], base_dir=base_dir, where=f"{where}.source")
    build = BenchmarkDataset.from_arrays if decl["source"]["type"] in FEATURE_SOURCES else BenchmarkDataset.from_embeddings
    dataset = build(data.features, data.labels, identity=dataset_identity(decl, base_dir=base_dir, where=where),
                    row_ids=data.row_ids, target_type=decl.get("target_type", "classification"),
                    label_names=decl.get("label_names"), target_names=decl.get("target_names"),
                    metadata={"name": dataset_name(decl)})
    if data.groups is None:
        return dataset
    return dataset.with_groups(data.groups, name=data.groups_name)


def declared_targets(decl: Mapping[str, Any]) -> dict[str, Any]:
    """The target declaration of a config dataset, as ``BenchmarkDataset.target_declaration`` records it."""
    label_names, target_names = decl.get("label_names"), decl.get("target_names")
    return {
        "target_type": decl.get("target_type", "classification"),
        "label_names": None if label_names is None else [semantic_key(name) for name in label_names],
        "target_names": None if target_names is None else [str(name) for name in target_names],
    }


def declared_row_count(decl: Mapping[str, Any], *, base_dir: Path, where: str) -> int:
    return source_row_count(decl["source"], base_dir=base_dir, where=f"{where}.source")


def load_declared_rows(decl: Mapping[str, Any], *, base_dir: Path, where: str, start: int, stop: int):
    """Inputs and row ids (semantic keys) of rows ``start:stop`` only."""
    data = load_source(decl["source"], base_dir=base_dir, where=f"{where}.source", rows=(start, stop))
    ids = data.row_ids if data.row_ids is not None else range(start, stop)
    return data.features, encode_row_ids(list(ids), stop - start, what=f"{where} rows {start}..{stop - 1}")


def declared_identity_key(decl: Mapping[str, Any], *, base_dir: Path, where: str) -> str:
    """Identity key, as ``load_declared_dataset(...).identity_key()`` gives it: a content identity loads and hashes
    the full dataset; declared groups are read (without the features) and folded in."""
    identity = dataset_identity(decl, base_dir=base_dir, where=where)
    if not identity.resolved:
        return load_declared_dataset(decl, base_dir=base_dir, where=where).identity_key()
    groups = source_groups(decl["source"], base_dir=base_dir, where=f"{where}.source")
    if groups is None:
        return identity.key()
    name, values = groups
    return grouped_key(identity.key(), name, group_keys(values, len(values), lambda i: f"{where}.source: group of row {i}"))
