"""docs/data.md, "Your own data in the workflow": its snippets run as written.

The YAML is taken from docs/data.md (never retyped here) and the commands are the page's own, run by a shell in a
temporary directory holding a fresh clone of the workflow (``clone_workflow``: what a user has after ``git clone``),
with small synthetic data files at the paths the YAML names; ``vertebrae`` and ``snakemake`` are the test
environment's (its bin folder first on PATH, as in an activated environment).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml

from vertebrae.planning import plan
from workflow_support import BIN, REPO, clone_workflow, job_counts

try:  # model_d's Parquet file needs pyarrow (the models extra)
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError:  # pragma: no cover - the environment lacks the extra
    pa = pq = None

SECTION = "## Your own data in the workflow"
SEVERAL = "### Embeddings from several models, one file each"
REPORT_SIDE = {"compare", "report", "figures", "report_tables", "report_page", "leaderboard_page",
               "results_index", "summary", "all"}  # rerun after any candidate change


def section(title: str, page: str = "docs/data.md") -> str:
    """The text of ``page`` (docs/data.md) under ``title``, up to the next heading of the same or a higher level."""
    lines = (REPO / page).read_text(encoding="utf-8").splitlines(keepends=True)
    assert title + "\n" in lines, f"{page} has no heading {title!r}"
    level, body, fenced = len(title.split(" ", 1)[0]), [], False
    for line in lines[lines.index(title + "\n") + 1:]:
        fenced ^= line.startswith("```")
        heading = not fenced and re.match(r"#+ ", line)
        if heading and len(heading.group(0)) - 1 <= level:
            break
        body.append(line)
    return "".join(body)


def first_yaml(text: str) -> str:
    match = re.search(r"^```yaml\n(.*?)^```", text, re.S | re.M)
    assert match, "no ```yaml block"
    return match.group(1)


def command(text: str, start: str) -> str:
    """The first inline `code` span of ``text`` that starts with ``start`` (a command the docs tell users to type;
    a span wrapped over two lines is one command)."""
    spans = [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", text)]
    spans = [span for span in spans if span.startswith(start)]
    assert spans, f"the docs section shows no `{start}...` command"
    return spans[0]


def shell(workdir: Path, line: str) -> subprocess.CompletedProcess:
    """``line`` run by a shell in ``workdir``, with the test environment's bin folder first on PATH."""
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(line, shell=True, cwd=workdir, env=env, capture_output=True, text=True)


def ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, f"{proc.args} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout + proc.stderr


def age(*paths: Path) -> None:
    """Written a minute ago: past the digest cache's racy window, as files a user made earlier are."""
    for path in paths:
        os.utime(path, (time.time() - 60, time.time() - 60))


# ------------------------------------------------------------------------------------------------------------------
# 1. the `my_embeddings` config: validate, run, the docs' own snakemake command, and a data edit


def write_clip_npz(path: Path, source: dict) -> None:
    """The npz the docs' source block names, with the members it names: 4 well separated classes of 60 rows in
    72 dimensions (PCA to 64 needs at least 64 of each), and string image ids in shuffled order."""
    rng = np.random.default_rng(0)
    n, dim = 240, 72
    classes = np.arange(n) % 4
    features = (4.0 * rng.normal(size=(4, dim))[classes] + rng.normal(size=(n, dim))).astype(np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **{source["features_key"]: features,
                      source["labels_key"]: np.array(["cat", "dog", "bird", "fish"])[classes],
                      source["ids_key"]: np.array([f"img-{i:04d}" for i in rng.permutation(n)])})
    age(path)


def test_my_embeddings_config_validates_runs_and_reruns_after_a_data_edit(tmp_path):
    text = section(SECTION)
    work = clone_workflow(tmp_path / "checkout")
    (work / "my-config.yaml").write_text(first_yaml(text), encoding="utf-8")  # as pasted from the docs
    config = yaml.safe_load(first_yaml(text))
    (bench,) = config["benchmarks"]
    assert bench == "my_embeddings"
    source = config["benchmarks"][bench]["dataset"]["source"]
    write_clip_npz(work / source["path"], source)

    validate = command(text, "vertebrae validate ")
    out = ok(shell(work, validate))
    assert validate == "vertebrae validate my-config.yaml"
    assert "my-config.yaml: valid; 1 benchmark" in out, out
    assert "labelled benchmark my_embeddings (benchmarks.my_embeddings): 2 candidates: clip_b32, clip_b32_pca64" in out, out
    jobs = re.search(r"jobs to run now: (\d+) \((.*)\)", out)
    assert jobs and int(jobs.group(1)) > 0 and "embed_shard 2" in jobs.group(2) and "report 1" in jobs.group(2), out

    run = command(text, "vertebrae run ")
    assert run == "vertebrae run my-config.yaml [snakemake args...]"
    ok(shell(work, run.replace("[snakemake args...]", "--cores 2")))
    report_md = (work / "results" / "reports" / bench / "report.md").read_text(encoding="utf-8")
    ranking = report_md.split("## Ranking", 1)[1].split("\n## ", 1)[0]
    rows = [[cell.strip() for cell in line.split("|")[1:3]] for line in ranking.splitlines()
            if re.match(r"\| \d+ \|", line)]
    assert [rank for rank, _ in rows] == ["1", "2"] and sorted(name for _, name in rows) == \
        ["clip_b32", "clip_b32_pca64"], ranking

    # the docs' first command, in the clone: a real run would repeat the one above, so it is run dry (-n) and
    # must find the same workflow finished (same Snakefile, same config, same outputs)
    first = command(text, "snakemake ")
    assert first == "snakemake --cores all --configfile my-config.yaml"
    out = ok(shell(work, f"{first} -n"))
    assert "Nothing to be done" in out, out[-3000:]

    # overwrite the features with noise in place (same shape, same size on disk): the benchmark's jobs are planned again
    npz = work / source["path"]
    members = dict(np.load(npz))
    members[source["features_key"]] = np.random.default_rng(1).normal(
        size=members[source["features_key"]].shape).astype(np.float32)
    np.savez(npz, **members)
    counts = job_counts(ok(shell(work, f"{first} -n --quiet rules")))
    assert {"fit_extractor", "embed_shard", "merge_embeddings", "write_protocol", "score", "report"} <= set(counts), counts
    assert counts["embed_shard"] == 2 and counts["score"] == 2 and counts["report"] == 1, counts


# ------------------------------------------------------------------------------------------------------------------
# 2. "Embeddings from several models, one file each": the extractors fragment inside a minimal config


N_ROWS, N_QUERIES, N_GALLERY = 120, 12, 30


def wrap(extractors: dict) -> dict:
    """A minimal config around the docs' extractors: the labelled ones (one ``path`` each) compared on a dataset
    of their rows, the per-endpoint one (``files``) on a retrieval dataset."""
    labelled = {name: decl for name, decl in extractors.items() if "files" not in decl}
    retrieval = {name: decl for name, decl in extractors.items() if "files" in decl}
    return {
        "seed": 0,
        "embedding": {"shards": 2, "batch_size": 64},
        "benchmarks": {"models": {
            "dataset": {"source": {"type": "csv", "path": "data/labels.csv", "id_column": "id"}},  # id,label only
            "extractors": labelled,
            "scoring": {"k": 4},
        }},
        "retrieval": {"search": {
            "dataset": {"source": {"type": "npz_pair", "path": "data/pair.npz", "relevance_path": "data/qrels.tsv"}},
            "extractors": retrieval,
        }},
    }


def write_model_files(work: Path, extractors: dict) -> None:
    """The dataset files of ``wrap`` and every embedding file the docs' extractors name, in the formats and
    under the member / dataset / column / ids names they declare, each file's rows in its own order."""
    rng = np.random.default_rng(5)
    ids = np.array([f"row-{i:03d}" for i in range(N_ROWS)])
    labels = np.arange(N_ROWS) % 3
    (work / "data").mkdir()
    # a labels-only table (issue 27): no feature columns, every candidate brings its own rows
    (work / "data/labels.csv").write_text("id,label\n" + "".join(f"{i},{y}\n" for i, y in zip(ids, labels)),
                                          encoding="utf-8")

    def embeddings(dim: int) -> np.ndarray:
        return (3.0 * rng.normal(size=(3, dim))[labels] + rng.normal(size=(N_ROWS, dim))).astype(np.float32)

    def at(decl: dict) -> Path:
        path = work / decl["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    a, b, c, d = (extractors[f"model_{x}"] for x in "abcd")
    order = rng.permutation(N_ROWS)
    np.savez(at(a), **{a["key"]: embeddings(8)[order], a["ids"]: ids[order]})
    with h5py.File(at(b), "w") as handle:
        handle[b["dataset"]] = embeddings(6)[order[::-1]]
        handle[b["ids"]] = ids[order[::-1]].astype("S")
    np.save(at(c), embeddings(5)[order])
    (work / c["ids_path"]).write_text("".join(f"{i}\n" for i in ids[order]), encoding="utf-8")
    matrix = embeddings(4)
    pq.write_table(pa.table({d["ids"]: ids[::-1].tolist(), d["column"]: matrix[::-1].tolist()}), at(d))

    # retrieval: gallery items of 3 topics, each query relevant to its topic's items
    q_ids, g_ids = np.array([f"q{i}" for i in range(N_QUERIES)]), np.array([f"g{i}" for i in range(N_GALLERY)])
    q_topic, g_topic = np.arange(N_QUERIES) % 3, np.arange(N_GALLERY) % 3
    np.savez(work / "data/pair.npz", queries=np.zeros((N_QUERIES, 1)), gallery=np.zeros((N_GALLERY, 1)),
             query_ids=q_ids, gallery_ids=g_ids)
    (work / "data/qrels.tsv").write_text("".join(f"q{q}\tg{g}\t1\n" for q in range(N_QUERIES) for g in range(N_GALLERY)
                                                 if q_topic[q] == g_topic[g]), encoding="utf-8")
    files = extractors["dual"]["files"]
    topics = rng.normal(size=(3, 7))
    np.savez(work / files["query"], embeddings=topics[q_topic] + 0.3 * rng.normal(size=(N_QUERIES, 7)))  # no ids
    gallery = files["gallery"]
    with h5py.File(at(gallery), "w") as handle:
        handle[gallery["dataset"]] = (topics[g_topic] + 0.3 * rng.normal(size=(N_GALLERY, 7)))[::-1]
        handle[gallery["ids"]] = g_ids[::-1].astype("S")
    age(*(path for path in work.rglob("*") if path.is_file() and path.suffix in {".npz", ".h5", ".npy", ".txt",
                                                                                  ".parquet", ".tsv", ".csv"}))


def stand_in_for_a_finished_run(work: Path) -> None:
    """Every output the workflow plans, present and up to date (``--touch`` orders their times along the DAG): a
    real run of five candidates takes minutes on a busy machine, and what is under test is the plan after an edit."""
    summary = ok(shell(work, "snakemake --cores 1 --configfile my-config.yaml --summary")).splitlines()
    start = next(i for i, line in enumerate(summary) if line.startswith("output_file"))
    for line in summary[start + 1:]:
        if line.strip() and "\t" in line:
            path = work / line.split("\t")[0]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
    ok(shell(work, "snakemake --cores 1 --configfile my-config.yaml --touch"))


def test_several_models_one_file_each_validate_and_an_edit_reruns_one_candidate(tmp_path, monkeypatch):
    if pa is None:
        pytest.skip("pyarrow is not installed (the models extra): model_d's Parquet file cannot be written")
    extractors = yaml.safe_load(first_yaml(section(SEVERAL)))["extractors"]
    assert sorted(extractors) == ["dual", "model_a", "model_b", "model_c", "model_d"]
    work = clone_workflow(tmp_path / "checkout")
    write_model_files(work, extractors)
    config = wrap(extractors)
    (work / "my-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")

    out = ok(shell(work, "vertebrae validate my-config.yaml"))
    assert "labelled benchmark models (benchmarks.models): 4 candidates: model_a, model_b, model_c, model_d" in out, out
    assert "retrieval benchmark search (retrieval.search): 1 candidate: dual" in out, out

    stand_in_for_a_finished_run(work)
    monkeypatch.chdir(work)  # plan() reads the extractors' files relative to the current directory, as jobs do
    before = plan(config, base_dir=work)
    with h5py.File(work / extractors["model_b"]["path"], "r+") as handle:  # one value of model_b's file, in place
        handle[extractors["model_b"]["dataset"]][0, 0] += 1.0
    after = plan(config, base_dir=work)
    changed = set(after.specs) - set(before.specs)
    embeds = [fp for fp in changed if after.spec(fp)["stage"] == "embed"]
    assert len(embeds) == 1 and after.spec(embeds[0])["extractor"]["name"] == "model_b", embeds

    out = ok(shell(work, "snakemake --cores all --configfile my-config.yaml -n"))
    counts = job_counts(out)
    candidate = {rule: n for rule, n in counts.items() if rule not in REPORT_SIDE}
    report_side = {rule: n for rule, n in counts.items() if rule in REPORT_SIDE}
    # model_b's plan jobs (its embedding's, its score's, the comparison's and the report's), its 2 shards, merge and
    # score; nothing of the other candidates, of the protocol or of the retrieval benchmark
    assert candidate == {"plan": 4, "embed_shard": 2, "merge_embeddings": 1, "score": 1}, counts
    assert report_side.get("report") == 1 and set(report_side.values()) == {1}, counts
    assert all(fp in out for fp in embeds), "the dry run does not embed model_b's new fingerprint"
