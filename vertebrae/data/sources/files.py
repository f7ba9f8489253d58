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

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError
from vertebrae.core.file_digests import FileDigests
from vertebrae.data.sources import registry
from vertebrae.data.sources.keys import _PATH_KEYS, _resolve
from vertebrae.data.sources.manifest import IMAGES_SCHEMA, manifest_recipe

#: Source types that read no file of the user's (``tracked=False`` in their format).
UNTRACKED_SOURCES = tuple(kind for kind, fmt in registry.FORMATS.items() if not fmt.tracked)


def source_files_recipe(decl: Mapping[str, Any], *, base_dir: Path, where: str, digests: FileDigests) -> dict[str, Any]:
    """The ``files`` identity recipe of a labelled source declaration (see the module docstring): its format's own
    recipe where it has one (``SourceFormat.files_recipe``), else its options with each file replaced by its digest.

    ConfigError naming ``where`` for a source that reads no files (``sklearn``), an invalid declaration or a
    missing file.
    """
    kind, opts = registry.parse_decl(decl, where)
    fmt = registry.FORMATS[kind]
    if not fmt.tracked:
        raise ConfigError(f"{where}: a {kind!r} source reads no data file to track; declare the dataset's identity "
                          "(identity: {kind: declared, name: ..., revision: ...} or {kind: content})")
    if fmt.files_recipe is not None:
        return fmt.files_recipe(opts, Path(base_dir), where, digests)
    recipe: dict[str, Any] = {"type": kind}
    for key, value in opts.items():
        if key in _PATH_KEYS and value is not None:
            value = {"sha256": digests.digest(_resolve(opts, key, Path(base_dir), where))}
        recipe[key] = value
    return recipe


__all__ = ["IMAGES_SCHEMA", "UNTRACKED_SOURCES", "manifest_recipe", "source_files_recipe"]
