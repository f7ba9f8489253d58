"""Plan once per Snakemake invocation: the main process's plan, read back by the jobs that re-parse the Snakefile.

A job Snakemake runs elsewhere (each SLURM job re-runs snakemake on the same Snakefile) would otherwise re-plan:
seconds of data identities and estimator checks per job, and, had a data file changed meanwhile, a plan that differs
from the DAG the job belongs to. ``plan_once`` plans in full unless the environment names this invocation's plan:
it writes the plan to ``OUT/.vertebrae/plans/{digest}.json`` (``OUT``: the config's out folder; ``digest``: the config, the text of its files, the working
directory and vertebrae's version) and sets ``VERTEBRAE_PLAN`` to that digest, which every job inherits (the SLURM
plugin submits with ``--export=ALL``). A process that inherits it and computes the same digest reads the file; any
other (a new ``snakemake``, another config, a missing or unreadable file) plans in full. Nothing carries across
invocations: ``snakemake`` started from a shell plans again, but the scikit-learn steps a config declares are checked
once under the same versions (``vertebrae.core.check_records``, in ``OUT/.vertebrae/checks``), and each plan job gets
the records of its own spec's checks in its spec file (``vertebrae.stages.plan.with_checks``): no job reads the folder.

The plan file is a cache, never a job's input: a job that cannot read it (a node without the shared disk, a run on
object storage, ``vertebrae.core.storage``) plans in full and gets the same plan, only later.
"""

from __future__ import annotations

import functools
import gc
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from vertebrae import __version__
from vertebrae.core.artifacts import atomic_write
from vertebrae.core.fingerprint import sha256_hex
from vertebrae.core.check_records import checks_dir, remembered_in
from vertebrae.core.out_folder import config_out, state_dir, writing_to
from vertebrae.planning.dag import WorkflowPlan

PLAN_ENV = "VERTEBRAE_PLAN"
PLAN_DIR = "plans"  # under the run's state folder, OUT/.vertebrae/


def plans_dir(config: Mapping[str, Any]) -> Path:
    """``OUT/.vertebrae/plans`` of the config's out folder (relative to the working directory)."""
    return state_dir(config_out(config)) / PLAN_DIR


def plan_digest(config: Mapping[str, Any], config_files: Iterable[str | Path], base_dir: str | Path) -> str:
    """What a plan depends on besides the data: the config as parsed, its files' text, the directory, the version."""
    texts = []
    for path in config_files:
        try:
            texts.append(Path(path).read_text(encoding="utf-8", errors="replace"))
        except OSError:
            texts.append(None)
    key = {"config": config, "files": texts, "base_dir": os.path.abspath(base_dir), "version": __version__}
    return sha256_hex(json.dumps(key, sort_keys=True, default=repr))[:32]


def _read(path: Path, digest: str) -> WorkflowPlan | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    names = {f.name for f in fields(WorkflowPlan)}
    if not isinstance(data, dict) or data.get("digest") != digest or set(data.get("plan") or ()) != names:
        return None
    return WorkflowPlan(**data["plan"])


def _write(path: Path, digest: str, planned: WorkflowPlan) -> None:
    with atomic_write(path) as tmp:  # synced: a SLURM job on another node reads it
        # its fields hold plain dicts (JSON values): no deep copy (asdict) of a plan that lists 100,000 tar files
        plan = {f.name: getattr(planned, f.name) for f in fields(WorkflowPlan)}
        Path(tmp).write_text(json.dumps({"digest": digest, "plan": plan}), encoding="utf-8")


def plan_once(config: Mapping[str, Any], *, config_files: Iterable[str | Path] = (),
              base_dir: str | Path = ".",
              listed_reports: Callable[[str], Iterable[str]] | None = None) -> WorkflowPlan:
    """``vertebrae.planning.plan(config, ...)``, or this invocation's plan where ``VERTEBRAE_PLAN`` names it
    (``listed_reports``: as ``plan``'s, the out folder's report files listed in the bucket on object storage)."""
    config_files = list(config_files)
    digest = plan_digest(config, config_files, base_dir)
    path = Path(base_dir) / plans_dir(config) / f"{digest}.json"
    if os.environ.get(PLAN_ENV) == digest:
        found = _read(path, digest)
        if found is not None:
            return found
    from vertebrae.planning.planner import plan  # only here: a job that reads the plan imports no planner
    from vertebrae.stages.plan import with_checks

    out = config_out(config)
    with writing_to(out), remembered_in(Path(base_dir) / checks_dir(out)):  # sklearn steps checked once, not per start
        planned = plan(config, base_dir=base_dir, config_files=config_files, listed_reports=listed_reports)
        # the records each plan job's checks recall, in its spec file: no job reads the record folder (issue 47)
        memo: dict = {}
        planned.specs = {fp: with_checks(spec, memo) for fp, spec in planned.specs.items()}
    _write(path, digest, planned)
    os.environ[PLAN_ENV] = digest
    return planned


def plan_where_jobs_run(config: dict[str, Any], *, config_files: Iterable[str | Path] = (),
                        storage_provider: str | None = None, storage_prefix: str | None = None,
                        local_storage_prefix: str | os.PathLike = ".snakemake/storage",
                        argv: Iterable[str] = ()) -> tuple[WorkflowPlan, str]:
    """``(plan, root)``: the Snakefile's plan (``plan_once``) and the folder its jobs work in, ``"."`` without
    object storage. With ``storage_provider`` ``s3`` (``vertebrae run --storage s3://...``): the config's data paths
    are rewritten in place to name objects under ``storage_prefix``, fetched into Snakemake's local copy of it
    (``root``, also set in ``$VERTEBRAE_STORAGE_ROOT`` for the jobs) and planned there
    (``vertebrae.core.storage``). Without it, an ``s3://`` path in the config is refused naming its key."""
    import contextlib

    from vertebrae.core import storage

    root = "."
    files = list(config_files)
    listed_reports = None
    if storage_provider == "s3":
        root = storage.local_root(local_storage_prefix, storage_prefix)
        os.environ[storage.STORAGE_ROOT_ENV] = root
        config.update(storage.under_prefix(config, storage_prefix))
        storage.fetch_data(config, storage_prefix, root, endpoint=storage.endpoint_url(list(argv)))
        from vertebrae.planning.job_files import storage_named_files  # images, tars, model files: named in the data

        storage.fetch_paths(storage_named_files(config, root), storage_prefix, root,
                            endpoint=storage.endpoint_url(list(argv)))
        files = [os.path.abspath(f) for f in files]
        # the report folders other configs wrote: the bucket's (listed, not fetched: the page jobs declare them)
        listed_reports = functools.partial(_listed_reports, storage_prefix, storage.endpoint_url(list(argv)))
    else:
        storage.refuse_urls_without_storage(config, None)
    os.makedirs(root, exist_ok=True)
    with contextlib.chdir(root):  # planned where the jobs find their files
        return plan_once(config, config_files=files, listed_reports=listed_reports), root


def _listed_reports(url: str, endpoint: str | None, out: str) -> list[str]:
    """The objects under ``url``'s ``OUT/reports/`` (``<name>/<file>``): ``plan``'s ``listed_reports`` on storage."""
    from vertebrae.core.storage import list_under

    return list_under(url, f"{out}/reports", endpoint=endpoint)


def freeze_parsed_objects() -> None:
    """Move every object alive now (the plan, the parsed rules, the imported modules: they live as long as the
    process) into the garbage collector's permanent generation (``gc.freeze``), so that the full collections the DAG's
    construction triggers no longer traverse them again each time. Called once, at the end of the Snakefile: a
    10,000-job dry run spent ~1.1 s of its ~10.5 s CPU re-scanning them (docs/performance.md). Nothing is lost: none
    of them would be freed before the process ends."""
    gc.freeze()

