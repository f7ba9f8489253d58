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


class BudgetError(VertebraeError, MemoryError):
    """A working set that would not fit the configured byte budget."""


class VertebraeWarning(UserWarning):
    """Warnings vertebrae emits (also recorded in results)."""
