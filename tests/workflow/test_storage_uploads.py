"""An upload cut short never leaves a result a later run accepts (issue 47, "Bad input gets a clear error, nothing
lost"), against a local S3-compatible server (moto's, in process, on 127.0.0.1).

Snakemake uploads a job's outputs after the job succeeded (``Job.postprocess`` -> ``DAG.handle_storage``), each file
by one ``upload_file`` (one PUT, or a multipart upload above 8 MB whose object appears only when it completes): an
object is there whole or not at all, and every reader verifies an artifact's content hash. A folder output
(``directory()``: a retrieval fan-out bundle, a layer sweep's shard folder) is uploaded object by object, though, and
the S3 plugin takes a folder with any object under it as there. The working folder the interrupted run used records
the job as incomplete (its rerun redoes the job, ``rerun-incomplete`` in the default profile); a run from another
working folder takes the partial folder as done (tests/workflow/test_storage_policies.py shows it on a small
Snakefile). ``vertebrae verify --storage`` therefore names such a folder that lacks a file as bad, and ``--repair``
moves its objects aside, so that the next run makes it again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto.server")
from moto_bucket import client, moto_bucket  # noqa: E402

BUCKET, PREFIX = "vertebrae-uploads", "runs/cut"
URL = f"s3://{BUCKET}/{PREFIX}"


@pytest.fixture(scope="module")
def s3_env():
    with moto_bucket(BUCKET) as env:
        yield env


@pytest.fixture(scope="module")
def fanout_tree(tmp_path_factory) -> tuple[Path, str]:
    """A retrieval benchmark's results up to its fan-out bundle (2 gallery shards), made in process by the jobs a run
    makes them with (plan, embed, merge, write relevance, stage-retrieval-fanout); the working folder and the
    bundle's key under the out folder."""
    from vertebrae.cli import main
    from vertebrae.planning import plan

    workdir = tmp_path_factory.mktemp("fanout-run")
    cwd = os.getcwd()
    os.chdir(workdir)  # the plan's paths are relative to the working folder
    try:
        rng = np.random.default_rng(0)
        np.savez("pair.npz", queries=rng.normal(size=(9, 6)).astype(np.float32),
                 gallery=rng.normal(size=(12, 6)).astype(np.float32), query_ids=np.array([f"q{i}" for i in range(9)]),
                 gallery_ids=np.array([f"g{j}" for j in range(12)]))
        Path("qrels.tsv").write_text("".join(f"q{i}\tg{j}\t1\n" for i in range(9) for j in range(12) if i % 3 == j % 3),
                                     encoding="utf-8")
        p = plan({"embedding": {"shards": 1}, "retrieval": {"pairs": {
            "dataset": {"source": {"type": "npz_pair", "path": "pair.npz", "relevance_path": "qrels.tsv"},
                        "identity": {"kind": "declared", "name": "pairs", "revision": "1"}},
            "extractors": {"raw": {"type": "precomputed"}}, "scoring": {"gallery_shards": 2}}}})

        def job(*argv):
            assert main([str(a) for a in argv]) == 0, argv

        for fp in p.planned():
            job("plan", "--spec", p.spec_json(fp), "--output", p.plan_path(fp))
        for fp in p.fingerprints("embed"):
            shards = p.shard_paths(fp)
            for i, shard in enumerate(shards):
                job("embed-retrieval-shard", "--plan-json", p.plan_path(fp), "--side", p.spec(fp)["side"],
                    "--shard-index", i, "--output", shard)
            job("merge-retrieval-embeddings", "--plan-json", p.plan_path(fp), "--output",
                p.artifact_path("embedding", fp, protocol="retrieval"), *shards)
        for fp in p.fingerprints("retrieval-protocol"):
            job("write-retrieval-relevance", "--plan-json", p.plan_path(fp), "--output",
                p.artifact_path("protocol", fp, protocol="retrieval"))
        (merge,) = p.fingerprints("merge-retrieval-partials")
        inputs, bundle = p.inputs(merge, fanout=True), p.artifact_path("fanout", merge, protocol="retrieval")
        job("stage-retrieval-fanout", "--plan-json", inputs["plan"], "--queries", inputs["queries"], "--gallery",
            inputs["gallery"], "--protocol", inputs["protocol"], "--output", bundle)
    finally:
        os.chdir(cwd)
    return workdir, Path(bundle).relative_to("results").as_posix()


@pytest.fixture(scope="module")
def sweep_tree(tmp_path_factory) -> tuple[Path, str]:
    """A layer sweep's shard folder (a tiny timm ViT, layers 0 and -1, 4 images, one shard), made in process by the
    jobs a run makes it with (plan, embed-sweep-shard); the working folder and the folder's key under the out
    folder."""
    import tiny_models

    from vertebrae.cli import main
    from vertebrae.planning import plan

    workdir = tmp_path_factory.mktemp("sweep-run")
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        tiny_models.build_timm(Path("models/vit"))
        images = tiny_models.write_images(Path("data/images"), 4)
        Path("data/images.csv").write_text("image,label,id\n" + "".join(
            f"images/{path.name},{'ab'[i % 2]},i{i}\n" for i, path in enumerate(images)), encoding="utf-8")
        p = plan({"embedding": {"shards": 1, "batch_size": 4}, "benchmarks": {"pictures": {
            "dataset": {"source": {"type": "manifest", "path": "data/images.csv", "image_column": "image",
                                   "id_column": "id"},
                        "identity": {"kind": "declared", "revision": "1", "name": "pics"}},
            "extractors": {"vit": {"type": "timm", "checkpoint": "models/vit", "device": "cpu",
                                   "hidden_layers": [0, -1]}}}}})
        for fp in p.planned():
            assert main(["plan", "--spec", p.spec_json(fp), "--output", p.plan_path(fp)]) == 0, fp
        (sweep,) = p.fingerprints("embed-sweep")
        folder = p.artifact_path("sweep-shard", sweep, shard=(0, 1))
        assert main(["embed-sweep-shard", "--plan-json", p.plan_path(sweep), "--shard-index", "0", "--output",
                     folder]) == 0
    finally:
        os.chdir(cwd)
    return workdir, Path(folder).relative_to("results").as_posix()


def upload(env: dict[str, str], workdir: Path, prefix: str, folder: str) -> None:
    """The run's results under ``prefix/results/`` as Snakemake leaves them: the folder output ``folder`` (under the
    working folder) with the ``.snakemake_timestamp`` Snakemake writes into one."""
    s3 = client(env)
    for path in sorted((workdir / "results").rglob("*")):
        if path.is_file() and ".vertebrae" not in path.parts:  # no job's declared output: kept local
            s3.upload_file(str(path), BUCKET, f"{prefix}/{path.relative_to(workdir).as_posix()}")
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{folder}/.snakemake_timestamp", Body=b"")


def names(env: dict[str, str], prefix: str) -> set[str]:
    pages = client(env).get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/")
    return {item["Key"][len(prefix) + 1:] for page in pages for item in page.get("Contents", [])}


def verify(env: dict[str, str], url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vertebrae", "verify", *args, "--storage", url], env=env,
                          capture_output=True, text=True, timeout=300)


def cut_then_repaired(env: dict[str, str], workdir: Path, prefix: str, folder: str, lost: list[str],
                      problem: str, *, controls: bool = True) -> None:
    """The results uploaded whole verify; with the objects ``lost`` of the folder output ``folder`` gone (the state
    an upload cut short leaves), the folder is named once by its URL, with ``problem``; ``--repair`` moves every
    object left under it aside (the hidden one too), so that a run makes it again; nothing else moves, and what is
    left verifies. ``controls`` False: the checks before the cut and after the repair left out (the same tree's
    other cases make them)."""
    url = f"s3://{BUCKET}/{prefix}"
    upload(env, workdir, prefix, folder)
    if controls:
        whole = verify(env, url)
        assert whole.returncode == 0 and "every artifact verifies" in whole.stdout, whole.stdout + whole.stderr[-3000:]

    for name in lost:
        client(env).delete_object(Bucket=BUCKET, Key=f"{prefix}/{folder}/{name}")
    before = names(env, prefix)
    cut = verify(env, url)
    assert cut.returncode == 2, cut.stdout + cut.stderr[-3000:]
    assert f"bad: {url}/{folder}: {problem}" in cut.stdout and cut.stdout.count("bad: ") == 1, cut.stdout

    repaired = verify(env, url, "--repair")
    assert repaired.returncode == 0 and f"moved aside: {url}/{folder}: " in repaired.stdout, repaired.stdout
    after = names(env, prefix)
    left = {n for n in before if n.startswith(folder + "/")}
    assert ".snakemake_timestamp" in {n.split("/")[-1] for n in left}
    assert not {n for n in after if n.startswith(folder + "/")}
    moved = {n for n in after if n.startswith(folder + ".corrupt-")}
    assert sorted(n.split("/")[-1] for n in moved) == sorted(n.split("/")[-1] for n in left)
    assert after - moved == before - left  # the other objects stay
    if controls:
        again = verify(env, url)
        assert again.returncode == 0 and "every artifact verifies" in again.stdout, again.stdout + again.stderr[-3000:]


@pytest.mark.parametrize("lost", ["query.h5", "inputs.json", "all but .snakemake_timestamp"])
def test_a_fanout_bundle_cut_short_is_named_and_repair_moves_it_aside(s3_env, fanout_tree, lost):
    """One endpoint gone, its inputs.json, or all but the hidden object Snakemake adds (which no local check sees)."""
    workdir, bundle = fanout_tree
    folder = f"results/{bundle}"
    files = sorted(p.name for p in (workdir / folder).iterdir())
    gone = files if lost.startswith("all") else [lost]
    lacks = "inputs.json" if lost.startswith("all") else lost
    cut_then_repaired(s3_env, workdir, f"{PREFIX}/{lost.split()[0]}", folder, gone,
                      f"the fan-out bundle lacks {lacks}", controls=lost == "query.h5")


def test_a_layer_sweep_shard_folder_cut_short_is_named_and_repair_moves_it_aside(s3_env, sweep_tree):
    """One layer's shard file gone: the folder lacks the file its sweep's plan names."""
    workdir, shard = sweep_tree
    folder = f"results/{shard}"
    layer = sorted(p.name for p in (workdir / folder).iterdir())[-1]
    cut_then_repaired(s3_env, workdir, f"{PREFIX}/sweep", folder, [layer],
                      f"the layer sweep's shard folder lacks {layer}, which the sweep's plan names")
