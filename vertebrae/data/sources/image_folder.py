"""An image folder: one sub-folder per class, as torchvision's ``ImageFolder`` reads it.

``root/<class>/**/<image>``: the classes are the sub-folders of ``root``, sorted by name; the images of a class
are the files under its folder (sub-folders included, symbolic links followed) whose name ends, in any case, with
one of :data:`IMG_EXTENSIONS` (torchvision's list), walked in sorted order, classes in turn. Files with other
endings are skipped, as torchvision skips them. A row's id is its path relative to ``root`` (``cat/0001.png``,
``/`` separators), its label the class folder's name.

Problems name the folder: ``root`` missing or not a folder, no class folder, a class folder without an image
(torchvision refuses it too). The images are only listed here; one that does not decode is refused, naming the
row and the file, when an extractor reads it.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.file_digests import FileDigests
from vertebrae.core.inputs import RawInputs
from vertebrae.data.sources.checks import SourceData
from vertebrae.data.sources.keys import _REQUIRED, SourceFormat, _check_rows

#: The file endings torchvision's ImageFolder accepts (``torchvision.datasets.folder.IMG_EXTENSIONS``).
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
IMAGES_SCHEMA = "vertebrae.image-folder/v1"


@dataclass(frozen=True)
class ImageFolderRows:
    """``paths`` (absolute), ``ids`` (relative paths), ``labels`` (class names) and ``classes`` (sorted)."""

    paths: list[str]
    ids: list[str]
    labels: list[str]
    classes: list[str]


def resolve_folder(path: str | os.PathLike, base_dir: str | os.PathLike, where: str) -> Path:
    folder = Path(path)
    if not folder.is_absolute():
        folder = Path(base_dir) / folder
    if not folder.exists():
        raise ConfigError(f"{where}.path: image folder not found: {folder}")
    if not folder.is_dir():
        raise ConfigError(f"{where}.path: not a folder: {folder} (an image_folder source is a folder of class folders)")
    return folder


def class_folders(root: Path) -> list[str]:
    """The class folders of ``root``, sorted; ValidationError when there is none."""
    with os.scandir(root) as entries:
        classes = sorted(entry.name for entry in entries if entry.is_dir())
    if not classes:
        raise ValidationError(f"image folder {root} has no class folder (expected one sub-folder per class)")
    return classes


def _class_images(folder: str) -> list[str]:
    """Image files under one class folder, in torchvision's order (sorted walk, sorted names)."""
    found = []
    for parent, _, names in sorted(os.walk(folder, followlinks=True)):
        for name in sorted(names):
            if name.lower().endswith(IMG_EXTENSIONS):
                found.append(os.path.join(parent, name))
    return found


def list_image_folder(root: Path) -> ImageFolderRows:
    """Every image of every class (a listing: no image is opened)."""
    classes = class_folders(root)
    paths: list[str] = []
    ids: list[str] = []
    labels: list[str] = []
    prefix = len(os.fspath(root)) + 1
    for name in classes:
        folder = os.path.join(root, name)
        images = _class_images(folder)
        if not images:
            raise ValidationError(f"image folder {root}: class folder {folder} holds no image (accepted endings: "
                                  f"{', '.join(IMG_EXTENSIONS)})")
        paths.extend(images)
        ids.extend(p[prefix:].replace(os.sep, "/") for p in images)
        labels.extend([name] * len(images))
    return ImageFolderRows(paths, ids, labels, classes)


def image_folder_inputs(rows: ImageFolderRows, start: int, stop: int) -> RawInputs:
    return RawInputs("image", tuple(rows.paths[start:stop]), tuple(rows.ids[start:stop]))


def image_folder_recipe(root: Path, digests: FileDigests) -> dict:
    """The ``files`` identity recipe: the class names and one digest over (row id, image SHA-256) of every row."""
    rows = list_image_folder(root.resolve())  # paths under a resolved root: no per-file resolve() (100k images)
    images = hashlib.sha256(f"{IMAGES_SCHEMA}|".encode())
    for rid, path in zip(rows.ids, rows.paths):
        images.update(f"{len(rid)}|{rid}|{digests.digest(path, resolved=True)}|".encode())
    return {"type": "image_folder", "classes": rows.classes,
            "images": {"count": len(rows.paths), "sha256": images.hexdigest()}}


__all__ = ["IMG_EXTENSIONS", "ImageFolderRows", "class_folders", "image_folder_inputs", "image_folder_recipe",
           "list_image_folder", "resolve_folder"]


# --------------------------------------------------------------------------------------------------------
# the ``image_folder`` source type: {"type": "image_folder", "path": <folder>}


def _count(opts: dict[str, Any], base_dir: Path, where: str) -> int:
    return len(list_image_folder(resolve_folder(opts["path"], base_dir, where)).paths)


def _load(opts: dict[str, Any], base_dir: Path, where: str, rows: Any) -> SourceData:
    listed = list_image_folder(resolve_folder(opts["path"], base_dir, where))
    start, stop = _check_rows(rows, len(listed.paths), where)
    return SourceData(image_folder_inputs(listed, start, stop), listed.labels[start:stop], listed.ids[start:stop])


def _files_recipe(opts: dict[str, Any], base_dir: Path, where: str, digests: FileDigests) -> dict[str, Any]:
    return image_folder_recipe(resolve_folder(opts["path"], base_dir, where), digests)


FORMAT = SourceFormat(keys={"path": _REQUIRED}, count=_count, load=_load, files_recipe=_files_recipe)
