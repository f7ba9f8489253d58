"""Declarations that passed a check, remembered across processes so that a later process need not check them again.

Some checks cost more to run than the work that follows them: ``SklearnExtractor.from_steps`` imports each declared
class and runs scikit-learn's parameter constraints, 1-2 s of imports in every process that plans (each Snakemake
start, each plan job). Inside ``remembered_in(directory)`` (the workflow's planning uses ``checks_dir()``:
``OUT/.vertebrae/checks`` of the run's out folder, ``vertebrae.core.out_folder``) a checker may record that a
declaration passed, with what it found (``remember``), in a file named by the hash of the check's name, the
declaration and the versions of the packages that decide it (Python's and vertebrae's always); ``recalled`` returns
that finding for the same declaration under the same versions, else None. A missing, unreadable or foreign record is
None (check in full); outside the block nothing is recalled or recorded. The checker decides what may be remembered:
only what its declaration and those versions fully decide.

The record folder serves planning only: no job reads it (a job reads only its declared inputs, issue 47). The planner
hands a plan job the records its spec's checks consult (``collecting``, kept in the spec file's text: the
planner's ``vertebrae.stages.plan.with_checks``), and the job recalls from them alone (``given``); a record it is
not given, or one for other versions than the job's, is checked in full.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Iterator, Mapping, Sequence
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
_GIVEN: ContextVar[Mapping[str, Any] | None] = ContextVar("vertebrae_given_records", default=None)
_COLLECTED: ContextVar[dict[str, Any] | None] = ContextVar("vertebrae_collected_records", default=None)


def checks_dir(out: str | Path | None = None) -> Path:
    """``OUT/.vertebrae/checks``: the records of the run whose out folder is ``out`` (None: the current run's)."""
    return state_dir(out) / CHECK_RECORDS_DIR


@contextmanager
def _set(var: ContextVar[Any], value: Any) -> Iterator[None]:
    """``var`` set to ``value`` within the block."""
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


@contextmanager
def remembered_in(directory: str | Path) -> Iterator[None]:
    """Within the block, checks are recalled from and recorded in ``directory``."""
    with _set(_DIRECTORY, Path(directory)):
        yield


@contextmanager
def given(records: Mapping[str, Any]) -> Iterator[None]:
    """Within the block, checks are recalled from ``records`` alone (record name -> record, as ``collecting`` gives
    them) and nothing is recorded: a plan job checks under the records its spec file carries, reading no folder."""
    with _set(_GIVEN, dict(records)):
        yield


@contextmanager
def collecting() -> Iterator[dict[str, Any]]:
    """Within the block, every record recalled or remembered is also put in the dict this yields (record name ->
    record): what ``given`` needs to recall the same checks in another process under the same versions."""
    found: dict[str, Any] = {}
    with _set(_COLLECTED, found):
        yield found


def _versions(packages: Sequence[str]) -> dict[str, str | None]:
    from importlib import metadata

    found: dict[str, str | None] = {"python": platform.python_version(), "vertebrae": __version__}
    for name in packages:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def _name(check: str, declared: Any, packages: Sequence[str]) -> str | None:
    """The record's name (the hash of the check, the declaration and the deciding versions); None where no record is
    read or written (outside ``remembered_in``, ``given`` and ``collecting``)."""
    if _DIRECTORY.get() is None and _GIVEN.get() is None and _COLLECTED.get() is None:
        return None
    key = canonical_json({"check": check, "declared": declared, "versions": _versions(packages)})
    return sha256_hex(key)[:32]


def _read(name: str) -> Any:
    given = _GIVEN.get()
    if given is not None:
        return given.get(name)
    directory = _DIRECTORY.get()
    if directory is None:
        return None
    try:
        return json.loads((directory / f"{name}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def recalled(check: str, declared: Any, packages: Sequence[str]) -> Any:
    """What ``remember`` recorded for ``check`` of ``declared`` (JSON values) under the installed ``packages'`` and
    this vertebrae's versions; None where nothing is recorded (or outside ``remembered_in`` and ``given``)."""
    name = _name(check, declared, packages)
    if name is None:
        return None
    record = _read(name)
    if not isinstance(record, dict) or record.get("check") != check or record.get("declared") != declared:
        return None
    collected = _COLLECTED.get()
    if collected is not None:
        collected[name] = {"check": check, "declared": declared, "found": record.get("found")}
    return record.get("found")


def remember(check: str, declared: Any, packages: Sequence[str], found: Any) -> None:
    """Record that ``declared`` passed ``check``, finding ``found`` (JSON values); one not written is not kept.
    Under ``given`` (a job) nothing is written."""
    name = _name(check, declared, packages)
    if name is None:
        return
    record = {"check": check, "declared": declared, "found": found}
    collected = _COLLECTED.get()
    if collected is not None:
        collected[name] = record
    directory = _DIRECTORY.get()
    if directory is None or _GIVEN.get() is not None:
        return
    try:
        with atomic_write(directory / f"{name}.json") as tmp:
            Path(tmp).write_text(json.dumps(record), encoding="utf-8")
    except OSError:
        pass


__all__ = ["CHECK_RECORDS_DIR", "checks_dir", "collecting", "given", "recalled", "remember", "remembered_in"]
