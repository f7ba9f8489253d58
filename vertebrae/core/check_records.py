"""Declarations that passed a check, remembered across processes so that a later process need not check them again.

Some checks cost more to run than the work that follows them: ``SklearnExtractor.from_steps`` imports each declared
class and runs scikit-learn's parameter constraints, 1-2 s of imports in every process that plans (each Snakemake
start, each plan job). Inside ``remembered_in(directory)`` (the workflow's planning and its plan jobs use
``checks_dir()``: ``OUT/.vertebrae/checks`` of the run's out folder, ``vertebrae.core.out_folder``) a checker may
record that a declaration passed, with what it found
(``remember``), in a file named by the hash of the check's name, the declaration and the versions of the packages
that decide it (Python's and vertebrae's always); ``recalled`` returns that finding for the same declaration under the
same versions, else None. A missing, unreadable or foreign record is None (check in full); outside the block nothing
is recalled or recorded. The checker decides what may be remembered: only what its declaration and those versions
fully decide.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from vertebrae import __version__
from vertebrae.core.artifacts import atomic_write
from vertebrae.core.fingerprint import canonical_json, sha256_hex
from vertebrae.core.out_folder import state_dir

CHECK_RECORDS_DIR = "checks"  # under the run's state folder (``checks_dir``)
_DIRECTORY: ContextVar[Path | None] = ContextVar("vertebrae_check_records", default=None)


def checks_dir(out: str | Path | None = None) -> Path:
    """``OUT/.vertebrae/checks``: the records of the run whose out folder is ``out`` (None: the current run's)."""
    return state_dir(out) / CHECK_RECORDS_DIR


@contextmanager
def remembered_in(directory: str | Path) -> Iterator[None]:
    """Within the block, checks are recalled from and recorded in ``directory``."""
    token = _DIRECTORY.set(Path(directory))
    try:
        yield
    finally:
        _DIRECTORY.reset(token)


def _versions(packages: Sequence[str]) -> dict[str, str | None]:
    from importlib import metadata

    found: dict[str, str | None] = {"python": platform.python_version(), "vertebrae": __version__}
    for name in packages:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def _record(check: str, declared: Any, packages: Sequence[str]) -> Path | None:
    directory = _DIRECTORY.get()
    if directory is None:
        return None
    key = canonical_json({"check": check, "declared": declared, "versions": _versions(packages)})
    return directory / f"{sha256_hex(key)[:32]}.json"


def recalled(check: str, declared: Any, packages: Sequence[str]) -> Any:
    """What ``remember`` recorded for ``check`` of ``declared`` (JSON values) under the installed ``packages``' and
    this vertebrae's versions; None where nothing is recorded (or outside ``remembered_in``)."""
    path = _record(check, declared, packages)
    if path is None:
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("check") != check or record.get("declared") != declared:
        return None
    return record.get("found")


def remember(check: str, declared: Any, packages: Sequence[str], found: Any) -> None:
    """Record that ``declared`` passed ``check``, finding ``found`` (JSON values); one not written is not kept."""
    path = _record(check, declared, packages)
    if path is None:
        return
    try:
        with atomic_write(path) as tmp:
            Path(tmp).write_text(json.dumps({"check": check, "declared": declared, "found": found}), encoding="utf-8")
    except OSError:
        pass


__all__ = ["CHECK_RECORDS_DIR", "checks_dir", "recalled", "remember", "remembered_in"]
