"""The commands a user types: ``vertebrae run CONFIG [snakemake args...]``, ``validate CONFIG``, ``status CONFIG`` and
``show CONFIG [BENCHMARK]``.

``run`` runs the workflow vertebrae carries (``vertebrae.workflow.bundled``: from a checkout, the repository's own
``Snakefile``) on CONFIG alone, in the current directory, as a subprocess of the interpreter vertebrae runs in
(``python -m snakemake --snakefile ... --configfile CONFIG``); the extra arguments pass through to Snakemake (a
``--profile NAME`` the user has no profile of goes to the packaged one, ``bundled.profile_args``), whose exit status
it returns. A config file given on the command line
replaces the workflow's default config (the Snakefile reads ``config/config.yaml`` only when none is given), so
CONFIG is the whole config. Snakemake is never imported here: it runs in its own process. A run of jobs is shown by
the progress display (``vertebrae.cli.progress``: Snakemake's output goes to ``OUT/logs/snakemake/``); ``--verbose``
(before CONFIG) prints Snakemake's output instead. Everything the run writes goes under its out folder ``OUT``
(``--out DIR``, else the config's ``out:``, else ``results/``; ``vertebrae.core.out_folder``).

``validate`` checks CONFIG without running a job: the schema and every plan-time check (the same ``plan`` the
Snakefile makes; an error names the file or config key), then prints each benchmark with its candidates, and the
jobs a run would start now, from Snakemake's own dry run (``-n``; what is already built is not counted).

``status`` says, per benchmark, how many of its jobs are done and how many a run would start, by rule, with the
reasons Snakemake gives (missing output, changed params, code or set of inputs, or an input that another job
updates first), all from one ``snakemake --summary`` (every output file of the DAG, its rule, its status and whether
an update is pending). A job belongs to a benchmark when its output is named by a
fingerprint its report spec depends on (through the specs' ``{"fingerprint", "path"}`` references, its comparison
and fanned-out partials included) or lies in its report folder; a job two benchmarks share counts in each; the
cross-benchmark summary belongs to none. "Done" is Snakemake's up to date; ``vertebrae verify`` checks contents.

``show`` prints the plan as a user reads it: each benchmark's protocol, dataset identity, protocol artifact and
report paths, its candidates with the fingerprint and path of their score (and whether it is written), and, once
the report is written, the ranking section of its report.md.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from vertebrae.core.config import require_benchmarks, take_option
from vertebrae.core.errors import ConfigError, VertebraeError
from vertebrae.core.fingerprint import FINGERPRINT_PATTERN
from vertebrae.core.out_folder import check_out_folder, config_out, normal_out
from vertebrae.reports.text import terminal_text
from vertebrae.planning import plan
from vertebrae.workflow.bundled import packaged_profile, profile_args, snakefile
from vertebrae.planning.config import load_config_file
from vertebrae.planning.plan_once import plan_once
from vertebrae.planning.retrieval import check_retrieval_sources
from vertebrae.stages.plan import references
from vertebrae.cli.serving import OFF, serving
from vertebrae.core.job_client import SERVER_ENV

SECTION_KINDS = {"benchmarks": "labelled", "retrieval": "retrieval", "zero_shot": "zero-shot"}


def snakemake_command(config: str | Path | Sequence[str | Path], *args: str) -> list[str]:
    """The Snakemake command line that runs the workflow on ``config`` alone (several files: merged by Snakemake)."""
    configs = [config] if isinstance(config, (str, Path)) else list(config)
    if importlib.util.find_spec("snakemake") is None:
        raise VertebraeError(f"the workflow runs with Snakemake, which this environment ({sys.prefix}) lacks: install "
                             "vertebrae with its workflow extra, pip install 'vertebrae[workflow]'")
    return [sys.executable, "-m", "snakemake", "--snakefile", str(snakefile()), "--configfile",
            *(str(c) for c in configs), *args]


def _configs(config: str | Path | Sequence[str | Path]) -> list[str | Path]:
    return [config] if isinstance(config, (str, Path)) else list(config)


def merged_config(configs: Sequence[str | Path]) -> dict[str, Any]:
    """Several config files merged as Snakemake merges ``--configfile a.yaml b.yaml``: a later file's mapping updates
    the earlier one's key by key, recursively (any other value replaces)."""
    def update(base: dict[str, Any], new: Any) -> dict[str, Any]:
        for key, value in new.items():
            base[key] = update(dict(base[key]), value) if isinstance(value, dict) and isinstance(
                base.get(key), dict) else value
        return base

    merged: dict[str, Any] = {}
    for config in configs:
        merged = update(merged, load_config_file(_config_file(config)))
    return merged


def _config_file(config: str | Path) -> Path:
    path = Path(config)
    if not path.is_file():
        raise ConfigError(f"config file {config} not found (relative paths are read from {Path.cwd()})")
    return path


def run_workflow(config: str | Path | Sequence[str | Path], snakemake_args: Sequence[str] = (), verbose: bool = False,
                 resume: str | None = None, out: str | None = None) -> int:
    """``vertebrae run CONFIG... [--out DIR] [snakemake args]``: Snakemake's exit status; each config is read as data
    first (``load_config_file``: no YTE, bounded aliases) so that Snakemake never sees a file vertebrae refuses.

    ``out`` (``--out DIR``, before or after CONFIG): the run's one folder, given to Snakemake as ``--config out=DIR``
    (the config key ``out``, ``vertebrae.core.out_folder``); refused at once, naming it, where it is a file or a
    folder the run cannot write in. A run of jobs is shown by the progress display (``vertebrae.cli.progress``;
    Snakemake's own output goes to a file under ``OUT/logs/snakemake/`` that it names); ``verbose``, Snakemake's own
    ``--verbose`` or ``--quiet``, and every invocation that runs no job (a dry run, ``--version``, ``--summary``,
    ``--unlock``, ... ``PASS_THROUGH``) print Snakemake's output as it is. ``resume``: the command that resumes an
    interrupted run (default: this one)."""
    given, snakemake_args = out_option(snakemake_args)
    out = given if out is None else out
    merged = merged_config(_configs(config))
    require_benchmarks(merged, _configs(config))  # an empty config: say what it lacks
    storage, snakemake_args = storage_args(merged, snakemake_args)
    workdir = _workdir(snakemake_args)
    if out is not None:
        check_out_folder(normal_out(out), workdir, where="--out")
    folder = normal_out(out) if out is not None else _config_out_arg(snakemake_args) or config_out(merged)
    command = snakemake_command(config, *with_out(profile_args(snakemake_args), out))
    if str(packaged_profile("slurm")) in command:  # the test cluster's account and partition, not the user's site's
        from vertebrae.workflow.slurm_profile import UNSET

        print(UNSET, file=sys.stderr)
    if _dry_run(snakemake_args):  # runs no job: a job server would only take CPU from Snakemake's start
        return subprocess.call(command)
    shown = verbose or _passes_through(snakemake_args)
    # warm processes for the scoring and bookkeeping jobs; none on object storage (each job works in its own copies)
    with serving(dict(os.environ, **({SERVER_ENV: OFF} if storage else {}))) as environ:
        if shown:
            return subprocess.call(command, env=environ)
        from vertebrae.cli.progress import watch

        again = [*(["--out", out] if out is not None else []), *map(str, _configs(config)), *snakemake_args]
        resume = resume or shlex.join(["vertebrae", "run", *again])
        return watch(command, environ, resume=resume, root=workdir, out=folder)


def storage_args(config: dict[str, Any], snakemake_args: Sequence[str]) -> tuple[str | None, list[str]]:
    """``--storage s3://BUCKET/PREFIX`` (after CONFIG) checked before any job starts (``core.storage.check_storage``:
    reachable, credentials, bucket, write access) and replaced by the Snakemake flags it stands for; a credential
    flag refused (Snakemake logs its command line); an ``s3://`` path in a config run without a storage provider
    refused, naming its key. Returns the storage URL (None: none) and the arguments."""
    from vertebrae.core import storage as objects

    url, args = objects.storage_option(snakemake_args)
    objects.refuse_secret_flags(args)
    if url is None:
        if objects.flag_value(args, "--default-storage-provider") is None:
            objects.refuse_urls_without_storage(config, None)
        return None, args
    objects.check_storage(url, endpoint=objects.endpoint_url(args))
    return url, [*objects.snakemake_flags(url), *args]


def out_option(snakemake_args: Sequence[str]) -> tuple[str | None, list[str]]:
    """``--out DIR`` (or ``--out=DIR``) taken out of the arguments after CONFIG (before a ``--``): vertebrae's, not
    Snakemake's (which would read it as an abbreviation of its --output-wait); the last one given wins."""
    out, rest = take_option(snakemake_args, "--out", "--out: name the folder the run writes in (--out DIR)")
    if out is not None and not out.strip():
        raise ConfigError("--out: name the folder the run writes in (--out DIR), not an empty name")
    return out, rest


def with_out(snakemake_args: Sequence[str], out: str | None) -> list[str]:
    """Snakemake's arguments with ``out=DIR`` among its ``--config`` values (the config key ``out``; quoted, so that
    ``--out 2024`` stays a folder name, not a number); unchanged without ``out``."""
    args = list(snakemake_args)
    if out is None:
        return args
    entry = f"out={json.dumps(normal_out(out))}"
    for flag in ("--config", "-C"):  # the user's own --config: Snakemake keeps the last one, so join it
        if flag in args:
            index = args.index(flag) + 1
            return [*args[:index], entry, *args[index:]]
    return ["--config", entry, *args]


def _config_out_arg(snakemake_args: Sequence[str]) -> str | None:
    """The ``out=DIR`` of a ``--config`` given to Snakemake (``vertebrae run CONFIG --config out=DIR``), if any."""
    found, inside = None, False
    for arg in snakemake_args:
        if arg in ("--config", "-C"):
            inside = True
        elif arg.startswith("-"):
            inside = False
        elif inside and arg.startswith("out="):
            found = normal_out(arg.partition("=")[2].strip("'\""))
    return found


#: Snakemake arguments after which ``vertebrae run`` shows Snakemake's output as it is: they run no job (a listing, a
#: summary, a report, an unlock, ...) or ask Snakemake for its own way of printing (--verbose, --quiet)
PASS_THROUGH = frozenset({
    "-h", "--help", "--version", "-v", "--verbose", "--quiet", "-q", "--debug", "--debug-dag", "--summary", "-S",
    "--detailed-summary", "-D", "--list-rules", "--list", "-l", "--list-target-rules", "--lt", "--lint", "--dag",
    "--rulegraph", "--filegraph", "--d3dag", "--report", "--report-stylesheet", "--unlock", "--cleanup-metadata",
    "--cm", "--cleanup-shadow", "--list-changes", "--lc", "--list-input-changes", "--li", "--list-params-changes",
    "--lp", "--list-code-changes", "--list-untracked", "--lu", "--delete-all-output", "--delete-temp-output",
    "--archive", "--containerize", "--export-cwl", "--print-compilation", "--conda-create-envs-only",
    "--conda-cleanup-envs", "--list-conda-envs", "--generate-unit-tests", "--touch", "-t", "--mode",
})


def _passes_through(snakemake_args: Sequence[str]) -> bool:
    return any(a.partition("=")[0] in PASS_THROUGH for a in snakemake_args)


def _dry_run(snakemake_args: Sequence[str]) -> bool:
    """Whether Snakemake's arguments ask for a dry run: ``-n``, ``--dry-run``/``--dryrun``, or ``-n`` among
    clustered short flags (``-np``)."""
    return any(a in ("--dry-run", "--dryrun") or (a.startswith("-") and not a.startswith("--") and a[1:].isalpha()
                                                  and "n" in a[1:]) for a in snakemake_args)


def _workdir(snakemake_args: Sequence[str]) -> Path:
    """Snakemake's working folder: ``--directory DIR`` / ``-d DIR`` among its arguments, else the current one."""
    found, it = Path("."), iter(snakemake_args)
    for arg in it:
        if arg in ("--directory", "-d"):
            found = Path(next(it, "."))
        elif arg.startswith("--directory="):
            found = Path(arg.partition("=")[2])
    return found


def job_table(dry_run_stdout: str) -> dict[str, int]:
    """Rule -> job count from the table ``snakemake -n --quiet rules`` prints (its ``total`` line left out)."""
    counts: dict[str, int] = {}
    in_table = False
    for line in dry_run_stdout.splitlines():
        parts = line.split()
        if parts[:2] == ["job", "count"]:
            in_table = True
        elif in_table and len(parts) == 2 and parts[1].isdigit():
            if parts[0] == "total":
                break
            counts[parts[0]] = int(parts[1])
    return counts


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _benchmarks(planned) -> list[tuple[str, str, str, str]]:
    """``(section, protocol kind, name, report spec fingerprint)`` of every benchmark, in config order."""
    reports = {"benchmarks": planned.reports, "retrieval": planned.retrieval_reports,
               "zero_shot": planned.zero_shot_reports}
    return [(section, kind, name, fp)
            for section, kind in SECTION_KINDS.items() for name, fp in reports[section].items()]


def _views_text(plan, name: str) -> str:
    """``; views species (primary), site (nuisance), ...`` of a labelled benchmark with target views, else ``""``."""
    fp = getattr(plan, "views", {}).get(name)
    if fp is None:
        return ""
    spec = plan.spec(fp)
    words = []
    for view in spec["views"]:
        what = ["primary"] if view["view"] == spec["primary"] else [] if view["role"] == "task" else ["nuisance"]
        what += [] if view.get("level") is None else [f"level {view['level'] + 1}"]
        what += [] if view.get("alias") is None else [f"= {view['alias']}"]
        words.append(f"{view['view']}" + (f" ({', '.join(what)})" if what else ""))
    return f"; views {', '.join(words)}"


def _title(kind: str, section: str, name: str) -> str:
    """``labelled benchmark toy (benchmarks.toy)``; a target view's report ``toy@site``: ``labelled benchmark toy,
    view site (benchmarks.toy)``."""
    if "@" in name:
        base, view = name.split("@", 1)
        return f"{kind} benchmark {base}, view {view} ({section}.{base})"
    return f"{kind} benchmark {name} ({section}.{name})"


def describe(plan) -> list[str]:
    """One line per benchmark: its protocol, name and candidates, in config order; a labelled benchmark's target
    views (reports ``BENCH@VIEW``) on its line, not as benchmarks of their own."""
    lines = []
    for section, kind, name, fp in _benchmarks(plan):
        if "@" in name:  # a target view's report (planning.views.VIEW_SEPARATOR): listed with its benchmark
            continue
        names = [candidate["name"] for candidate in plan.spec(fp)["candidates"]]
        lines.append(f"  {kind} benchmark {name} ({section}.{name}): {_count(len(names), 'candidate')}: "
                     f"{', '.join(names)}{_views_text(plan, name)}")
    return lines


def validate(config: str | Path | Sequence[str | Path]) -> int:
    """``vertebrae validate CONFIG...``: 0 when CONFIG (several: merged as Snakemake merges them) plans and
    Snakemake's dry run succeeds; a plan error is raised (the CLI prints it as one line, exit status 2); a failed dry
    run prints Snakemake's message and returns 2."""
    path = _configs(config)
    merged = merged_config(path)
    require_benchmarks(merged, path)
    from vertebrae.core.storage import refuse_urls_without_storage

    refuse_urls_without_storage(merged, None)  # data in a bucket: checked by `vertebrae run CONFIG --storage URL -n`
    # relative paths in the config resolve against the current directory; the plan is written for Snakemake's dry
    # run below to read back (``plan_once``: the same config, files and folder give the same digest)
    planned = plan_once(merged, config_files=path)
    check_retrieval_sources(merged)  # relevance files parsed and checked against the rows, before any job
    config = " ".join(str(c) for c in path)
    lines = describe(planned)
    if not lines:
        raise ConfigError(f"config file {config}: no benchmark under any of {', '.join(SECTION_KINDS)}")
    proc = subprocess.run(snakemake_command(path, "--dry-run", "--quiet", "rules"), capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"vertebrae: error: {config}: Snakemake's dry run failed:\n{(proc.stdout + proc.stderr)[-4000:]}",
              file=sys.stderr)
        return 2
    jobs = job_table(proc.stdout)
    print(f"{config}: valid; {_count(len(lines), 'benchmark')}")
    print("\n".join(lines))
    detail = ", ".join(f"{rule} {count}" for rule, count in jobs.items())
    print(f"jobs to run now: {sum(jobs.values())}" + (f" ({detail})" if detail else " (everything is up to date)"))
    return 0


WORKFLOW_WIDE = "not of one benchmark (the cross-benchmark summary)"


def _refs(value: Any) -> Iterator[str]:
    """The fingerprints of every ``{"fingerprint", "path"}`` reference inside a spec (a compressed endpoint's
    ``<pair fingerprint>/<side>``: its pair's)."""
    return (ref["fingerprint"].split("/")[0] for ref in references(value) if isinstance(ref["fingerprint"], str))


def benchmark_fingerprints(planned) -> dict[str, set[str]]:
    """Benchmark name -> every fingerprint its report depends on (its report and comparison specs included)."""
    merges: dict[str, list[str]] = {}
    for partial, merge in planned.fanouts.items():
        merges.setdefault(merge, []).append(partial)
    found = {}
    for _, _, name, report in _benchmarks(planned):
        seen: set[str] = set()
        queue = [report, *([planned.comparisons[report]] if report in planned.comparisons else [])]
        while queue:
            fp = queue.pop()
            if fp in seen:
                continue
            seen.add(fp)
            queue += [*_refs(planned.specs.get(fp, {})), *merges.get(fp, ())]
        found[name] = seen
    return found


UPSTREAM = "an input is updated by another job"


def summary_rows(summary_stdout: str) -> list[tuple[str, str, str | None]]:
    """``(output file, rule, why it is to be updated or None)`` of every row of ``snakemake --summary``: Snakemake's
    status ("missing" output, "set of input files changed", "params changed", ...) when it is not "ok",
    ``UPSTREAM`` when it is "ok" but an update is pending (a job it reads runs first), None when no update is
    pending."""
    rows, header = [], None
    for line in summary_stdout.splitlines():
        cells = line.split("\t")
        if cells[0] == "output_file":
            header = cells
        elif header is not None and len(cells) == len(header):
            row = dict(zip(header, cells))
            status = {"ok": UPSTREAM, "missing": "missing output"}.get(row["status"], row["status"])
            rows.append((row["output_file"], row["rule"], None if row["plan"] == "no update" else status))
    return rows


def _job_key(rule: str, path: str) -> tuple[str, str]:
    """The job that writes ``path``: a shard is one job; other outputs of a rule group by the fingerprint their
    name or folder carries (a report folder, a compressed pair, the summary: by folder)."""
    p = PurePosixPath(path)
    if p.name.startswith("shard-") or FINGERPRINT_PATTERN.fullmatch(p.stem):
        return rule, path
    return rule, str(p.parent)


def _owners(path: str, fingerprints: dict[str, set[str]]) -> list[str]:
    p = PurePosixPath(path)
    if p.parent.parent.name == "reports" and p.parent.name in fingerprints:
        return [p.parent.name]
    fp = p.stem if FINGERPRINT_PATTERN.fullmatch(p.stem) else p.parent.name if FINGERPRINT_PATTERN.fullmatch(p.parent.name) else None
    return [name for name, fps in fingerprints.items() if fp is not None and fp in fps] or [WORKFLOW_WIDE]


def _rule_counts(jobs: dict[tuple[str, str], list[str] | None]) -> dict[str, dict[str, Any]]:
    """Per rule of one benchmark: jobs done, to run, and why (reason -> jobs), in first-seen order."""
    rules: dict[str, dict[str, Any]] = {}
    for (rule, _), reasons in jobs.items():
        entry = rules.setdefault(rule, {"done": 0, "to_run": 0, "why": Counter()})
        if reasons is None:
            entry["done"] += 1
        else:
            entry["to_run"] += 1
            entry["why"].update(reasons)
    return rules


def _rule_table(jobs: dict[tuple[str, str], list[str] | None]) -> list[str]:
    """The per-rule lines of one benchmark: done, to run, and why (reason counts)."""
    rules = _rule_counts(jobs)
    width = max(len("rule"), *(len(rule) for rule in rules))
    lines = [f"    {'rule':<{width}}  done  to run  why"]
    for rule, entry in rules.items():
        text = ", ".join(f"{reason} ({n})" for reason, n in entry["why"].items())
        lines.append(f"    {rule:<{width}}  {entry['done']:>4}  {entry['to_run']:>6}  {text}".rstrip())
    return lines


def _print_json(document: Any) -> None:
    print(json.dumps(document, indent=2))


def status(config: str | Path, json_output: bool = False) -> int:
    """``vertebrae status``: per benchmark, its jobs by rule, done and to run with Snakemake's reasons; 0, or 2 when
    Snakemake fails (its message printed). ``json_output``: the same as one JSON document ``{"config", "jobs",
    "done", "to_run", "benchmarks": [{"name", "section", "kind", "jobs", "done", "to_run", "rules": {rule: {"done",
    "to_run", "why": {reason: jobs}}}}]}``, the cross-benchmark jobs under the name null."""
    path = _config_file(config)
    planned = plan(load_config_file(path))
    benchmarks = _benchmarks(planned)
    if not benchmarks:
        raise ConfigError(f"config file {config}: no benchmark under any of {', '.join(SECTION_KINDS)}")
    proc = subprocess.run(snakemake_command(path, "--summary"), capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"vertebrae: error: {config}: Snakemake failed:\n{(proc.stdout + proc.stderr)[-4000:]}", file=sys.stderr)
        return 2
    jobs: dict[tuple[str, str], list[str] | None] = {}
    owners: dict[tuple[str, str], list[str]] = {}
    fingerprints = benchmark_fingerprints(planned)
    for output, rule, why in summary_rows(proc.stdout):
        key = _job_key(rule, output)
        if why is not None:
            jobs[key] = [*dict.fromkeys([*(jobs.get(key) or []), why])]
        else:
            jobs.setdefault(key, None)
        owners.setdefault(key, _owners(output, fingerprints))
    by_owner: dict[str, dict[tuple[str, str], list[str] | None]] = {}
    for key, names in owners.items():
        for name in names:
            by_owner.setdefault(name, {})[key] = jobs[key]
    todo = sum(why is not None for why in jobs.values())
    if json_output:
        listed = [(name, section, kind) for section, kind, name, _ in benchmarks] + [(WORKFLOW_WIDE, None, None)]
        _print_json({"config": str(config), "jobs": len(jobs), "done": len(jobs) - todo, "to_run": todo,
                     "benchmarks": [_status_entry(None if name == WORKFLOW_WIDE else name, section, kind,
                                                  by_owner.get(name, {}))
                                    for name, section, kind in listed if by_owner.get(name)]})
        return 0
    counted = sum("@" not in name for _, _, name, _ in benchmarks)  # a target view is no benchmark of its own
    print(f"{config}: {_count(counted, 'benchmark')}; {_count(len(jobs), 'job')}: {len(jobs) - todo} done, "
          f"{todo} to run" + (" (everything is up to date)" if not todo else f" (`vertebrae run {config}` runs them)"))
    sections = [(_title(kind, section, name), name) for section, kind, name, _ in benchmarks]
    for title, name in [*sections, (WORKFLOW_WIDE, WORKFLOW_WIDE)]:
        mine = by_owner.get(name, {})
        if not mine:
            continue
        pending = sum(why is not None for why in mine.values())
        print(f"  {title}: {_count(len(mine), 'job')}: {len(mine) - pending} done, {pending} to run")
        print("\n".join(_rule_table(mine)))
    return 0


def _status_entry(name: str | None, section: str | None, kind: str | None,
                  jobs: dict[tuple[str, str], list[str] | None]) -> dict[str, Any]:
    pending = sum(why is not None for why in jobs.values())
    rules = {rule: {**entry, "why": dict(entry["why"])} for rule, entry in _rule_counts(jobs).items()}
    return {"name": name, "section": section, "kind": kind, "jobs": len(jobs), "done": len(jobs) - pending,
            "to_run": pending, "rules": rules}


def _ranking_section(markdown: str) -> list[str]:
    """The lines of a report.md's "## Ranking" section, heading excluded."""
    lines, inside = [], False
    for line in markdown.splitlines():
        if line.startswith("## "):
            if inside:
                break
            inside = line.strip() == "## Ranking"
        elif inside:
            lines.append(line)
    while lines and not lines[-1].strip():
        lines.pop()
    while lines and not lines[0].strip():
        lines.pop(0)
    return lines


def _written(path: str) -> str:
    return "written" if Path(path).is_file() else "not yet written"


def show(config: str | Path, benchmark: str | None = None, json_output: bool = False) -> int:
    """``vertebrae show``: the plan of CONFIG (or of its benchmark BENCHMARK) as a user reads it; text from data (the
    dataset identity, the ranking read from report.md) is printed with ``terminal_text``. ``json_output``: one JSON
    document ``{"benchmarks": [{"name", "section", "kind", "dataset", "protocol": {"path", "state"}, "report":
    {"json", "markdown", "state"}, "candidates": [{"name", "fingerprint", "path", "state"}], "ranking"}]}``,
    ``ranking`` the candidate names in report.json's order once it is written (not verified: ``vertebrae
    verify`` does that), else null."""
    path = _config_file(config)
    planned = plan(load_config_file(path))
    benchmarks = _benchmarks(planned)
    names = [name for _, _, name, _ in benchmarks]
    if benchmark is not None and benchmark not in names:
        raise ConfigError(f"config file {config}: no benchmark {benchmark!r}; its benchmarks: "
                          f"{', '.join(names) or 'none'}")
    shown = [item for item in benchmarks if benchmark is None or item[2] == benchmark]
    if json_output:
        _print_json({"benchmarks": [_show_entry(planned, *item) for item in shown]})
        return 0
    for index, (section, kind, name, fp) in enumerate(shown):
        spec = planned.spec(fp)
        protocol = spec["protocol"]
        reports = planned.report_paths(name)
        print(("\n" if index else "") + _title(kind, section, name))
        print(f"  dataset: {terminal_text(planned.spec(protocol['fingerprint']).get('identity', 'unknown'))}")
        print(f"  protocol: {protocol['path']} ({_written(protocol['path'])})")
        candidates = spec["candidates"]
        state = _written(reports["json"])
        if state == "written" and not all(Path(c["score"]["path"]).is_file() for c in candidates):
            state += ", out of date: a score it needs is not yet written"
        print(f"  report: {reports['json']}, {reports['markdown']} ({state})")
        print(f"  {_count(len(candidates), 'candidate')} (name, score fingerprint, score file):")
        width = max(len(c["name"]) for c in candidates) if candidates else 0
        for candidate in candidates:
            score = candidate["score"]
            print(f"    {terminal_text(candidate['name']):<{width}}  {score['fingerprint']}  {score['path']} "
                  f"({_written(score['path'])})")
        markdown = Path(reports["markdown"])
        if markdown.is_file():
            print(f"  ranking (from {markdown}; `vertebrae status` says whether it is up to date):")
            ranking = _ranking_section(markdown.read_text(encoding="utf-8", errors="replace"))
            print("\n".join(f"    {terminal_text(line)}" for line in ranking))
    return 0


def _show_entry(planned, section: str, kind: str, name: str, fp: str) -> dict[str, Any]:
    spec = planned.spec(fp)
    protocol, reports = spec["protocol"], planned.report_paths(name)
    try:
        ranking = json.loads(Path(reports["json"]).read_text(encoding="utf-8")).get("ranking")
    except (OSError, ValueError, AttributeError):
        ranking = None
    return {"name": name, "section": section, "kind": kind,
            "dataset": planned.spec(protocol["fingerprint"]).get("identity"),
            "protocol": {"path": protocol["path"], "state": _written(protocol["path"])},
            "report": {"json": reports["json"], "markdown": reports["markdown"], "state": _written(reports["json"])},
            "candidates": [{"name": c["name"], "fingerprint": c["score"]["fingerprint"], "path": c["score"]["path"],
                            "state": _written(c["score"]["path"])} for c in spec["candidates"]],
            "ranking": ranking if isinstance(ranking, list) else None}


__all__ = ["benchmark_fingerprints", "describe", "job_table", "out_option", "run_workflow", "show",
           "snakemake_command", "status", "summary_rows", "validate", "with_out"]
