"""The run's one folder: everything a run writes goes under ``out`` (the config's top-level ``out:``, default
``results``; ``vertebrae run/eval --out DIR`` sets it, as ``snakemake --config out=DIR`` does).

::

    OUT/                         artifacts, reports, pages, summary (vertebrae.planning.paths.LAYOUT)
    OUT/logs/<rule>/...          each job's log; OUT/logs/snakemake/ the progress display's copy of Snakemake's output
    OUT/benchmarks/<rule>/...    Snakemake's benchmark records (run time and memory: the reports' costs)
    OUT/.vertebrae/              the run's own state: specs/ (plan jobs' specs), plans/ (the invocation's plan),
                                 checks/ (declarations that passed a check), digests.json (data files' digests)

Only Snakemake's own ``.snakemake/`` stays in the working folder. Paths are relative to the working folder (an
absolute ``out`` is used as it is); the out folder enters no fingerprint.

The layout before (vertebrae <= 0.x, "old layout") kept ``logs/``, ``benchmarks/`` and ``.vertebrae/`` beside
``results/`` in the working folder. Readers of a results folder (``vertebrae leaderboard``, ``verify``, the costs)
read the records of either: ``records_of`` finds ``OUT/benchmarks`` and else ``benchmarks/`` beside OUT.

Where a process finds its run's folder: ``current_out()``, the folder of the planning under way (``writing_to``), else
``$VERTEBRAE_OUT``, which the workflow sets when it plans so that every job inherits it, else ``results``. The caches
in the state folder (the data files' digests, the check records) serve planning only (``planning_out()``: the
folder of the planning under way, None in a job): a job reads and writes neither, so a job that runs where the
working folder is not (object storage, another node) computes what it needs, its result unchanged.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError

RESULTS = "results"  # the default out folder
LOGS = "logs"
RECORDS = "benchmarks"
STATE = ".vertebrae"
OUT_ENV = "VERTEBRAE_OUT"
OUT_RECORD = "out.json"  # in the state folder: how the run spells its out folder
_CURRENT: ContextVar[str | None] = ContextVar("vertebrae_out", default=None)


def normal_out(out: Any) -> str:
    """``out`` as the rules spell it: a path without a trailing slash or ``./`` (``results`` for none)."""
    if out is None or out == "":
        return RESULTS
    return os.path.normpath(os.fspath(out))


def config_out(config: Mapping[str, Any] | None) -> str:
    """The out folder a config names (``out:``), else ``results``; a value that is not a string is left to the
    schema's check (``results`` here)."""
    out = (config or {}).get("out")
    return normal_out(out) if isinstance(out, str) else RESULTS


@contextmanager
def writing_to(out: str | os.PathLike) -> Iterator[None]:
    """Within the block, ``current_out()`` is ``out`` (planning a config: its data digests are cached there)."""
    token = _CURRENT.set(normal_out(out))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def planning_out() -> str | None:
    """The out folder of the planning under way (``writing_to``), None outside planning (a job, the in-process API):
    the caches of the run's state folder are read and written only while it is set."""
    return _CURRENT.get()


def current_out() -> str:
    """The out folder of the planning under way, else of the workflow this job belongs to (``$VERTEBRAE_OUT``),
    else ``results``."""
    return _CURRENT.get() or normal_out(os.environ.get(OUT_ENV) or None)


def state_dir(out: str | os.PathLike | None = None) -> Path:
    """``OUT/.vertebrae``: the run's own state (``out`` None: ``current_out()``)."""
    return Path(current_out() if out is None else normal_out(out)) / STATE


def logs_dir(out: str | os.PathLike) -> Path:
    return Path(normal_out(out)) / LOGS


def records_dir(out: str | os.PathLike) -> Path:
    """``OUT/benchmarks``: where the workflow's rules write Snakemake's benchmark records."""
    return Path(normal_out(out)) / RECORDS


def records_of(results_dir: str | os.PathLike) -> Path:
    """The benchmark records of a results folder: ``results_dir/benchmarks``, else (a folder of the old layout)
    ``benchmarks/`` beside it."""
    inside = Path(results_dir) / RECORDS
    return inside if inside.is_dir() else Path(results_dir).resolve().parent / RECORDS


def is_out_folder(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` is a run's out folder: it is named ``results`` (the default, and every folder of the old
    layout) or holds a run's state (``.vertebrae/``) and no ``results/`` (a working folder of the old layout holds
    both)."""
    folder = Path(folder)
    return folder.name == RESULTS or (folder / STATE).is_dir() and not (folder / RESULTS).is_dir()


def results_of(records: str | os.PathLike) -> Path:
    """The results folder whose benchmark records are ``records``: the out folder holding them, else (the old
    layout) ``results/`` beside them."""
    parent = Path(records).parent
    return parent if is_out_folder(parent) else parent / RESULTS


def write_out_record(out: str, base_dir: str | os.PathLike = ".") -> None:
    """Record in ``OUT/.vertebrae/out.json`` how the run spells its out folder (the job specs' paths start with it):
    ``vertebrae verify`` reads it to find the working folder the specs are relative to (``spelled_out``)."""
    path = Path(base_dir) / state_dir(out) / OUT_RECORD
    text = json.dumps({"out": normal_out(out)}) + "\n"
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def spelled_out(root: str | os.PathLike) -> str:
    """How the run that wrote the out folder ``root`` spelled it (``write_out_record``); its name where it has no
    record (``results``: the default, and the old layout)."""
    try:
        out = json.loads((Path(root) / STATE / OUT_RECORD).read_text(encoding="utf-8"))["out"]
    except (OSError, ValueError, KeyError, TypeError):
        return Path(os.path.abspath(root)).name
    return out if isinstance(out, str) and out else Path(os.path.abspath(root)).name


def working_folder(root: str | os.PathLike) -> Path:
    """The working folder of the run that wrote the out folder ``root`` (absolute, links unresolved): the folder its
    job specs' relative paths start from. An absolute ``out`` (or one that climbs with ``..``) names no such folder
    by its place: the current folder is taken."""
    root = Path(os.path.abspath(root))
    parts = Path(spelled_out(root)).parts
    if Path(spelled_out(root)).is_absolute() or ".." in parts or len(parts) >= len(root.parts):
        return Path.cwd()
    return root.parents[len(parts) - 1]


def check_out_folder(out: str | os.PathLike, base_dir: str | os.PathLike = ".", where: str = "out") -> None:
    """ConfigError naming ``out`` unless it is a folder the run can write in, or can be made in a folder it can
    write in (relative to ``base_dir``, the working folder)."""
    path = Path(base_dir) / out
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{where}: {out} is not a folder (a file is there); name a folder for the run's results")
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(f"{where}: {out} cannot be made: {probe} is not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"{where}: {out}: the run cannot write in {probe} (permission denied); name a folder it "
                          "can write in")


__all__ = ["LOGS", "OUT_ENV", "OUT_RECORD", "RECORDS", "RESULTS", "STATE", "check_out_folder", "config_out",
           "current_out", "is_out_folder", "logs_dir", "normal_out", "planning_out", "records_dir", "records_of",
           "results_of", "spelled_out", "state_dir", "working_folder", "write_out_record", "writing_to"]
