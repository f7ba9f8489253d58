"""A moto S3 server on 127.0.0.1 with one bucket, for the object-storage tests: the environment a `vertebrae run
--storage` / Snakemake S3 plugin run needs (endpoint, keys; the caller's AWS_/SNAKEMAKE_STORAGE_/VERTEBRAE_
variables dropped) and a boto3 client of it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def moto_bucket(bucket: str, **extra: str) -> Iterator[dict[str, str]]:
    """The environment of a run against a fresh moto server holding the empty ``bucket`` (``extra`` added)."""
    from moto import server as moto_server

    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    try:
        host, port = server.get_host_and_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SNAKEMAKE_STORAGE_", "VERTEBRAE_"))}
        env.update(SNAKEMAKE_STORAGE_S3_ENDPOINT_URL=f"http://{host}:{port}", SNAKEMAKE_STORAGE_S3_ACCESS_KEY="key",
                   SNAKEMAKE_STORAGE_S3_SECRET_KEY="secret", AWS_DEFAULT_REGION="us-east-1",
                   PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}", **extra)
        client(env).create_bucket(Bucket=bucket)
        yield env
    finally:
        server.stop()


def client(env: Mapping[str, str]):
    """A boto3 S3 client of the server ``env`` names, with its keys."""
    import boto3

    return boto3.client("s3", endpoint_url=env["SNAKEMAKE_STORAGE_S3_ENDPOINT_URL"], region_name="us-east-1",
                        aws_access_key_id=env["SNAKEMAKE_STORAGE_S3_ACCESS_KEY"],
                        aws_secret_access_key=env["SNAKEMAKE_STORAGE_S3_SECRET_KEY"])
