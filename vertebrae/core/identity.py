"""Dataset identities: what a dataset *is*, declared explicitly, never guessed from paths.

An identity keys every cache and fingerprint derived from a dataset. Five kinds:

- ``declared(dataset_id, revision)``: the caller vouches that name and revision pin the content (the user owns
  that promise: editing the data without a new revision gives stale results).
- ``from_files(recipe)``: a file-backed source tracked by content, the default of a workflow config without an
  ``identity``: ``recipe`` says how the source reads its files and holds a SHA-256 per file (see
  :mod:`vertebrae.core.file_digests`), so editing any file changes the key ``files:v1:{digest}`` and every
  fingerprint below it. ``v1`` is :data:`FILES_SCHEMA`; a new recipe layout takes a new version.
- ``from_manifest(dataset_id, manifest)``: hashes only the caller-supplied manifest (canonical JSON).
- ``from_content()``: the dataset's full content (features, targets, row ids) is hashed when the
  dataset is built; explicit because it costs a full pass over the data.
- ``ephemeral()``: a random identity for one process; results are never reused across runs.

Independence groups are part of what a dataset is (they change Separatix's cross-validation and what custom
metrics receive): :func:`grouped_key` folds them into the key of a grouped dataset. An ungrouped dataset's key
is its identity's key, unchanged, so no ungrouped fingerprint moved when groups joined the identity.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vertebrae.core.errors import IdentityError
from vertebrae.core.fingerprint import canonical_json, sha256_hex

KINDS = ("declared", "manifest", "content", "ephemeral", "files")
GROUPS_SCHEMA = "vertebrae.groups/v1"
FILES_SCHEMA = "vertebrae.files-identity/v1"
_FILES_VERSION = FILES_SCHEMA.rsplit("/", 1)[1]


def _require_text(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise IdentityError(f"DatasetIdentity {field} must be a non-empty string, got {value!r}")
    return value


def _require_hex(value: Any) -> str:
    """A digest is lowercase hex, so keys that end with it (``manifest:{id}:{digest}``) stay unambiguous."""
    _require_text(value, "digest")
    if any(c not in "0123456789abcdef" for c in value):
        raise IdentityError(f"DatasetIdentity digest must be lowercase hexadecimal, got {value!r}")
    return value


@dataclass(frozen=True)
class DatasetIdentity:
    """An explicit dataset identity; build it with one of the class methods."""

    kind: str
    dataset_id: str | None = None
    revision: str | None = None
    digest: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise IdentityError(f"unknown DatasetIdentity kind {self.kind!r}; expected one of {KINDS}")
        if self.kind == "declared":
            _require_text(self.dataset_id, "dataset_id")
            _require_text(self.revision, "revision")
            if "@" in self.dataset_id:  # the key ``declared:{id}@{revision}`` must name one identity only
                raise IdentityError(f"DatasetIdentity dataset_id must not contain '@', got {self.dataset_id!r}")
        elif self.kind == "manifest":
            _require_text(self.dataset_id, "dataset_id")
            _require_hex(self.digest)
        elif self.kind in ("ephemeral", "files"):
            _require_hex(self.digest)
        elif self.digest is not None:
            _require_hex(self.digest)

    @classmethod
    def declared(cls, dataset_id: str, revision: str) -> DatasetIdentity:
        """Name and revision that the caller guarantees pin the content."""
        return cls("declared", _require_text(dataset_id, "dataset_id"), _require_text(revision, "revision"))

    @classmethod
    def from_manifest(cls, dataset_id: str, manifest: Mapping[str, Any]) -> DatasetIdentity:
        """Identity hashing only ``manifest`` (e.g. file names with their checksums), never the files."""
        _require_text(dataset_id, "dataset_id")
        if not isinstance(manifest, Mapping) or not manifest:
            raise IdentityError(f"DatasetIdentity manifest for {dataset_id!r} must be a non-empty mapping")
        return cls("manifest", dataset_id, None, sha256_hex(canonical_json(dict(manifest))))

    @classmethod
    def from_files(cls, recipe: Mapping[str, Any]) -> DatasetIdentity:
        """Identity of a file-backed source: hashes ``recipe`` (how the source reads its files, with the SHA-256 of
        each file in place of its path) under :data:`FILES_SCHEMA`; the files themselves are hashed by the caller."""
        if not isinstance(recipe, Mapping) or not recipe:
            raise IdentityError("DatasetIdentity files recipe must be a non-empty mapping")
        return cls("files", digest=sha256_hex(canonical_json({"schema": FILES_SCHEMA, "files": dict(recipe)})))

    @classmethod
    def from_content(cls) -> DatasetIdentity:
        """Identity resolved by hashing the full dataset content when the dataset is built."""
        return cls("content")

    @classmethod
    def ephemeral(cls) -> DatasetIdentity:
        """A random identity valid for this process only; disables reuse across runs."""
        return cls("ephemeral", digest=uuid.uuid4().hex)

    @property
    def resolved(self) -> bool:
        """False only for a ``from_content()`` identity whose digest is not computed yet."""
        return not (self.kind == "content" and self.digest is None)

    @property
    def reusable(self) -> bool:
        """Whether artifacts keyed by this identity may be reused by a later run."""
        return self.kind != "ephemeral"

    def with_content_digest(self, digest: str) -> DatasetIdentity:
        """The resolved form of a ``from_content()`` identity."""
        if self.kind != "content":
            raise IdentityError(f"only a content identity takes a content digest, not {self.kind!r}")
        return DatasetIdentity("content", digest=_require_hex(digest))

    def key(self) -> str:
        """Stable text key used in fingerprints, e.g. ``declared:digits@1``."""
        if not self.resolved:
            raise IdentityError("a from_content() identity has no key until its dataset hashes the content")
        if self.kind == "declared":
            return f"declared:{self.dataset_id}@{self.revision}"
        if self.kind == "manifest":
            return f"manifest:{self.dataset_id}:{self.digest}"
        if self.kind == "files":
            return f"files:{_FILES_VERSION}:{self.digest}"
        return f"{self.kind}:{self.digest}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "dataset_id": self.dataset_id, "revision": self.revision, "digest": self.digest}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DatasetIdentity:
        unknown = set(data) - {"kind", "dataset_id", "revision", "digest"}
        if unknown:
            raise IdentityError(f"unknown DatasetIdentity fields: {sorted(unknown)}")
        return cls(data.get("kind"), data.get("dataset_id"), data.get("revision"), data.get("digest"))


def grouped_key(identity_key: str, name: str, group_keys: Sequence[str]) -> str:
    """The identity key of a dataset with independence groups: ``{identity_key}|groups:{digest}``.

    The digest hashes the ungrouped key, the grouping's name and the semantic key of each row's group (in row
    order), so another grouping (or the same groups under another name) gives another key, and every fingerprint
    recipe that holds the key (protocol, fit, embedding, score) differs from the ungrouped dataset's.
    """
    _require_text(identity_key, "key")
    _require_text(name, "groups name")
    keys = [] if isinstance(group_keys, (str, bytes)) else list(group_keys)
    if not keys or not all(isinstance(k, str) for k in keys):
        raise IdentityError(f"groups of {identity_key!r} must be a non-empty sequence of semantic-key strings")
    recipe = {"schema": GROUPS_SCHEMA, "identity": identity_key, "name": name, "groups": keys}
    return f"{identity_key}|groups:{sha256_hex(canonical_json(recipe))}"


def require_identity(identity: Any, *, what: str = "dataset") -> DatasetIdentity:
    """Return ``identity`` or raise: a root dataset must declare what it is."""
    if identity is None:
        raise IdentityError(
            f"{what} has no identity: pass identity=DatasetIdentity.declared(name, revision), "
            "DatasetIdentity.from_manifest(...), DatasetIdentity.from_files(...), DatasetIdentity.from_content() or "
            "DatasetIdentity.ephemeral(); vertebrae never scans paths implicitly (a workflow config without an "
            "identity hashes the files its source declares)"
        )
    if not isinstance(identity, DatasetIdentity):
        raise IdentityError(f"{what} identity must be a DatasetIdentity, got {type(identity).__name__}")
    return identity
