"""Exception and warning types of vertebrae.

Every error subclasses the built-in it refines, so callers that catch ``ValueError`` or ``MemoryError``
keep working. Messages name the culprit: the row id, endpoint, file, config key, class or prompt.
"""

from __future__ import annotations


class VertebraeError(Exception):
    """Base class of every error vertebrae raises on purpose."""


class ValidationError(VertebraeError, ValueError):
    """Invalid user input: data, labels, identities or arguments."""


class ConfigError(ValidationError):
    """Invalid configuration; the message names the config key."""


class LabelError(ValidationError):
    """A label that cannot be encoded or decoded by the semantic label catalog."""


class IdentityError(ValidationError):
    """A missing or malformed dataset identity."""


class ArtifactError(VertebraeError, ValueError):
    """A corrupt, truncated, stale or unknown-schema artifact; the message names the path."""


class CorruptArtifactError(ArtifactError):
    """An artifact whose own bytes are bad (unreadable, malformed, content hash mismatch); ``path`` is the file.

    Not raised for a stale (other fingerprint) or missing file. The CLI moves such a file aside (see
    ``vertebrae.stages.verify``) so that the next run rebuilds it.
    """

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


class StaleArtifactError(ArtifactError):
    """A readable artifact refused as an input: stale (another fingerprint), of another kind, or foreign (another
    job's); ``path`` is the file. The CLI moves it and what was built from it aside, as for corruption, when it lies
    in a results tree and is not what its own path names (or ``always_move``: built from other inputs than those
    now in place), so that a plain rerun rebuilds it."""

    def __init__(self, message: str, path: str, *, always_move: bool = False) -> None:
        super().__init__(message)
        self.path, self.always_move = path, always_move


class BudgetError(VertebraeError, MemoryError):
    """A working set that would not fit the configured byte budget."""


class VertebraeWarning(UserWarning):
    """Warnings vertebrae emits (also recorded in results)."""
