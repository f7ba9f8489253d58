"""What a file-backed source reads, as the recipe of its ``files`` identity (``DatasetIdentity.from_files``).

A source's recipe is its declaration with every default filled in and every file replaced by the SHA-256 of its
bytes (from a :class:`~vertebrae.core.file_digests.FileDigests` cache): the arrays, labels, ids and groups files,
a manifest, and, for a manifest of image paths, every image it names (folded, in row order, into one
``images`` digest). The options stay in (``features_key``, ``text_column``, ``label_dtype``...): reading another
array or column of the same file is other data. File names do not: a file moved or renamed with the same bytes
keeps its identity.

``sklearn`` sources read no file of the user's, so they have no recipe (:data:`UNTRACKED_SOURCES`): the workflow
asks them to declare an identity.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError
from vertebrae.core.file_digests import FileDigests
from vertebrae.data.sources.manifest import ManifestSpec, read_manifest
from vertebrae.data.sources.formats import FORMAT_SOURCES, format_recipe
from vertebrae.data.sources.declaration import _PATH_KEYS, _parse_decl, _resolve

UNTRACKED_SOURCES = ("sklearn",)
IMAGES_SCHEMA = "vertebrae.manifest-images/v1"


def manifest_recipe(spec: ManifestSpec, options: Mapping[str, Any], digests: FileDigests) -> dict[str, Any]:
    """A manifest's recipe: ``options`` (its declaration without the path), the manifest file's digest and, for
    image rows, one digest over the digests of every image file in row order."""
    recipe = {**{k: v for k, v in options.items() if k != "path"}, "path": {"sha256": digests.digest(spec.path)}}
    if spec.kind == "image":
        images = hashlib.sha256(f"{IMAGES_SCHEMA}|".encode())
        paths = read_manifest(spec).inputs.values
        for path in paths:
            images.update(digests.digest(path).encode())
        recipe["images"] = {"count": len(paths), "sha256": images.hexdigest()}
    return recipe


def source_files_recipe(decl: Mapping[str, Any], *, base_dir: Path, where: str, digests: FileDigests) -> dict[str, Any]:
    """The ``files`` identity recipe of a labelled source declaration (see the module docstring).

    ConfigError naming ``where`` for a source that reads no files (``sklearn``), an invalid declaration or a
    missing file.
    """
    kind, opts = _parse_decl(decl, where)
    if kind in UNTRACKED_SOURCES:
        raise ConfigError(f"{where}: a {kind!r} source reads no data file to track; declare the dataset's identity "
                          "(identity: {kind: declared, name: ..., revision: ...} or {kind: content})")
    if kind in FORMAT_SOURCES:
        return format_recipe(kind, opts, Path(base_dir), where, digests)
    if kind == "manifest":
        spec = ManifestSpec.from_decl(opts, base_dir=Path(base_dir), where=where)
        return {"type": kind, **manifest_recipe(spec, opts, digests)}
    recipe: dict[str, Any] = {"type": kind}
    for key, value in opts.items():
        if key in _PATH_KEYS and value is not None:
            value = {"sha256": digests.digest(_resolve(opts, key, Path(base_dir), where))}
        recipe[key] = value
    return recipe


__all__ = ["IMAGES_SCHEMA", "UNTRACKED_SOURCES", "manifest_recipe", "source_files_recipe"]
