"""Repairs converge (issue 32, item 2): for each kind of artifact a small run with a fanned-out retrieval benchmark
writes, a tampering (a changed number, a swapped file, a foreign partial, an edited report, a damaged or foreign
figure) is found by ``vertebrae verify``, which names the tampered file; ``verify --repair`` then a plain
``snakemake`` gives the original reports and figures, and a second ``verify`` exits 0. One run is shared by the
module; each set of cases (files no other case of the set touches) works on a copy of it. ``verify`` runs through
the CLI's ``main`` in this process (the jobs, through Snakemake, in their own)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path

import h5py
import pytest

from vertebrae.cli import main
from vertebrae.reports.png import read_stamp
from workflow_support import comparable, snakemake, write_config

# issue 32, item 4: a name from data written raw into report.md made markup, a link and a heading there
HOSTILE = "my-iris <img src=x onerror=alert(1)>\n# owned [click](javascript:alert(2))"
CONFIG = {
    "seed": 0,
    "embedding": {"shards": 2, "batch_size": 64},
    "benchmarks": {"iris": {
        "dataset": {"source": {"type": "sklearn", "name": "iris"},
                    "identity": {"kind": "declared", "name": HOSTILE, "revision": "1"}},
        "extractors": {"raw": {"type": "precomputed"},
                       "pca2": {"type": "sklearn", "steps": [{"estimator": "sklearn.decomposition.PCA",
                                                              "params": {"n_components": 2}}]}},
        "scoring": {"k": 5},
        "row_resampling": {"resamples": 20},  # iris: 3 classes; 20 row subsamples (the least) run the same path
    }},
    "retrieval": {"search": {
        "dataset": {"source": {"type": "label_split", "source": {"type": "sklearn", "name": "iris"}, "query_every": 5},
                    "identity": {"kind": "declared", "name": "iris-search", "revision": "1"}},
        "shards": 1,
        "extractors": {"raw": {"type": "precomputed"},
                       "pca2": {"type": "sklearn", "steps": [{"estimator": "sklearn.decomposition.PCA",
                                                              "params": {"n_components": 2}}]}},
        "scoring": {"gallery_shards": 2},
    }},
}


def _verify(workdir: Path, *args: str) -> tuple[int, str]:
    """``vertebrae verify [args] <workdir>/results`` through the CLI's own ``main`` (in this process: a fresh
    interpreter per call cost seconds each, three calls a case): exit status and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["verify", *args, str(workdir / "results")])
    return status, out.getvalue() + err.getvalue()


def _reports(workdir: Path) -> dict:
    """Every report.json (timings aside), the summary, and every figure's bytes."""
    reports = workdir / "results" / "reports"
    found = {p.parent.name: comparable(json.loads(p.read_text(encoding="utf-8"))) for p in reports.glob("*/report.json")}
    found["summary"] = json.loads((workdir / "results" / "summary" / "summary.json").read_text(encoding="utf-8"))
    # each figure's name and the digest of its image chunks (the stamp also holds its report's content_hash, which
    # covers the measured costs of the run that wrote it, so it differs between runs)
    found["figures"] = {str(p.relative_to(reports)): {k: read_stamp(p)[k] for k in ("figure", "chunks")}
                        for p in sorted(reports.glob("*/*.png"))}
    return found


def _first(workdir: Path, pattern: str, index: int = 0) -> Path:
    paths = sorted((workdir / "results").glob(pattern))
    assert len(paths) > index, pattern
    return paths[index]


def _edit_json(path: Path) -> Path:
    """Change one number (a digit after a decimal point, else any digit) in the payload of a JSON artifact, or in
    the document when it has none: the bytes stay valid JSON."""
    text = path.read_text(encoding="utf-8")
    start = text.find('"payload"') + 1
    found = re.compile(r"\d\.(\d)").search(text, start) or re.compile(r"(\d)").search(text, start)
    at = found.start(1)
    path.write_text(text[:at] + ("8" if text[at] == "9" else str(int(text[at]) + 1)) + text[at + 1:], encoding="utf-8")
    return path


def _edit_h5(path: Path) -> Path:
    """Change one stored number of the first numeric dataset (the manifest stays as written)."""
    with h5py.File(path, "r+") as f:
        names = []
        f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset)
                     and obj.dtype.kind in "fiu" and obj.size else None)
        data = f[names[0]]
        flat = data[()].reshape(-1)
        flat[0] = flat[0] + 1
        data[...] = flat.reshape(data.shape)
    return path


def _swap_shard(workdir: Path) -> Path:
    merged = _first(workdir, "embeddings/*.h5")
    shutil.copyfile(merged.with_suffix("") / "shard-0-of-2.h5", merged)
    return merged


def _foreign_partial(workdir: Path) -> Path:
    folders = sorted(p for p in (workdir / "results/retrieval/partials").iterdir() if p.is_dir())
    mine, other = sorted(folders[0].glob("*.h5"))[0], sorted(folders[1].glob("*.h5"))[0]
    shutil.copyfile(other, mine)
    return mine


def _flip_figure_byte(workdir: Path) -> Path:
    path = _first(workdir, "reports/search/detail.png")
    data = path.read_bytes()
    at = data.index(b"IDAT") + 40  # inside the image data: the chunk's CRC no longer matches
    path.write_bytes(data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:])
    return path


def _foreign_figure(workdir: Path) -> Path:  # a valid figure of another benchmark, under this one's name
    target = _first(workdir, "reports/search/ranking.png")
    shutil.copyfile(_first(workdir, "reports/iris/ranking.png"), target)
    return target


def _append(pattern: str):
    def tamper(workdir: Path) -> Path:
        path = _first(workdir, pattern)
        path.write_text(path.read_text(encoding="utf-8") + "<script>alert(1)</script>\n", encoding="utf-8")
        return path
    return tamper


# each case tampers with one artifact and returns its path
CASES = {
    "merged-embedding-number": lambda w: _edit_h5(_first(w, "embeddings/*.h5")),
    "merged-embedding-swapped-with-its-shard": _swap_shard,
    "shard-number": lambda w: _edit_h5(_first(w, "embeddings/*/shard-1-of-2.h5")),
    "retrieval-embedding-number": lambda w: _edit_h5(_first(w, "retrieval/embeddings/*.h5")),
    "partial-number": lambda w: _edit_h5(_first(w, "retrieval/partials/*/*.h5")),
    "foreign-partial": _foreign_partial,
    "staged-relevance-rows": lambda w: _edit_h5(_first(w, "retrieval/fanouts/*/rows.gallery.h5")),
    "fanout-spec": lambda w: _edit_json(_first(w, "retrieval/fanouts/*/inputs.json")),
    # the bundle's endpoint (a hard link to the merged embedding in a run; a plain copy in this copied tree)
    "fanout-bundle-endpoint": lambda w: _edit_h5(_first(w, "retrieval/fanouts/*/gallery.h5")),
    "relevance-protocol": lambda w: _edit_json(_first(w, "retrieval/relevance/*.json")),
    "labelled-protocol": lambda w: _edit_json(_first(w, "protocols/*.json")),
    "fitted-extractor": lambda w: _edit_json(_first(w, "fitted/*.json")),
    "plan": lambda w: _edit_json(_first(w, "plans/*.json")),
    "score": lambda w: _edit_json(_first(w, "scores/*.json")),
    "retrieval-score": lambda w: _edit_json(_first(w, "retrieval/scores/*.json")),
    "comparison": lambda w: _edit_json(_first(w, "comparisons/*.json")),
    "report-json-number": lambda w: _edit_json(_first(w, "reports/iris/report.json")),
    "report-md": _append("reports/search/report.md"),
    "report-html-page": _append("reports/iris/warnings.html"),
    "figure-byte": _flip_figure_byte,
    "figure-of-another-report": _foreign_figure,
    "summary-json": lambda w: _edit_json(_first(w, "summary/summary.json")),
    "summary-csv": _append("summary/summary.csv"),
    "summary-md": _append("summary/summary.md"),
}
# The cases run in four sets, one repair and Snakemake rebuild per set (one per case cost ~10 s each): no two cases
# of a set touch the same file (the merged embedding, its shard and the first partial are in different sets), and
# verify must name every tampered file of a set, so no case hides behind another's.
CASE_SETS = {
    "embeddings-relevance-comparison-md": ("merged-embedding-number", "retrieval-embedding-number",
                                           "relevance-protocol", "comparison", "report-md", "summary-json"),
    "swap-partial-protocol-report": ("merged-embedding-swapped-with-its-shard", "partial-number", "labelled-protocol",
                                     "report-json-number", "figure-byte", "summary-csv", "fanout-bundle-endpoint"),
    "shard-foreign-staged-fitted-score-html": ("shard-number", "foreign-partial", "staged-relevance-rows",
                                               "fitted-extractor", "score", "report-html-page",
                                               "figure-of-another-report", "summary-md"),
    "fanout-plan-retrieval-score": ("fanout-spec", "plan", "retrieval-score"),
}


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory) -> tuple[Path, dict]:
    workdir = tmp_path_factory.mktemp("tamper-run")
    write_config(workdir, CONFIG)
    snakemake(workdir)
    status, printed = _verify(workdir)
    assert status == 0, printed  # a clean run verifies (partials and figures included)
    markdown = (workdir / "results" / "reports" / "iris" / "report.md").read_text(encoding="utf-8")
    assert "my-iris &lt;img src=x onerror=alert(1)> # owned [click]\\(javascript:alert(2))" in markdown, markdown
    assert not [part for part in ("<img", "\n# owned", "](javascript") if part in markdown]
    return workdir, _reports(workdir)


def test_the_case_sets_hold_every_case_once():
    assert sorted(c for cases in CASE_SETS.values() for c in cases) == sorted(CASES)


@pytest.mark.parametrize("case_set", sorted(CASE_SETS))
def test_tampered_artifacts_are_each_found_and_repair_then_a_plain_run_restores_the_reports(clean_run, tmp_path,
                                                                                           case_set):
    source, original = clean_run
    workdir = tmp_path / "run"
    shutil.copytree(source, workdir, symlinks=True)
    tampered = {case: CASES[case](workdir) for case in CASE_SETS[case_set]}
    status, printed = _verify(workdir)
    assert status == 2, printed
    found = {Path(line[len("bad: "):].split(": ", 1)[0]) for line in printed.splitlines() if line.startswith("bad: ")}
    assert not {case: path for case, path in tampered.items() if path not in found}, printed
    status, printed = _verify(workdir, "--repair")
    assert status == 0, printed
    snakemake(workdir)
    assert _reports(workdir) == original
    status, printed = _verify(workdir)
    assert status == 0, printed


@pytest.mark.parametrize("case", ["merged-embedding-swapped-with-its-shard", "foreign-partial"])
def test_a_job_that_refuses_a_stale_or_foreign_input_moves_it_aside_so_a_plain_rerun_rebuilds(clean_run, tmp_path,
                                                                                                case):
    """Without verify: the job that reads the swapped file refuses it and moves it (and what was built from it)
    aside; the next plain run rebuilds it instead of saying "Nothing to be done" with the file missing."""
    source, original = clean_run
    workdir = tmp_path / "run"
    shutil.copytree(source, workdir, symlinks=True)
    CASES[case](workdir)
    failed = snakemake(workdir, check=False)
    assert failed.returncode != 0
    logs = "".join(p.read_text(encoding="utf-8", errors="replace") for p in (workdir / "results" / "logs").rglob("*.log"))
    assert "moved it aside to" in logs
    snakemake(workdir)
    assert _reports(workdir) == original
    assert _verify(workdir)[0] == 0
