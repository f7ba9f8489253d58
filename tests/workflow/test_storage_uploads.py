"""An upload cut short never leaves a result a later run accepts (issue 47, "Bad input gets a clear error, nothing
lost"), against a local S3-compatible server (moto's, in process, on 127.0.0.1).

Snakemake uploads a job's outputs after the job succeeded (``Job.postprocess`` -> ``DAG.handle_storage``), each file
by one ``upload_file`` (one PUT, or a multipart upload above 8 MB whose object appears only when it completes): an
object is there whole or not at all, and every reader verifies an artifact's content hash. A folder output
(``directory()``: the retrieval fan-out bundle) is uploaded object by object, though, and the S3 plugin takes a folder
with any object under it as there. The working folder the interrupted run used records the job as incomplete (its
rerun redoes the job, ``rerun-incomplete`` in the default profile); a run from another working folder takes the
partial folder as done. ``vertebrae verify --storage`` therefore names a fan-out bundle that lacks a file as bad, and
``--repair`` moves its objects aside, so that the next run restages it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

boto3 = pytest.importorskip("boto3")
moto_server = pytest.importorskip("moto.server")

BUCKET, PREFIX = "vertebrae-uploads", "runs/cut"
URL = f"s3://{BUCKET}/{PREFIX}"


@pytest.fixture(scope="module")
def s3_env() -> dict[str, str]:
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SNAKEMAKE_STORAGE_", "VERTEBRAE_"))}
    env.update(SNAKEMAKE_STORAGE_S3_ENDPOINT_URL=f"http://{host}:{port}", SNAKEMAKE_STORAGE_S3_ACCESS_KEY="key",
               SNAKEMAKE_STORAGE_S3_SECRET_KEY="secret", AWS_DEFAULT_REGION="us-east-1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    client(env).create_bucket(Bucket=BUCKET)
    yield env
    server.stop()


def client(env: dict[str, str]):
    return boto3.client("s3", endpoint_url=env["SNAKEMAKE_STORAGE_S3_ENDPOINT_URL"], region_name="us-east-1",
                        aws_access_key_id=env["SNAKEMAKE_STORAGE_S3_ACCESS_KEY"],
                        aws_secret_access_key=env["SNAKEMAKE_STORAGE_S3_SECRET_KEY"])


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


def upload(env: dict[str, str], workdir: Path, prefix: str) -> None:
    """The run's results under ``prefix/results/`` as Snakemake leaves them: the bundle with the
    ``.snakemake_timestamp`` Snakemake writes into a folder output."""
    s3 = client(env)
    for path in sorted((workdir / "results").rglob("*")):
        if path.is_file():
            s3.upload_file(str(path), BUCKET, f"{prefix}/{path.relative_to(workdir).as_posix()}")
            if path.name == "inputs.json":
                s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{path.parent.relative_to(workdir).as_posix()}/"
                              ".snakemake_timestamp", Body=b"")


def names(env: dict[str, str], prefix: str) -> set[str]:
    pages = client(env).get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/")
    return {item["Key"][len(prefix) + 1:] for page in pages for item in page.get("Contents", [])}


def verify(env: dict[str, str], url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vertebrae", "verify", *args, "--storage", url], env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("lost", ["query.h5", "inputs.json", "all but .snakemake_timestamp"])
def test_a_fanout_bundle_cut_short_is_named_and_repair_moves_it_aside(s3_env, fanout_tree, lost):
    """The bundle uploaded whole verifies; without some of its objects (the state an upload cut short leaves: one
    endpoint, its inputs.json, or all but the hidden object Snakemake adds, which no local check sees) the folder is
    named once by its URL, with what it lacks, and ``--repair`` moves every object left under it aside (the hidden
    one too), so that a run restages it; nothing else moves."""
    workdir, bundle = fanout_tree
    prefix = f"{PREFIX}/{lost.split()[0]}"
    url, folder = f"s3://{BUCKET}/{prefix}", f"results/{bundle}"
    upload(s3_env, workdir, prefix)
    whole = verify(s3_env, url)
    assert whole.returncode == 0 and "every artifact verifies" in whole.stdout, whole.stdout + whole.stderr[-3000:]

    files = [p.name for p in (workdir / folder).iterdir()]
    for name in files if lost.startswith("all") else [lost]:
        client(s3_env).delete_object(Bucket=BUCKET, Key=f"{prefix}/{folder}/{name}")
    before = names(s3_env, prefix)
    cut = verify(s3_env, url)
    assert cut.returncode == 2, cut.stdout + cut.stderr[-3000:]
    lacks = "inputs.json" if lost.startswith("all") else lost
    assert f"bad: {url}/{folder}: the fan-out bundle lacks {lacks}" in cut.stdout, cut.stdout
    assert cut.stdout.count("bad: ") == 1, cut.stdout

    repaired = verify(s3_env, url, "--repair")
    assert repaired.returncode == 0 and f"moved aside: {url}/{folder}: " in repaired.stdout, repaired.stdout
    after = names(s3_env, prefix)
    left = {n for n in before if n.startswith(folder + "/")}
    assert len(left) == (1 if lost.startswith("all") else 6) and not {n for n in after if n.startswith(folder + "/")}
    moved = {n for n in after if n.startswith(folder + ".corrupt-")}
    assert {n.split("/")[-1] for n in moved} == {n.split("/")[-1] for n in left}  # .snakemake_timestamp too
    assert after - moved == before - left  # the embeddings, the relevance rows and the plans stay
    again = verify(s3_env, url)
    assert again.returncode == 0 and "every artifact verifies" in again.stdout, again.stdout + again.stderr[-3000:]


def test_snakemake_takes_a_partly_uploaded_folder_from_another_working_folder_as_done(s3_env, tmp_path):
    """What the check above stands in for: a folder output with part of its objects in the bucket, which a run from
    a working folder other than the interrupted one's (whose record of the job is gone) does not redo."""
    (tmp_path / "Snakefile").write_text(
        'rule all:\n    input: "out/folder"\n\n'
        'rule make:\n    output: directory("out/folder")\n'
        '    shell: "mkdir -p {output} && for i in 1 2 3; do echo $i > {output}/f$i.txt; done"\n', encoding="utf-8")
    flags = ["--snakefile", str(tmp_path / "Snakefile"), "--default-storage-provider", "s3",
             "--default-storage-prefix", f"s3://{BUCKET}/snakemake-folder", "--shared-fs-usage", "none", "--cores", "1"]

    def snakemake(workdir: Path, *args: str) -> str:
        workdir.mkdir(exist_ok=True)
        proc = subprocess.run([sys.executable, "-m", "snakemake", *flags, *args], cwd=workdir, env=s3_env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        return proc.stdout + proc.stderr

    snakemake(tmp_path / "first")
    client(s3_env).delete_object(Bucket=BUCKET, Key="snakemake-folder/out/folder/f2.txt")  # the upload cut short
    assert "Nothing to be done" in snakemake(tmp_path / "second", "-n")
    shutil.rmtree(tmp_path / "first")
