"""Storage the credentials may not write, against a server that enforces IAM policies (issue 47, "Bad input gets a
clear error, nothing lost"): ``vertebrae run CONFIG --storage URL`` and ``vertebrae verify --repair --storage URL``
with credentials that may read but not write are refused before any job starts, naming the URL and the missing write
access, writing nothing in the bucket and showing no key; ``vertebrae verify --storage URL`` works with them; a user
with no access at all is refused naming the URL. The policies are docs/cloud.md's, as written, and the run policy
is all a Snakemake run with the S3 plugin needs (a forced job's old output is deleted: DeleteObject).

moto enforces policies once its count of unchecked requests (``INITIAL_NO_AUTH_ACTION_COUNT``, moto.settings, from the
environment at import, or set at run time by a POST to ``/moto-api/reset-auth``) is used up; by default it is
unbounded, and every request is allowed (tests/workflow/test_object_storage.py's in-process server). Here a moto
server of its own, a separate process, gets its users, policies and bucket unchecked, then enforces policies on
every request after ``reset-auth`` sets the count to 0; the other tests' server is not touched."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from docs_support import block
from small_workflow import small_config, write
from vertebrae.core.storage import StorageError, check_storage

boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto.server")

BUCKET, PREFIX = "vertebrae-policies", "runs/small"
URL = f"s3://{BUCKET}/{PREFIX}"
#: moto checks a request's operation name as the action (s3:HeadBucket, s3:ListObjectsV2, s3:HeadObject); AWS checks
#: the IAM action the operation needs (s3:ListBucket, s3:GetObject). A policy written for AWS, as a user writes it,
#: gets moto's names for the same operations added.
MOTO_NAMES = {"s3:ListBucket": ["s3:HeadBucket", "s3:ListObjectsV2", "s3:ListObjects"],
              "s3:GetObject": ["s3:HeadObject"]}


def documented_policy(only: tuple[str, ...] | None = None) -> dict:
    """docs/cloud.md's policy for a run's credentials, as written, on this bucket and prefix; ``only``: with no
    action but these (the documented reader: s3:ListBucket and s3:GetObject)."""
    text = block("docs/cloud.md", "What the credentials must allow", "text")
    policy = json.loads(text.replace("BUCKET", BUCKET).replace("PREFIX", PREFIX))
    for statement in policy["Statement"]:
        statement["Action"] = [a for a in statement["Action"] if only is None or a in only]
    return policy


def on_moto(policy: dict) -> dict:
    for statement in policy["Statement"]:
        statement["Action"] += [name for action in statement["Action"] for name in MOTO_NAMES.get(action, [])]
    return policy


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A moto server in a process of its own, on 127.0.0.1; its endpoint URL."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MOTO_", "INITIAL_NO_AUTH"))}
    log = tmp_path_factory.mktemp("moto") / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                env=env, stdout=out, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
                time.sleep(0.1)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def users(server) -> dict[str, tuple[str, str]]:
    """Access key and secret of each user, made while the server checks nothing; every request after this one is
    checked against the caller's policies. ``admin``: any S3 action; ``runner``: docs/cloud.md's policy; ``reader``:
    its s3:ListBucket and s3:GetObject alone; ``no-delete``: those and s3:PutObject; ``nobody``: no policy."""
    anyone = dict(endpoint_url=server, region_name="us-east-1", aws_access_key_id="setup",
                  aws_secret_access_key="setup")
    iam = boto3.client("iam", **anyone)
    policies = {"admin": {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*",
                                                                  "Resource": "*"}]},
                "runner": on_moto(documented_policy()),
                "reader": on_moto(documented_policy(("s3:ListBucket", "s3:GetObject"))),
                "no-delete": on_moto(documented_policy(("s3:ListBucket", "s3:GetObject", "s3:PutObject"))),
                "nobody": None}
    keys = {}
    for name, policy in policies.items():
        iam.create_user(UserName=name)
        if policy is not None:
            iam.put_user_policy(UserName=name, PolicyName="vertebrae", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName=name)["AccessKey"]
        keys[name] = key["AccessKeyId"], key["SecretAccessKey"]
    boto3.client("s3", **anyone).create_bucket(Bucket=BUCKET)
    request = urllib.request.Request(f"{server}/moto-api/reset-auth", data=b"0", method="POST",
                                     headers={"Content-Type": "text/plain"})  # not a form: moto reads the body
    urllib.request.urlopen(request, timeout=10).close()
    return keys


def client(server: str, keys: tuple[str, str]):
    return boto3.client("s3", endpoint_url=server, region_name="us-east-1", aws_access_key_id=keys[0],
                        aws_secret_access_key=keys[1])


def env_of(server: str, keys: tuple[str, str]) -> dict[str, str]:
    """The environment of a user's command: the endpoint and that user's key, as the S3 plugin and boto3 read them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SNAKEMAKE_STORAGE_", "VERTEBRAE_"))}
    env.update(SNAKEMAKE_STORAGE_S3_ENDPOINT_URL=server, SNAKEMAKE_STORAGE_S3_ACCESS_KEY=keys[0],
               SNAKEMAKE_STORAGE_S3_SECRET_KEY=keys[1], AWS_DEFAULT_REGION="us-east-1",
               AWS_SHARED_CREDENTIALS_FILE="/nonexistent", AWS_CONFIG_FILE="/nonexistent",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return env


def vertebrae(workdir: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vertebrae", *args], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=300)


def keys_in_bucket(server: str, users: dict) -> list[str]:
    pages = client(server, users["admin"]).get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
    return sorted(item["Key"] for page in pages for item in page.get("Contents", []))


@pytest.fixture(scope="module")
def stored(server, users, tmp_path_factory) -> dict:
    """The bucket as a run finds it: a small labelled config's data under the prefix (the run would start jobs on
    it), and a results tree that verifies (one labelled report); returns the config."""
    from sklearn.datasets import load_iris

    from vertebrae import Benchmark, BenchmarkDataset, DatasetIdentity, OverlapScoringConfig
    from vertebrae.extractors import PrecomputedExtractor
    from vertebrae.results.base import with_content_hash
    from vertebrae.scoring.paired.rows import RowResamplingConfig

    data_root = tmp_path_factory.mktemp("policies-data")
    config = small_config(data_root)
    config.pop("retrieval")  # the labelled benchmark: rows.npz and one candidate's a.npz
    admin = client(server, users["admin"])
    for name in ("data/rows.npz", "emb/a.npz"):
        admin.upload_file(str(data_root / name), BUCKET, f"{PREFIX}/{name}")
    X, y = load_iris(return_X_y=True)
    dataset = BenchmarkDataset.from_arrays(X, y, identity=DatasetIdentity.declared("iris", "1"))
    report = Benchmark(dataset, [PrecomputedExtractor("raw")], scoring_config=OverlapScoringConfig(k=3),
                       row_resampling=RowResamplingConfig(resamples=20), seed=0, name="iris").run().to_dict()
    admin.put_object(Bucket=BUCKET, Key=f"{PREFIX}/results/reports/iris/report.json",
                     Body=json.dumps(with_content_hash(json.loads(json.dumps(report)))).encode())
    return config


@pytest.fixture
def workdir(stored, tmp_path) -> Path:
    """A working folder that holds only the config."""
    write(tmp_path, stored)
    return tmp_path


def documented_refusals() -> list[re.Pattern]:
    """docs/cloud.md's list of refusals, each line a pattern on this bucket and prefix (the endpoint, which the test
    server has, after the URL; "..." standing for the rest of a message)."""
    lines = block("docs/cloud.md", "What the credentials must allow", "text", 1).splitlines()
    patterns = []
    for line in filter(None, lines):
        pattern = re.escape(line.replace("BUCKET", BUCKET).replace("PREFIX", PREFIX)).replace(r"\.\.\.", ".*")
        patterns.append(re.compile(pattern.replace(re.escape(URL + ":"), re.escape(URL) + r" \(endpoint [^)]*\):")))
    return patterns


def refused(proc: subprocess.CompletedProcess, what: str, keys: tuple[str, str]) -> None:
    """Exit status 2 and one message naming the URL and ``what``, as docs/cloud.md lists it, with no key and no
    trace in the output."""
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert f"--storage {URL}" in proc.stderr and what in proc.stderr, out[-3000:]
    assert keys[1] not in out and keys[0] not in out and "Traceback" not in out, out[-3000:]
    message = proc.stderr.strip()
    assert any(p.fullmatch(message) for p in documented_refusals()), f"not among docs/cloud.md's refusals: {message}"


def test_a_run_without_write_access_is_refused_before_any_job_starts(server, users, workdir):
    """``vertebrae run config.yaml --storage URL`` as a user types it, with credentials that may read the data but
    not write: no job starts (no Snakemake folder, no results), nothing is written in the bucket."""
    before = keys_in_bucket(server, users)
    proc = vertebrae(workdir, env_of(server, users["reader"]), "run", "config.yaml", "--storage", URL)
    refused(proc, "no write access under the prefix", users["reader"])
    assert sorted(p.name for p in workdir.iterdir()) == ["config.yaml"]
    assert keys_in_bucket(server, users) == before


def test_verify_reads_with_read_access_and_repair_is_refused(server, users, workdir):
    env, before = env_of(server, users["reader"]), keys_in_bucket(server, users)
    check = vertebrae(workdir, env, "verify", "--storage", URL)
    assert check.returncode == 0 and "every artifact verifies" in check.stdout, check.stdout + check.stderr[-3000:]
    repair = vertebrae(workdir, env, "verify", "--repair", "--storage", URL)
    refused(repair, "no write access under the prefix", users["reader"])
    assert keys_in_bucket(server, users) == before


def test_no_access_at_all_is_refused_naming_the_url(server, users, workdir):
    env, before = env_of(server, users["nobody"]), keys_in_bucket(server, users)
    for args in (["run", "config.yaml", "--storage", URL], ["verify", "--storage", URL]):
        refused(vertebrae(workdir, env, *args), f"no access to bucket '{BUCKET}'", users["nobody"])
    assert sorted(p.name for p in workdir.iterdir()) == ["config.yaml"]
    assert keys_in_bucket(server, users) == before


def test_the_documented_policy_passes_and_write_without_delete_names_the_probe_left(server, users, stored):
    """docs/cloud.md's policy passes the check and leaves nothing; credentials that may write but not delete are
    refused, the message naming the probe object they could not remove (which the admin then removes)."""
    before = keys_in_bucket(server, users)
    check_storage(URL, endpoint=server, environ=env_of(server, users["runner"]))
    assert keys_in_bucket(server, users) == before
    with pytest.raises(StorageError, match=rf"--storage {URL} .*: no delete access under the prefix") as info:
        check_storage(URL, endpoint=server, environ=env_of(server, users["no-delete"]))
    message = f"vertebrae: error: {info.value}"  # as the command line prints it
    assert any(p.fullmatch(message) for p in documented_refusals()), message
    left = sorted(set(keys_in_bucket(server, users)) - set(before))
    assert len(left) == 1 and left[0].startswith(f"{PREFIX}/.vertebrae-write-check-"), left
    assert f"s3://{BUCKET}/{left[0]}" in str(info.value)
    client(server, users["admin"]).delete_object(Bucket=BUCKET, Key=left[0])


def test_refused_credentials_are_named_as_such(server, users, workdir):
    """A key the store does not know, and a known key with a wrong secret: refused naming the URL and the store's
    reason (a HEAD's refusal carries none: the listing after it does), the secret shown nowhere."""
    key, secret = users["runner"]
    wrong = "w" * len(secret)
    unknown = vertebrae(workdir, env_of(server, ("AKIAUNKNOWNUNKNOWN00", secret)), "run", "config.yaml",
                        "--storage", URL)
    refused(unknown, "the credentials are refused (InvalidAccessKeyId)", ("AKIAUNKNOWNUNKNOWN00", secret))
    mistyped = vertebrae(workdir, env_of(server, (key, wrong)), "verify", "--storage", URL)
    refused(mistyped, "the credentials are refused (SignatureDoesNotMatch)", (key, wrong))
    assert sorted(p.name for p in workdir.iterdir()) == ["config.yaml"]


def test_the_documented_policy_is_all_snakemakes_s3_plugin_needs(server, users, tmp_path):
    """A Snakemake run on the prefix with docs/cloud.md's policy alone: its S3 plugin checks the bucket, lists and
    reads the inputs, deletes the outputs a forced job replaces and uploads a file and a folder output. And what
    ``vertebrae verify --storage`` checks folder outputs for (tests/workflow/test_storage_uploads.py): with part of
    the folder's objects gone, as an upload cut short leaves it, a run from another working folder (without the
    first one's record of the job) takes the folder as done."""
    (tmp_path / "Snakefile").write_text(
        'rule all:\n    input: "out/folder", "out/file.txt"\n\n'
        'rule make:\n    input: "data/in.txt"\n    output: directory("out/folder"), "out/file.txt"\n'
        '    shell: "mkdir -p {output[0]} && for i in 1 2; do cp {input} {output[0]}/$i.txt; done && '
        'cp {input} {output[1]}"\n', encoding="utf-8")
    admin, base = client(server, users["admin"]), f"{PREFIX}/plugin"
    admin.put_object(Bucket=BUCKET, Key=f"{base}/data/in.txt", Body=b"new\n")
    admin.put_object(Bucket=BUCKET, Key=f"{base}/out/file.txt", Body=b"old\n")  # deleted, then written again

    def snakemake(workdir: Path, *args: str) -> str:
        workdir.mkdir(exist_ok=True)
        proc = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(tmp_path / "Snakefile"),
                               "--default-storage-provider", "s3", "--default-storage-prefix", f"s3://{BUCKET}/{base}",
                               "--shared-fs-usage", "none", "--cores", "1", *args], cwd=workdir,
                              env=env_of(server, users["runner"]), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return proc.stdout + proc.stderr

    snakemake(tmp_path / "first", "--forcerun", "make")
    for key in ("out/file.txt", "out/folder/1.txt", "out/folder/2.txt"):
        assert admin.get_object(Bucket=BUCKET, Key=f"{base}/{key}")["Body"].read() == b"new\n", key
    admin.delete_object(Bucket=BUCKET, Key=f"{base}/out/folder/2.txt")  # the folder's upload cut short
    assert "Nothing to be done" in snakemake(tmp_path / "second", "-n")
