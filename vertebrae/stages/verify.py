"""``vertebrae verify``: check every artifact, page and table of a results/ tree; move corrupt or stale ones (and
everything built from them) aside so that the next ``snakemake`` rebuilds exactly those.

An artifact is checked as its reader checks it (schema, structure, content hash; ``core.artifacts``) and against
the fingerprint its path names (``<fp>.json``, ``<fp>.h5``, ``<fp>/shard-i-of-n.h5``, ``<fp>/<side>.h5``, a layer
sweep's ``shard-i-of-n/<layer fp>.h5``): a mismatch there is *stale*. A retrieval partial
(``partials/<merge fp>/<fp>.h5``) is read in its own format, a plan must declare the recipe its fingerprint hashes.
A file of a fan-out bundle (``fanouts/<merge fp>/``, ``stages.fanout_bundle``) must be the file its ``inputs.json``
records (fingerprint and content hash); it moves aside with its whole folder, which the workflow then restages.
A ``report.json`` must match its ``content_hash`` and parse through its result class's strict ``from_dict`` back to
the same document (a hand-edited ranking, score or key is refused; ``stages.report_check``). Every page and table the
workflow writes from the reports (report.md, the HTML items, report.html, the summary's CSV and Markdown,
leaderboard.html, index.html) must equal what its verified sources give now (``stages.verify_pages``); a figure (PNG)
must read back whole and unchanged, under its own name, stamped with its report's content hash (``reports.png``).

Moving aside renames a file to ``<name>.corrupt-<UTC time>`` next to it (``core.artifacts.move_aside``). Snakemake
does not rebuild a missing intermediate while the reports built from it exist, so every artifact that depends on a
moved one (found through the job specs under ``results/**/plans/`` (any out folder's), and for the pages by name:
``verify_pages.page_consumers``) moves aside with it, up to the reports and the results index. The CLI does the same
when a job refuses a corrupt input (``quarantine``), or a stale or foreign one that is not what its own path names
(``quarantine_refused``).

A symlink in a results tree is checked, and repaired, by what it points to: its target's bytes must be the artifact
its own path names. The target is never moved, changed or deleted (it may lie outside the tree: a shared cache, a
user's file, another run's results); instead the link is replaced by a plain copy of those bytes, which is moved aside
as ``<link>.corrupt-<UTC time>`` (the evidence stays beside the artifact, whatever becomes of the target), so the next
run writes the artifact at the link's path as a plain file. A link whose target is gone is itself moved aside. A
folder that is a link (``results/`` itself on another disk) is the tree's own storage: its files are files of the
tree. Paths are compared as written, never resolved through links.

The jobs that cut the HTML pages out of report.md check it first the same way (``verify_pages.write_report_page``,
``verify_pages.run_report_tables``): a hand-edited report.md is refused, and moved aside with what was built from it,
instead of reaching a page.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vertebrae.core.artifacts import move_aside, read_embeddings, read_json_artifact, read_json_document
from vertebrae.core.errors import ArtifactError, CorruptArtifactError, VertebraeError
from vertebrae.core.fingerprint import FINGERPRINT_PATTERN
from vertebrae.core.out_folder import is_out_folder, working_folder
from vertebrae.stages.fanout_bundle import FANOUT_KIND, INPUTS, bundle_of, check_bundle_file
from vertebrae.stages.plan import references
from vertebrae.stages.report_check import check_report
from vertebrae.stages.verify_pages import FIGURES, TEXTS, check_summary_json, check_text, page_consumers
from vertebrae.reports.views import FILES as VIEWS_FILES, check_views_file

_SHARD = re.compile(r"shard-(\d+)-of-(\d+)\.h5")
_SWEEP_SHARD = re.compile(r"shard-(\d+)-of-(\d+)")  # sweeps/<sweep fp>/shard-i-of-n/<layer fp>.h5
_ARTIFACT_SUFFIXES = (".h5", ".json")


def _abs(path: str | Path) -> Path:
    """``path`` made absolute as written: a link (a symlinked artifact, a results/ on another disk) is not resolved."""
    return Path(os.path.abspath(path))


def _results_root(path: Path) -> Path | None:
    """The out folder above ``path`` (``core.out_folder.is_out_folder``: ``results/``, or one holding a run's
    state); job specs name paths relative to its working folder (``core.out_folder.working_folder``)."""
    for parent in _abs(path).parents:
        if is_out_folder(parent):
            return parent
    return None


def _files(root: Path) -> Iterator[Path]:
    """Artifact files under ``root`` (and the pages and tables made from them: report.md, the HTML pages, the
    summary's CSV and Markdown, the leaderboard and the results index; a link to a file too, or to nothing): no
    temporary, hidden or moved-aside files."""
    for path in sorted(root.rglob("*")):
        if (path.is_file() or path.is_symlink() and not path.exists()) \
                and (path.suffix in _ARTIFACT_SUFFIXES or path.name in TEXTS or path.name in FIGURES) \
                and not any(p.startswith(".") or ".corrupt-" in p for p in path.relative_to(root).parts):
            yield path


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
    if FINGERPRINT_PATTERN.fullmatch(path.stem):
        return path.stem
    if FINGERPRINT_PATTERN.fullmatch(path.parent.name):
        return path.parent.name
    return None


def _specs(root: Path) -> dict[str, dict[str, Any]]:
    """Every readable job spec under ``root/**/plans/`` by fingerprint (unreadable ones are verify's to report)."""
    specs = {}
    for path in root.rglob("plans/*.json"):
        if FINGERPRINT_PATTERN.fullmatch(path.stem):
            try:
                specs[path.stem] = read_json_artifact(path, "plan", fingerprint=path.stem)
            except ArtifactError:
                pass
    return specs


def _refs(value: Any) -> Iterator[str]:
    """The paths of every ``{"fingerprint", "path"}`` reference inside a spec."""
    return (ref["path"] for ref in references(value) if isinstance(ref["path"], str))


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
    paths of missing artifacts too, whose consumers are followed all the same). Paths are taken as written, links
    unresolved: a symlinked artifact's dependents are those of its own path."""
    path = _abs(path)
    root = _results_root(path)
    if root is None:
        return []
    workdir, specs = working_folder(root), _specs(root)
    files = [_abs(p) for p in _files(root)] + [_abs(p) for p in root.rglob("reports/*/*") if p.is_file()]
    consumers: dict[str, list[str]] = {}
    for fp, spec in specs.items():
        for ref in _refs(spec):
            consumers.setdefault(str(_abs(workdir / ref)), []).append(fp)
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
        built += page_consumers(current)  # a report's pages, the leaderboard and the results index
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


def set_aside(path: str | Path) -> str:
    """Move one file of a results tree aside (``core.artifacts.move_aside``); return its new path. A symlink is set
    aside by what it points to: the link is replaced by a plain copy of its target's bytes, which is moved aside (the
    target itself, perhaps outside the tree, is never touched), so the next run writes a plain file at the link's
    path. A link to nothing, or one whose target cannot be copied, is moved aside as a link."""
    path = os.fspath(path)
    if os.path.islink(path) and os.path.isfile(path):
        folder, name = os.path.split(path)
        copy = os.path.join(folder, f".{name}.tmp-aside-{os.getpid()}")
        try:
            shutil.copyfile(path, copy)  # follows the link
            os.replace(copy, path)  # the link, not its target, becomes a plain file of the same bytes
        except OSError:
            if os.path.lexists(copy):
                os.unlink(copy)
    return move_aside(path)


def quarantine(path: str | Path) -> list[tuple[str, str]]:
    """Move ``path`` and every artifact built from it aside (:func:`set_aside`); return ``(old, new)`` pairs,
    ``path`` first."""
    moved = []
    for item in dict.fromkeys(bundle_of(item) or item for item in [Path(path), *dependents(path)]):
        try:  # a fan-out bundle's file moves with its whole folder (Snakemake tracks the folder)
            moved.append((str(item), set_aside(item)))
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


def run_figures(report_path: str | Path, ranking_path: str | Path, detail_path: str | Path,
                comparison_path: str | Path | None = None) -> None:
    """``vertebrae figures``: verify the report (:func:`check_report`), then draw its figures."""
    from vertebrae.reports.figures import write_report_figures

    check_report(report_path)
    write_report_figures(report_path, ranking_path, detail_path, comparison_path)


def _embedding_manifest(path: Path, verified: dict[tuple[int, int], dict] | None) -> dict:
    """The manifest of an embedding artifact after verifying its content (``read_embeddings``), once per file: a
    hard link to a file ``verified`` already holds (a fan-out bundle's endpoint, ``stages.fanout_bundle``) is the
    same bytes, not read again."""
    key = None
    if verified is not None:
        stat = path.stat()
        key = (stat.st_dev, stat.st_ino)
        if key in verified:
            return verified[key]
    manifest = read_embeddings(path, fingerprint=None).manifest
    if key is not None:
        verified[key] = manifest
    return manifest


def _check(path: Path, specs: dict[str, dict[str, Any]], verified: dict[tuple[int, int], dict] | None = None) -> None:
    """Verify one artifact; ArtifactError (stale, or CorruptArtifactError) when it is bad. ``verified``: the
    manifests of the embedding files verified so far in this pass, by inode (``_embedding_manifest``)."""
    from vertebrae.stages.plan import check_plan_recipe, shard_fingerprint

    if path.is_symlink() and not path.exists():
        raise CorruptArtifactError(f"{path}: a link to {os.readlink(path)}, which does not exist", str(path))
    if path.name == "report.json" and path.parent.parent.name == "reports":
        check_report(path)
        return
    if path.name == "summary.json" and path.parent.name == "summary":  # the cross-benchmark summary: no manifest
        check_summary_json(path)
        return
    if path.name in TEXTS:
        check_text(path)
        return
    if path.name in FIGURES and path.parent.parent.name == "reports":
        _check_figure(path)
        return
    if path.name in VIEWS_FILES and path.parent.parent.name == "reports":  # target views (reports.views)
        check_views_file(path)
        return
    bundle = bundle_of(path)
    if bundle is not None and path.name != INPUTS:  # a file of a fan-out bundle: the one its inputs.json records
        if path.suffix == ".h5":
            manifest = _embedding_manifest(path, verified)
        else:
            manifest, payload = read_json_document(path, "plan", fingerprint=None)
            check_plan_recipe(path, payload)
        check_bundle_file(path, manifest, read_json_document(bundle / INPUTS, FANOUT_KIND, fingerprint=bundle.name)[1])
        return
    fp = _path_fp(path)
    if path.suffix == ".h5" and "partials" in (path.parent.name, path.parent.parent.name):
        # a retrieval partial score (its own format), ``partials/<merge fp>/<fp>.h5``
        from vertebrae.stages.retrieval_fanout import FanoutPartial

        FanoutPartial.load(path, fingerprint=fp)
        return
    if path.suffix == ".h5":
        manifest = _embedding_manifest(path, verified)
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
    """Check every artifact, page and table under ``results_dir``; return ``(path, problem)`` of the corrupt or stale
    ones, and with ``repair`` move each (and what was built from it) aside."""
    root = Path(results_dir)
    if not root.is_dir():
        raise ArtifactError(f"results directory {results_dir}: not found")
    specs = _specs(root)
    bad, verified = [], {}
    for path in _files(root):
        try:
            _check(path, specs, verified)
        except (ArtifactError, VertebraeError) as exc:
            bad.append((str(path), str(exc)))
    if repair:
        for path, _ in bad:
            if os.path.lexists(path):
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


__all__ = ["check_report", "dependents", "describe_quarantine", "quarantine", "quarantine_refused", "run_figures",
           "run_verify", "set_aside", "verify"]
