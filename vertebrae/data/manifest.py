"""The import path ``vertebrae.data.manifest`` that earlier docs showed, kept working for users' scripts: the reader
lives in :mod:`vertebrae.data.sources.manifest` (also ``from vertebrae import ManifestSpec, read_manifest``)."""

from vertebrae.data.sources.manifest import ManifestSpec, read_manifest

__all__ = ["ManifestSpec", "read_manifest"]
