"""Object storage (issue 47, part 2): ``vertebrae run CONFIG --storage s3://BUCKET/PREFIX`` against a local
S3-compatible server (moto's, started here on 127.0.0.1), with ``--shared-fs-usage none``: the data lives only in
the bucket (the config names some of it by ``s3://`` URL, the rest by path under the prefix), the results are written
there, the reports equal a local run's, a rerun does nothing and a replaced source object reruns only its dependents.
Storage a run cannot use is refused before any job starts, naming the URL and what is missing; no credential appears
in a log, a report or a fingerprint."""

from __future__ import annotations

import io
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from docs_support import block
from small_workflow import small_config, write
from workflow_support import comparable, job_counts, snakemake
from vertebrae.core.errors import ConfigError
from vertebrae.core.storage import StorageError, check_storage, snakemake_flags, storage_option
from vertebrae.planning import benchmarks_from_config

boto3 = pytest.importorskip("boto3")
moto_server = pytest.importorskip("moto.server")

BUCKET, PREFIX = "vertebrae-test", "runs/small"
URL = f"s3://{BUCKET}/{PREFIX}"
SECRET = "vertebrae-test-secret-5f1c0d"  # moto takes any key: this one must appear nowhere


@pytest.fixture(scope="module")
def server():
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(scope="module")
def s3_env(server) -> dict[str, str]:
    """The environment of a run on the server: endpoint and credentials as the S3 plugin and boto3 read them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SNAKEMAKE_STORAGE_", "VERTEBRAE_"))}
    env.update(SNAKEMAKE_STORAGE_S3_ENDPOINT_URL=server, SNAKEMAKE_STORAGE_S3_ACCESS_KEY="vertebrae-test-key",
               SNAKEMAKE_STORAGE_S3_SECRET_KEY=SECRET, AWS_DEFAULT_REGION="us-east-1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return env


def client(env: dict[str, str]):
    return boto3.client("s3", endpoint_url=env["SNAKEMAKE_STORAGE_S3_ENDPOINT_URL"], region_name="us-east-1",
                        aws_access_key_id=env["SNAKEMAKE_STORAGE_S3_ACCESS_KEY"],
                        aws_secret_access_key=env["SNAKEMAKE_STORAGE_S3_SECRET_KEY"])


def vertebrae_run(workdir: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vertebrae", "run", "--verbose", "config.yaml", "--storage", URL,
                           "--cores", "2", *args], cwd=workdir, env=env, capture_output=True, text=True)


@pytest.fixture(scope="module")
def bucket(s3_env) -> str:
    """The test bucket, made once per module (the tests that use it run alone as well as after the run)."""
    client(s3_env).create_bucket(Bucket=BUCKET)
    return BUCKET


@pytest.fixture(scope="module")
def s3_run(tmp_path_factory, s3_env, bucket) -> Path:
    """The small workflow run on the bucket from a working folder that holds only its config: the data files are
    uploaded under the prefix, then removed from the folder."""
    data_root = tmp_path_factory.mktemp("s3-data")
    config = small_config(data_root)
    s3 = client(s3_env)
    for folder in ("data", "emb"):
        for path in (data_root / folder).iterdir():
            s3.upload_file(str(path), BUCKET, f"{PREFIX}/{folder}/{path.name}")
    config["benchmarks"]["models"]["extractors"]["a"]["path"] = f"{URL}/emb/a.npz"  # a URL, or a path under PREFIX
    config["retrieval"]["search"].pop("scoring")  # one score job, not a fan-out: the very same score, fewer jobs
    workdir = tmp_path_factory.mktemp("s3-run")
    write(workdir, config)
    proc = vertebrae_run(workdir, s3_env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    # the working folder holds the config, Snakemake's own folder and the plan jobs' spec files (kept local)
    kept = sorted(str(p.relative_to(workdir)) for p in workdir.rglob("*") if ".snakemake" not in p.parts and p.is_file())
    assert all(p == "config.yaml" or p.startswith("results/.vertebrae/") for p in kept), kept
    return workdir


def stored_report(env: dict[str, str], benchmark: str) -> dict:
    body = client(env).get_object(Bucket=BUCKET, Key=f"{PREFIX}/results/reports/{benchmark}/report.json")["Body"]
    return json.loads(body.read())


@pytest.fixture(scope="module")
def local_reports(tmp_path_factory) -> dict[str, dict]:
    """The same small workflow's reports from local files: the labelled one run in process (the workflow's reports
    equal an in-process run's: tests/workflow/test_builtin_metrics.py), the retrieval one (its per-endpoint files
    have no in-process twin) by Snakemake, its jobs served, one score job as on the bucket."""
    workdir = tmp_path_factory.mktemp("local-run")
    config = small_config(workdir)
    config["retrieval"]["search"].pop("scoring")
    snakemake(workdir, "results/reports/search/report.json", "--configfile", str(write(workdir, config)))
    cwd = os.getcwd()
    os.chdir(workdir)  # the config's paths are relative to the working folder
    try:
        labelled = benchmarks_from_config(config)["models"].run().to_dict()
    finally:
        os.chdir(cwd)
    return {"models": json.loads(json.dumps(labelled)),
            "search": json.loads((workdir / "results" / "reports" / "search" / "report.json").read_text())}


def test_reports_on_the_bucket_equal_a_local_run(s3_run, s3_env, local_reports):
    for benchmark, local in local_reports.items():
        assert comparable(stored_report(s3_env, benchmark)) == comparable(local)


def test_no_credential_in_logs_reports_or_fingerprints(s3_run, s3_env):
    for path in s3_run.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    s3 = client(s3_env)
    for item in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{PREFIX}/results/")["Contents"]:
        assert SECRET.encode() not in s3.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read(), item["Key"]


def vertebrae_verify(workdir: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vertebrae", "verify", *args], cwd=workdir, env=env,
                          capture_output=True, text=True)


def documented_verify() -> list[list[str]]:
    """The commands of docs/cloud.md's "Checking the results in the bucket", as written: check, repair, rerun."""
    lines = [shlex.split(line) for line in block("docs/cloud.md", "Checking the results in the bucket", "bash")
             .splitlines() if line.strip()]
    doc_url = "s3://BUCKET/PREFIX"
    assert lines == [["vertebrae", "verify", "--storage", doc_url], ["vertebrae", "verify", "--repair", "--storage",
                     doc_url], ["vertebrae", "run", "my-config.yaml", "--storage", doc_url]], lines
    return [[URL if word == doc_url else word for word in line[2:]] for line in lines]


def _nudged(value):
    """``value`` (a JSON document) with its first non-integral number changed; None when it holds none."""
    if isinstance(value, float) and value == value:
        return value + 0.125
    items = list(value.items()) if isinstance(value, dict) else list(enumerate(value)) if isinstance(value, list) else []
    for key, item in items:
        changed = _nudged(item)
        if changed is not None:
            value[key] = changed
            return value
    return None


def test_verify_checks_the_objects_and_repair_in_the_bucket_rebuilds_exactly_them(s3_run, s3_env):
    """``vertebrae verify --storage URL``: the bucket's results verify; a number changed in a score object is named by
    its URL (exit status 2); ``--repair`` moves it and what was built from it aside in the bucket, and a rerun on
    storage rebuilds exactly those, to the same reports. Placed before the rerun test below, which replaces a data
    object (a rerun after it would rebuild more)."""
    check, repair, _ = documented_verify()  # the docs' commands, run as written (on this bucket)
    clean = vertebrae_verify(s3_run, s3_env, *check)
    assert clean.returncode == 0 and "every artifact verifies" in clean.stdout, clean.stdout + clean.stderr[-3000:]
    s3 = client(s3_env)
    before = {name: stored_report(s3_env, name) for name in ("models", "search")}
    fingerprint = before["models"]["extractor_results"][0]["metadata"]["score_fingerprint"]
    key = f"{PREFIX}/results/scores/{fingerprint}.json"  # candidate a's labelled score: a number in it changed
    document = json.loads(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    assert _nudged(document.get("payload", document)) is not None
    s3.put_object(Bucket=BUCKET, Key=key, Body=json.dumps(document).encode())

    bad = vertebrae_verify(s3_run, s3_env, *check)
    assert bad.returncode == 2, bad.stdout + bad.stderr[-3000:]
    assert f"bad: s3://{BUCKET}/{key}: " in bad.stdout and bad.stdout.count("bad: ") == 1, bad.stdout
    assert "/tmp" not in bad.stdout and "vertebrae-verify-" not in bad.stdout + bad.stderr  # no local copy named
    assert f"--storage {URL}" in bad.stderr

    repaired = vertebrae_verify(s3_run, s3_env, *repair)
    assert repaired.returncode == 0 and f"moved aside: s3://{BUCKET}/{key}: " in repaired.stdout, repaired.stderr
    names = {item["Key"] for item in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{PREFIX}/results/")["Contents"]}
    assert key not in names and any(n.startswith(key + ".corrupt-") for n in names)
    report = f"{PREFIX}/results/reports/models/report.json"
    assert report not in names and any(n.startswith(report + ".corrupt-") for n in names)
    assert f"{PREFIX}/results/reports/search/report.json" in names  # the other benchmark's untouched

    rerun = vertebrae_run(s3_run, s3_env)  # the docs' third line (config.yaml here), with --verbose and --cores 2
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    counts = job_counts(rerun.stdout + rerun.stderr)  # Snakemake's job table: the moved objects' jobs, no others
    assert counts.get("score") == 1 and counts.get("report") == 1 and "score_retrieval" not in counts, counts
    assert not {"embed_shard", "merge_embeddings", "write_protocol", "embed_retrieval_shard"} & set(counts), counts
    for name, report_before in before.items():
        assert comparable(stored_report(s3_env, name)) == comparable(report_before)
    again = vertebrae_verify(s3_run, s3_env, *check)  # the rebuilt leaderboard links every report file (its
    assert again.returncode == 0, again.stdout + again.stderr[-3000:]  # report.md is a declared input on storage)
    assert "every artifact verifies" in again.stdout, again.stdout


def test_repair_moves_a_bundle_folders_objects_and_a_file_as_the_local_moves_name_them(s3_env, bucket, tmp_path):
    """``move_in_bucket`` replays ``quarantine``'s local moves: a fan-out bundle folder moves every object under its
    key (hidden ones too), a file its one object, under the same ``.corrupt-`` names; nothing else moves."""
    from vertebrae.core.storage import storage_client
    from vertebrae.stages.verify_storage import move_in_bucket

    s3, prefix = client(s3_env), "moves/results"
    bundle = "retrieval/fanouts/0123456789abcdef"
    kept = [f"{prefix}/retrieval/fanouts/fedcba9876543210/inputs.json", f"{prefix}/{bundle}-other/x.h5"]
    for key in [f"{prefix}/{bundle}/{name}" for name in ("inputs.json", "query.h5", ".hidden")] + \
            [f"{prefix}/scores/aaaaaaaaaaaaaaaa.json", *kept]:
        s3.put_object(Bucket=BUCKET, Key=key, Body=key.encode())
    tree = tmp_path / "results"
    (tree / f"{bundle}.corrupt-T").mkdir(parents=True)  # the local tree after quarantine
    moved = [(str(tree / "scores/aaaaaaaaaaaaaaaa.json"), str(tree / "scores/aaaaaaaaaaaaaaaa.json.corrupt-T")),
             (str(tree / bundle), str(tree / f"{bundle}.corrupt-T"))]
    done = move_in_bucket(storage_client(URL, environ=s3_env, endpoint=s3_env["SNAKEMAKE_STORAGE_S3_ENDPOINT_URL"]),
                          BUCKET, moved, tree, prefix)
    names = {item["Key"] for item in s3.list_objects_v2(Bucket=BUCKET, Prefix="moves/")["Contents"]}
    assert names == {f"{prefix}/{bundle}.corrupt-T/{name}" for name in ("inputs.json", "query.h5", ".hidden")} | \
        {f"{prefix}/scores/aaaaaaaaaaaaaaaa.json.corrupt-T", *kept}
    assert len(done) == 4 and done[-1] == (f"{prefix}/scores/aaaaaaaaaaaaaaaa.json",
                                           f"{prefix}/scores/aaaaaaaaaaaaaaaa.json.corrupt-T")  # the bad one last
    body = s3.get_object(Bucket=BUCKET, Key=f"{prefix}/{bundle}.corrupt-T/query.h5")["Body"].read()
    assert body == f"{prefix}/{bundle}/query.h5".encode()


def test_verify_refuses_storage_it_cannot_read_and_a_bare_url(s3_env, bucket, tmp_path):
    missing = vertebrae_verify(tmp_path, s3_env, "--storage", "s3://absent-bucket/p")
    assert missing.returncode == 2 and "s3://absent-bucket/p" in missing.stderr and "does not exist" in missing.stderr
    empty = vertebrae_verify(tmp_path, s3_env, "--storage", f"s3://{BUCKET}/nothing-here")
    assert empty.returncode == 2 and f"s3://{BUCKET}/nothing-here/results/" in empty.stderr, empty.stderr
    bare = vertebrae_verify(tmp_path, s3_env, URL)
    assert bare.returncode == 2 and f"--storage {URL}" in bare.stderr, bare.stderr
    assert sorted(tmp_path.iterdir()) == []


def test_a_rerun_does_nothing_and_a_replaced_object_reruns_its_dependents(s3_run, s3_env):
    again = vertebrae_run(s3_run, s3_env, "-n")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Nothing to be done" in again.stdout + again.stderr
    # new query embeddings of candidate qa (its recipe covers both its files): only its retrieval jobs and the report
    s3 = client(s3_env)
    old = np.load(io.BytesIO(s3.get_object(Bucket=BUCKET, Key=f"{PREFIX}/emb/qa_query.npz")["Body"].read()))
    buffer = io.BytesIO()
    np.savez(buffer, embeddings=old["embeddings"][:, ::-1].copy(), ids=old["ids"])
    s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/emb/qa_query.npz", Body=buffer.getvalue())
    dry = vertebrae_run(s3_run, s3_env, "-n", "--quiet", "rules")
    assert dry.returncode == 0, dry.stderr[-3000:]
    counts = job_counts(dry.stdout)
    assert counts.get("embed_retrieval_shard", 0) >= 1 and counts.get("report") == 1, counts
    assert not {"embed_shard", "merge_embeddings", "score", "write_protocol"} & set(counts), counts


def test_storage_maps_to_the_plain_snakemake_flags():
    assert storage_option(["--cores", "2", "--storage", URL]) == (URL, ["--cores", "2"])
    assert snakemake_flags(URL + "/") == ["--default-storage-provider", "s3", "--default-storage-prefix", URL,
                                          "--shared-fs-usage", "none"]
    with pytest.raises(ConfigError, match="gs://b/p"):
        storage_option(["--storage", "gs://b/p"])


def test_unusable_storage_is_refused_naming_the_url(s3_env, monkeypatch):
    endpoint = s3_env["SNAKEMAKE_STORAGE_S3_ENDPOINT_URL"]
    with pytest.raises(StorageError, match=r"s3://no-such-bucket/x.*does not exist"):
        check_storage("s3://no-such-bucket/x", endpoint=endpoint, environ=s3_env)
    with pytest.raises(StorageError, match=r"s3://vertebrae-test/x.*unreachable"):
        check_storage("s3://vertebrae-test/x", endpoint="http://127.0.0.1:9", environ=s3_env)
    for name in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-metadata lookup either
    with pytest.raises(StorageError, match=r"s3://vertebrae-test/x.*no credentials"):
        check_storage("s3://vertebrae-test/x", endpoint=endpoint, environ={})


def test_refused_before_any_job_starts(s3_env, tmp_path):
    """An s3:// path without a storage provider, a credential on the command line, storage that is not there: the
    run ends at once (exit status 2), naming the URL or key, writing nothing."""
    write(tmp_path, {"benchmarks": {"m": {"dataset": {"source": {"type": "npz", "path": f"{URL}/data/rows.npz"}},
                                          "extractors": {"raw": {"type": "precomputed"}}}}})
    env = {k: v for k, v in s3_env.items()}
    plain = subprocess.run([sys.executable, "-m", "vertebrae", "run", "config.yaml", "-n"], cwd=tmp_path, env=env,
                           capture_output=True, text=True)
    assert plain.returncode == 2 and f"benchmarks.m.dataset.source.path: '{URL}/data/rows.npz'" in plain.stderr
    checked = subprocess.run([sys.executable, "-m", "vertebrae", "validate", "config.yaml"], cwd=tmp_path, env=env,
                             capture_output=True, text=True)
    assert checked.returncode == 2 and "--storage" in checked.stderr and f"'{URL}/data/rows.npz'" in checked.stderr
    flagged = vertebrae_run(tmp_path, env, "--storage-s3-secret-key", SECRET)
    assert flagged.returncode == 2 and "--storage-s3-secret-key" in flagged.stderr and SECRET not in flagged.stderr
    missing = subprocess.run([sys.executable, "-m", "vertebrae", "run", "config.yaml", "--storage", "s3://absent-bucket/p"],
                             cwd=tmp_path, env=env, capture_output=True, text=True)
    assert missing.returncode == 2 and "s3://absent-bucket/p" in missing.stderr and "does not exist" in missing.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]
