"""``vertebrae verify``: check every artifact of a results/ tree; move corrupt or stale ones (and everything built
from them) aside so that the next ``snakemake`` rebuilds exactly those.

An artifact is checked as its reader checks it (schema, structure, content hash; ``core.artifacts``) and against
the fingerprint its path names (``<fp>.json``, ``<fp>.h5``, ``<fp>/shard-i-of-n.h5``, ``<fp>/<side>.h5``, a layer
sweep's ``shard-i-of-n/<layer fp>.h5``): a mismatch there is *stale*. A retrieval partial (``partials/<merge fp>/<fp>.h5``) is read in its own format, a plan
must declare the recipe its fingerprint hashes. A ``report.json`` must match its ``content_hash`` and parse through
its result class's strict ``from_dict`` back to the same document (a hand-edited ranking, score or key is refused);
report.md, the HTML pages and the summary's CSV and Markdown must equal what their verified sources give; a figure
(PNG) must read back whole and unchanged, under its own name, stamped with its report's content hash (``reports.png``).

Moving aside renames a file to ``<name>.corrupt-<UTC time>`` next to it (``core.artifacts.move_aside``). Snakemake
does not rebuild a missing intermediate while the reports built from it exist, so every artifact that depends on a
moved one (found through the job specs under ``results/**/plans/``) moves aside with it, up to the reports. The CLI
does the same when a job refuses a corrupt input (``quarantine``), or a stale or foreign one that is not what its
own path names (``quarantine_refused``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vertebrae.core.artifacts import move_aside, read_embeddings, read_json_artifact
from vertebrae.core.errors import ArtifactError, CorruptArtifactError, VertebraeError
from vertebrae.reports.summary import check_summary

_FP = re.compile(r"[0-9a-f]{16}")
_SHARD = re.compile(r"shard-(\d+)-of-(\d+)\.h5")
_SWEEP_SHARD = re.compile(r"shard-(\d+)-of-(\d+)")  # sweeps/<sweep fp>/shard-i-of-n/<layer fp>.h5
_ARTIFACT_SUFFIXES = (".h5", ".json")


def _results_root(path: Path) -> Path | None:
    """The ``results`` directory above ``path`` (job specs name paths relative to its parent)."""
    for parent in path.resolve().parents:
        if parent.name == "results":
            return parent
    return None


_PAGES = ("ranking", "detail", "comparison", "warnings")  # reports.html_items.ITEMS
_TEXTS = {"report.md", *(f"{item}.html" for item in _PAGES), "summary.csv", "summary.md"}
_FIGURES = {f"{figure}.png" for figure in ("ranking", "detail", "comparison")}  # reports.figures.FIGURES


def _files(root: Path) -> Iterator[Path]:
    """Artifact files under ``root`` (and the text items made from them: report.md, the HTML pages, the summary's
    CSV and Markdown): no temporary, hidden or moved-aside files."""
    for path in sorted(root.rglob("*")):
        if path.is_file() and (path.suffix in _ARTIFACT_SUFFIXES or path.name in _TEXTS or path.name in _FIGURES) \
                and not any(p.startswith(".") for p in path.relative_to(root).parts) and ".corrupt-" not in path.name:
            yield path


def _expected_text(path: Path) -> str | None:
    """What a text item must hold: report.md the rendering of its verified report.json, an HTML page its item of
    that rendering, summary.csv / summary.md the rendering of the verified summary.json; None for other files."""
    folder = path.parent
    if folder.parent.name == "reports" and (path.name == "report.md" or path.stem in _PAGES):
        document = check_report(folder / "report.json")
        report = _report_class(document["schema"]).from_dict(document)
        markdown = report.markdown()
        if path.name == "report.md":
            return markdown
        from vertebrae.reports.html_items import page, report_items

        return page(report_items(markdown, benchmark=folder.name)[path.stem], benchmark=folder.name, item=path.stem)
    if path.name in ("summary.csv", "summary.md") and folder.name == "summary":
        from vertebrae.reports.summary import summary_csv, summary_markdown

        _check_summary_json(folder / "summary.json")
        summary = check_summary(folder / "summary.json")
        return (summary_csv if path.suffix == ".csv" else summary_markdown)(summary)
    return None


def _check_summary_json(path: Path) -> None:
    """summary.json reads back (``check_summary``) and is the summary of the reports it names, where those verify
    (a bad report is reported itself), with its own ``software`` stamp (a record of the writer, not derived from
    the reports); CorruptArtifactError if it is not."""
    from vertebrae.reports.summary import build_summary

    summary = check_summary(path)
    workdir = path.parent.parent.parent  # <workdir>/results/summary/summary.json; report paths are relative to it
    try:
        rebuilt = build_summary([(c.report, check_report(workdir / c.report)) for c in summary.benchmarks])
        if summary.software is not None:
            rebuilt = rebuilt.with_software(summary.software)
    except (OSError, ArtifactError, VertebraeError):
        return
    if rebuilt.to_dict() != summary.to_dict():
        raise CorruptArtifactError(f"summary {path}: edited: it is not the summary of the reports it names", str(path))


def _check_text(path: Path) -> None:
    """A text item equals what its verified source gives (:func:`_expected_text`); CorruptArtifactError if not (or
    if it is not UTF-8 text)."""
    try:
        expected = _expected_text(path)
    except (OSError, ArtifactError, VertebraeError):
        expected = None  # its source is missing or bad, and reported itself: rebuilding the source rewrites this
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CorruptArtifactError(f"{path}: unreadable ({exc})", str(path)) from None
    if expected is not None and text != expected:
        raise CorruptArtifactError(f"{path}: edited: it differs from what its source gives", str(path))


def _check_figure(path: Path) -> None:
    """A report figure checks out as the PNG it was drawn as (``reports.png.read_stamp``: every chunk whole, the
    image unchanged), under its own name, and drawn from the report.json beside it as it is now (where that report
    verifies: a bad report is reported itself and its repair redraws this); CorruptArtifactError if not."""
    from vertebrae.reports.png import read_stamp
    from vertebrae.results.base import report_content_hash

    found = read_stamp(path)
    if found.get("figure") != path.stem:
        raise CorruptArtifactError(f"figure {path}: it is the {found.get('figure')!r} figure, not {path.stem!r}",
                                   str(path))
    try:
        report_hash = report_content_hash(check_report(path.parent / "report.json"))
    except (OSError, ArtifactError, VertebraeError):
        return
    if found.get("report") != report_hash:
        raise CorruptArtifactError(f"figure {path}: stale or foreign: drawn from another report than "
                                   f"{path.parent / 'report.json'}", str(path))


def _path_fp(path: Path) -> str | None:
    """The fingerprint a path names: its stem, else its directory's name."""
    if _FP.fullmatch(path.stem):
        return path.stem
    if _FP.fullmatch(path.parent.name):
        return path.parent.name
    return None


def _specs(root: Path) -> dict[str, dict[str, Any]]:
    """Every readable job spec under ``root/**/plans/`` by fingerprint (unreadable ones are verify's to report)."""
    specs = {}
    for path in root.rglob("plans/*.json"):
        if _FP.fullmatch(path.stem):
            try:
                specs[path.stem] = read_json_artifact(path, "plan", fingerprint=path.stem)
            except ArtifactError:
                pass
    return specs


def _refs(value: Any) -> Iterator[str]:
    """The paths of every ``{"fingerprint", "path"}`` reference inside a spec."""
    if isinstance(value, dict):
        if isinstance(value.get("path"), str) and "fingerprint" in value:
            yield value["path"]
        for item in value.values():
            yield from _refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _refs(item)


def _outputs(root: Path, fp: str, spec: dict[str, Any] | None, files: list[Path]) -> list[Path]:
    """The files job ``fp`` wrote: those its fingerprint names (plans excepted), or its benchmark's reports."""
    out = [p for p in files if _path_fp(p) == fp and p.parent.name != "plans"]
    if spec is not None and str(spec.get("stage", "")).endswith("report"):
        benchmark = spec.get("benchmark") or (spec.get("recipe") or {}).get("benchmark")
        folder = root / "reports" / str(benchmark)
        if benchmark and folder.is_dir():
            out += [p for p in sorted(folder.iterdir()) if p.is_file() and ".corrupt-" not in p.name]
    return out


def dependents(path: str | Path) -> list[Path]:
    """Every artifact of the results tree built from ``path``, directly or not (reports and figures included;
    paths of missing artifacts too, whose consumers are followed all the same)."""
    path = Path(path).resolve()
    root = _results_root(path)
    if root is None:
        return []
    workdir, specs = root.parent, _specs(root)
    files = [p.resolve() for p in _files(root)] + [p.resolve() for p in root.rglob("reports/*/*") if p.is_file()]
    consumers: dict[str, list[str]] = {}
    for fp, spec in specs.items():
        for ref in _refs(spec):
            consumers.setdefault(str((workdir / ref).resolve()), []).append(fp)
    # a job that failed (or was removed) has no output file, but its consumers still name its path
    existing = set(files)
    files += [Path(p) for p in consumers if Path(p) not in existing]
    found: dict[Path, None] = {}
    queue = [path]
    while queue:
        current = queue.pop()
        built = [out for owner in consumers.get(str(current), []) for out in _outputs(root, owner, specs.get(owner), files)]
        fp = _path_fp(current)
        if current.parent.name == "plans" and fp:  # a job's plan: the job's own outputs
            built += _outputs(root, fp, specs.get(fp), files)
        elif fp and _SHARD.fullmatch(current.name):  # a shard: the merged endpoint built from it, not its siblings
            built += [out for out in _outputs(root, fp, specs.get(fp), files) if not _SHARD.fullmatch(out.name)]
        for out in built:
            if out != path and out not in found:
                found[out] = None
                queue.append(out)
    return list(found)


def quarantine_refused(path: str | Path, *, always: bool = False) -> list[tuple[str, str]]:
    """:func:`quarantine` for a stale or foreign input a job refused (``StaleArtifactError``): it moves when it lies
    in a results tree and is not what its own path names (verify's check), or ``always`` (built from other inputs
    than those now in place); a valid artifact given to the wrong job, or a user's own file, stays."""
    path = Path(path)
    root = _results_root(path)
    if root is None or not path.is_file():
        return []
    if not always:
        try:
            _check(path, _specs(root))
            return []
        except (ArtifactError, VertebraeError):
            pass
    return quarantine(path)


def quarantine(path: str | Path) -> list[tuple[str, str]]:
    """Move ``path`` and every artifact built from it aside; return ``(old, new)`` pairs, ``path`` first."""
    moved = []
    for item in [Path(path), *dependents(path)]:
        try:
            moved.append((str(item), move_aside(item)))
        except FileNotFoundError:  # never built, or already moved aside by a concurrent job
            continue
    return moved


def describe_quarantine(moved: list[tuple[str, str]]) -> str:
    """The sentence the CLI appends to a corrupt-input error."""
    if not moved:
        return ""
    text = f"; moved it aside to {moved[0][1]}"
    if len(moved) > 1:
        text += f" and {len(moved) - 1} artifact(s) built from it ({', '.join(old for old, _ in moved[1:])})"
    return text + ": run the workflow again to rebuild them"


def _report_classes() -> dict[str, type]:
    from vertebrae.results import BenchmarkResult
    from vertebrae.results.retrieval import RetrievalBenchmarkResult
    from vertebrae.results.zero_shot import ZeroShotBenchmarkResult

    return {cls.SCHEMA: cls for cls in (BenchmarkResult, RetrievalBenchmarkResult, ZeroShotBenchmarkResult)}


def _report_class(schema: str) -> type:
    return _report_classes()[schema]


def check_report(path: str | Path) -> dict[str, Any]:
    """A report.json verified like an artifact: valid JSON whose ``content_hash`` matches its other keys (a hand-edited
    number is refused), parsed by its protocol's strict result class, and serialising back to the same document;
    return it (without the hash). Raises CorruptArtifactError naming the path."""
    from vertebrae.results.base import CONTENT_HASH_KEY, report_content_hash

    path = str(path)
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except FileNotFoundError:
        raise ArtifactError(f"report {path}: file not found") from None
    except (OSError, ValueError) as exc:
        raise CorruptArtifactError(f"report {path}: not valid JSON ({exc})", path) from None
    if not isinstance(document, dict) or CONTENT_HASH_KEY not in document:
        raise CorruptArtifactError(f"report {path}: no {CONTENT_HASH_KEY}: not a report.json vertebrae wrote", path)
    if document.pop(CONTENT_HASH_KEY) != report_content_hash(document):
        raise CorruptArtifactError(f"report {path}: content hash mismatch: edited since it was written", path)
    classes = _report_classes()
    schema = document.get("schema") if isinstance(document, dict) else None
    if schema not in classes:
        raise CorruptArtifactError(f"report {path}: unknown report schema {schema!r}, expected one of "
                                   f"{sorted(classes)}", path)
    try:
        again = classes[schema].from_dict(document).to_dict()
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise CorruptArtifactError(f"report {path}: malformed {schema} report ({type(exc).__name__}: {exc})",
                                   path) from None
    if again != document:
        keys = sorted(k for k in {*again, *document} if again.get(k) != document.get(k))
        raise CorruptArtifactError(f"report {path}: edited or inconsistent (keys {keys} differ from the report "
                                   f"its own results give)", path)
    return document


def run_figures(report_path: str | Path, ranking_path: str | Path, detail_path: str | Path,
                comparison_path: str | Path | None = None) -> None:
    """``vertebrae figures``: verify the report (:func:`check_report`), then draw its figures."""
    from vertebrae.reports.figures import write_report_figures

    check_report(report_path)
    write_report_figures(report_path, ranking_path, detail_path, comparison_path)


def _check(path: Path, specs: dict[str, dict[str, Any]]) -> None:
    """Verify one artifact; ArtifactError (stale, or CorruptArtifactError) when it is bad."""
    from vertebrae.stages.plan import check_plan_recipe, shard_fingerprint

    if path.name == "report.json" and path.parent.parent.name == "reports":
        check_report(path)
        return
    if path.name == "summary.json" and path.parent.name == "summary":  # the cross-benchmark summary: no manifest
        _check_summary_json(path)
        return
    if path.name in _TEXTS:
        _check_text(path)
        return
    if path.name in _FIGURES and path.parent.parent.name == "reports":
        _check_figure(path)
        return
    fp = _path_fp(path)
    if path.suffix == ".h5" and "partials" in (path.parent.name, path.parent.parent.name):
        # a retrieval partial score (its own format), ``partials/<merge fp>/<fp>.h5``
        from vertebrae.stages.retrieval_fanout import FanoutPartial

        FanoutPartial.load(path, fingerprint=fp)
        return
    if path.suffix == ".h5":
        manifest = read_embeddings(path, fingerprint=None).manifest
        expected = {fp, f"{fp}/{path.stem}"}
        shard = _SHARD.fullmatch(path.name) or _SWEEP_SHARD.fullmatch(path.parent.name)  # a layer sweep's folder
        if shard and fp in specs:
            spec = specs[fp]
            index = int(shard.group(1))
            expected = {shard_fingerprint(spec, index)} if index < len(spec.get("shards", [])) else set()
    else:
        try:
            with open(path, encoding="utf-8") as handle:
                kind = (json.load(handle).get("manifest") or {}).get("kind")
        except (OSError, ValueError, AttributeError) as exc:
            raise CorruptArtifactError(f"artifact {path}: not a JSON artifact ({exc})", str(path)) from None
        payload = read_json_artifact(path, str(kind), fingerprint=None)
        if kind == "plan":
            check_plan_recipe(path, payload)
        with open(path, encoding="utf-8") as handle:
            manifest = json.load(handle)["manifest"]
        expected = {fp}
    if fp is not None and manifest.get("fingerprint") not in expected:
        raise ArtifactError(f"artifact {path}: stale: fingerprint {manifest.get('fingerprint')}, its path "
                            f"expects {' or '.join(sorted(expected)) or 'another shard count'}")


def verify(results_dir: str | Path = "results", *, repair: bool = False) -> list[tuple[str, str]]:
    """Check every artifact under ``results_dir``; return ``(path, problem)`` of the corrupt or stale ones, and with
    ``repair`` move each (and what was built from it) aside."""
    root = Path(results_dir)
    if not root.is_dir():
        raise ArtifactError(f"results directory {results_dir}: not found")
    specs = _specs(root)
    bad = []
    for path in _files(root):
        try:
            _check(path, specs)
        except (ArtifactError, VertebraeError) as exc:
            bad.append((str(path), str(exc)))
    if repair:
        for path, _ in bad:
            if os.path.exists(path):
                quarantine(path)
    return bad


def run_verify(results_dir: str | Path = "results", repair: bool = False) -> None:
    """``vertebrae verify``: list corrupt or stale artifacts; ArtifactError (exit status 2) when there are any and
    ``repair`` is off. With ``repair`` they and everything built from them are moved aside."""
    bad = verify(results_dir, repair=repair)
    for path, problem in bad:
        print(f"{'moved aside' if repair else 'bad'}: {path}: {problem}")
    if bad and not repair:
        raise ArtifactError(f"{len(bad)} corrupt or stale artifact(s) under {results_dir}; "
                            f"`vertebrae verify --repair {results_dir}` moves them aside for the workflow to rebuild")
    print(f"{results_dir}: " + (f"{len(bad)} artifact(s) moved aside with what was built from them; run the workflow "
                                "again to rebuild them" if bad else "every artifact verifies"))


__all__ = ["check_report", "dependents", "describe_quarantine", "quarantine", "quarantine_refused", "run_figures", "run_verify", "verify"]
