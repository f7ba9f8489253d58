"""Object storage (S3 and S3-compatible stores): the URL of a run's results, the Snakemake flags it maps to, the
checks made before any job starts, and where a job finds its files.

``vertebrae run CONFIG --storage s3://bucket/prefix`` runs Snakemake with ``--default-storage-provider s3
--default-storage-prefix s3://bucket/prefix --shared-fs-usage none`` (``snakemake_flags``): every input and output
of every job is an object under the prefix (the config's relative data paths included), downloaded before a job and
uploaded after it; no job relies on the working folder. The endpoint and the credentials come from the environment
as boto3 and the S3 storage plugin read them (``SNAKEMAKE_STORAGE_S3_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL``,
``SNAKEMAKE_STORAGE_S3_ACCESS_KEY`` / ``AWS_ACCESS_KEY_ID``...), never from the command line: Snakemake writes its
command line to its log.

``check_storage`` is made before any job starts: it refuses, naming the URL and what is missing, an unreachable
endpoint, missing credentials, a missing bucket and a bucket without write or delete access (one small object
written and deleted; credentials that may write but not delete are refused naming the object they leave).
``config_urls`` finds the ``s3://`` paths of a config, which a run without a storage provider refuses.
Messages never hold a credential.

A job's files: Snakemake hands a job the local copies of its storage inputs under ``.snakemake/storage/s3/BUCKET/
PREFIX/`` (``local_root``), a tree laid out as the working folder is. The workflow names that folder in
``$VERTEBRAE_STORAGE_ROOT``; a job then works inside it (``job_argv``), so that the paths its plan names
(``results/...``, ``data/...``) are the copies Snakemake downloaded, and what it writes is what Snakemake uploads.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from vertebrae.core.config import take_option
from vertebrae.core.errors import ConfigError, VertebraeError

STORAGE_ROOT_ENV = "VERTEBRAE_STORAGE_ROOT"
SCHEMES = ("s3",)
#: Snakemake flags whose value is a credential: refused on a command line (Snakemake logs its command line).
SECRET_FLAGS = ("--storage-s3-access-key", "--storage-s3-secret-key", "--storage-s3-token")
ENDPOINT_ENVS = ("SNAKEMAKE_STORAGE_S3_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


class StorageError(VertebraeError, ConnectionError):
    """Object storage the run cannot use: unreachable, without credentials, without the bucket or write access."""


def is_url(path: Any) -> bool:
    """Whether ``path`` is a storage URL (``s3://...``)."""
    return isinstance(path, str) and "://" in path


def parse_url(url: str, where: str = "--storage") -> tuple[str, str]:
    """``(bucket, prefix)`` of ``s3://bucket[/prefix]`` (the prefix without slashes at its ends); ConfigError naming
    ``where`` and the URL for anything else."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES or not parts.netloc or parts.query or parts.fragment:
        raise ConfigError(f"{where}: {url!r} is no object storage URL vertebrae knows; give s3://BUCKET/PREFIX")
    return parts.netloc, parts.path.strip("/")


def snakemake_flags(url: str) -> list[str]:
    """The plain Snakemake flags ``--storage URL`` stands for."""
    parse_url(url)
    return ["--default-storage-provider", "s3", "--default-storage-prefix", url.rstrip("/"),
            "--shared-fs-usage", "none"]


def storage_option(args: Sequence[str]) -> tuple[str | None, list[str]]:
    """``--storage URL`` (or ``--storage=URL``) taken out of ``args``; the URL is None when not given."""
    url, rest = take_option(args, "--storage", "--storage: name the bucket and prefix the run keeps its files in "
                                                "(s3://BUCKET/PREFIX)")
    if url is not None:
        parse_url(url)
    return url, rest


def flag_value(args: Sequence[str], flag: str) -> str | None:
    """The value of ``flag`` (``--flag VALUE`` or ``--flag=VALUE``) in ``args``, else None."""
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg.partition("=")[2]
    return None


def refuse_secret_flags(args: Sequence[str]) -> None:
    """A credential given as a command-line flag would be written to Snakemake's log: refused, naming the flag."""
    for arg in args:
        name = arg.partition("=")[0]
        if name in SECRET_FLAGS:
            env = "SNAKEMAKE_STORAGE_S3_" + name.removeprefix("--storage-s3-").replace("-", "_").upper()
            raise ConfigError(f"{name}: a credential on the command line lands in Snakemake's log; set {env} (or "
                              "the AWS_* variables, or ~/.aws/credentials) in the environment instead")


def endpoint_url(args: Sequence[str] = (), environ: Mapping[str, str] | None = None) -> str | None:
    """The S3 endpoint the run uses: ``--storage-s3-endpoint-url``, else the environment's, else None (AWS)."""
    environ = os.environ if environ is None else environ
    found = flag_value(args, "--storage-s3-endpoint-url")
    return found or next((environ[name] for name in ENDPOINT_ENVS if environ.get(name)), None)


def _client(endpoint: str | None, environ: Mapping[str, str]):
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(
        aws_access_key_id=environ.get("SNAKEMAKE_STORAGE_S3_ACCESS_KEY") or None,
        aws_secret_access_key=environ.get("SNAKEMAKE_STORAGE_S3_SECRET_KEY") or None,
        aws_session_token=environ.get("SNAKEMAKE_STORAGE_S3_TOKEN") or None,
        region_name=environ.get("SNAKEMAKE_STORAGE_S3_REGION") or None)
    if session.get_credentials() is None:
        return session, None
    config = Config(connect_timeout=5, read_timeout=10, retries={"max_attempts": 1})
    return session, session.client("s3", endpoint_url=endpoint, config=config)


def storage_client(url: str, *, endpoint: str | None = None, environ: Mapping[str, str] | None = None):
    """A boto3 S3 client for ``url`` with the environment's credentials (never an argument's); StorageError naming
    ``url`` where there are none."""
    _, client = _client(endpoint, os.environ if environ is None else environ)
    if client is None:
        raise StorageError(f"--storage {url}: no credentials (SNAKEMAKE_STORAGE_S3_ACCESS_KEY, AWS_ACCESS_KEY_ID...)")
    return client


def check_storage(url: str, *, endpoint: str | None = None, environ: Mapping[str, str] | None = None,
                  write: bool = True) -> None:
    """Refuse (StorageError naming ``url`` and what is missing) storage a run cannot use: no credentials, an
    unreachable endpoint, no such bucket, no access to it, no write or no delete access under the prefix (a probe
    object is written and deleted: Snakemake deletes a job's old outputs before it runs again; ``write`` False:
    objects listed under the prefix instead, for a reader such as ``vertebrae verify --storage``)."""
    from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError, NoCredentialsError

    environ = os.environ if environ is None else environ
    bucket, prefix = parse_url(url)
    where = f"--storage {url}" + (f" (endpoint {endpoint})" if endpoint else "")
    _, client = _client(endpoint, environ)
    if client is None:
        raise StorageError(f"{where}: no credentials: set SNAKEMAKE_STORAGE_S3_ACCESS_KEY and "
                           "SNAKEMAKE_STORAGE_S3_SECRET_KEY (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a "
                           "profile in ~/.aws/credentials)")
    probe = "/".join(filter(None, (prefix, f".vertebrae-write-check-{secrets.token_hex(6)}")))
    step = "reach the bucket"
    try:
        client.head_bucket(Bucket=bucket)
        if write:
            step = "write under the prefix"
            client.put_object(Bucket=bucket, Key=probe, Body=b"vertebrae write check\n")
            step = "delete under the prefix"
            client.delete_object(Bucket=bucket, Key=probe)
        else:
            step = "list the objects under the prefix"
            client.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
    except (EndpointConnectionError, ConnectionError) as exc:
        raise StorageError(f"{where}: the storage endpoint is unreachable ({type(exc).__name__})") from None
    except NoCredentialsError:
        raise StorageError(f"{where}: no credentials") from None
    except ClientError as exc:
        code = _code(exc)
        if code == "403" and step == "reach the bucket":  # a HEAD's refusal has no body: a GET's code says why
            code = _refusal_code(client, bucket, prefix) or code
        if code in ("404", "NoSuchBucket"):
            reason = f"bucket {bucket!r} does not exist"
        elif code in ("403", "AccessDenied", "AllBucketsDisabled"):
            reason = ("no write access under the prefix" if step.startswith("write")
                      else f"no delete access under the prefix (a run deletes a job's old outputs before the job "
                           f"runs again): remove the probe object s3://{bucket}/{probe} it left"
                      if step.startswith("delete")
                      else "no read access under the prefix" if step.startswith("list")
                      else f"no access to bucket {bucket!r} with these credentials")
        elif code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken"):
            reason = f"the credentials are refused ({code})"
        else:
            reason = f"could not {step} ({code or 'error'})"
        raise StorageError(f"{where}: {reason}") from None
    except BotoCoreError as exc:
        raise StorageError(f"{where}: could not {step} ({type(exc).__name__})") from None


def _code(exc: Any) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _refusal_code(client: Any, bucket: str, prefix: str) -> str | None:
    """The error code a listing of the prefix gets (``InvalidAccessKeyId``, ``SignatureDoesNotMatch``,
    ``AccessDenied``...), where a HEAD of the bucket got a bare 403; None where it gets none."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        client.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
    except ClientError as exc:
        return _code(exc) or None
    except BotoCoreError:
        return None
    return None


def _walk(value: Any, where: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _walk(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, f"{where}[{i}]")
    elif is_url(value) and urlsplit(value).scheme in SCHEMES:
        yield where, value


def config_urls(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(key path, URL)`` of every ``s3://`` value of a config."""
    return list(_walk(config, ""))


def refuse_urls_without_storage(config: Mapping[str, Any], storage: str | None) -> None:
    """An ``s3://`` path in a config run without a storage provider: refused, naming its key and URL."""
    found = config_urls(config)
    if found and not storage:
        key, url = found[0]
        raise ConfigError(f"{key}: {url!r} is in object storage, and this run has no storage provider: run with "
                          "--storage s3://BUCKET/PREFIX (snakemake: --default-storage-provider s3 "
                          "--default-storage-prefix s3://BUCKET/PREFIX)")


def local_root(local_prefix: str | os.PathLike, url: str) -> str:
    """Where Snakemake keeps the local copies of the objects under ``url``: ``LOCAL_PREFIX/s3/BUCKET/PREFIX``."""
    bucket, prefix = parse_url(url)
    return os.path.normpath(os.path.join(os.fspath(local_prefix), "s3", bucket, prefix))


def job_argv(argv: Sequence[str], root: str) -> list[str]:
    """A job's arguments for a process that works inside ``root`` (``$VERTEBRAE_STORAGE_ROOT``): a path under the
    root made relative to it (the path its plan names), any other existing path made absolute (a file Snakemake
    keeps local, such as a plan job's spec file)."""
    prefix = os.path.normpath(root) + os.sep
    out = []
    for arg in argv:
        if arg.startswith(prefix):
            out.append(arg[len(prefix):])
        elif os.sep in arg and not arg.startswith("-") and os.path.exists(arg):
            out.append(os.path.abspath(arg))
        else:
            out.append(arg)
    return out


def enter_root(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """``job_argv`` and a change into ``$VERTEBRAE_STORAGE_ROOT`` (made where missing) where it is set; ``argv``
    unchanged otherwise."""
    root = (os.environ if environ is None else environ).get(STORAGE_ROOT_ENV)
    if not root:
        return list(argv)
    rewritten = job_argv(argv, root)
    Path(root).mkdir(parents=True, exist_ok=True)  # a job whose inputs are all local: its outputs' tree
    os.chdir(root)
    return rewritten




def _is_path_key(key: Any) -> bool:
    return isinstance(key, str) and (key == "path" or key.endswith("_path"))


def _config_paths(value: Any, where: str, in_files: bool = False) -> Iterator[tuple[str, Mapping, Any]]:
    """(key path, mapping, key) of every data path value of a config: a ``path`` or ``*_path`` key, an entry of a
    precomputed extractor's ``files``."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            here = f"{where}.{key}" if where else str(key)
            if isinstance(item, str) and (_is_path_key(key) or in_files):
                yield here, value, key
            else:
                yield from _config_paths(item, here, in_files=key == "files" and isinstance(item, Mapping))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _config_paths(item, f"{where}[{i}]")


def under_prefix(config: dict[str, Any], url: str) -> dict[str, Any]:
    """``config`` with each ``s3://`` data path under the run's storage ``url`` spelled relative to it (the object
    ``s3://bucket/prefix/data/x.npz`` is ``data/x.npz`` of the run's tree); ConfigError naming the key for one
    elsewhere."""
    import copy

    config = copy.deepcopy(config)
    base = url.rstrip("/") + "/"
    for where, mapping, key in list(_config_paths(config, "")):
        value = mapping[key]
        if is_url(value):
            if not value.startswith(base):
                raise ConfigError(f"{where}: {value!r} is not under the run's storage {url}: keep the data "
                                  "under the prefix the run uses (--storage)")
            mapping[key] = value[len(base):]  # type: ignore[index]
    return config


def fetch_data(config: Mapping[str, Any], url: str, root: str | os.PathLike, *,
               endpoint: str | None = None, environ: Mapping[str, str] | None = None) -> list[str]:
    """Download the data objects a config names by relative path (``under_prefix``; a folder: the objects under it)
    from under ``url`` into ``root`` (Snakemake's local copy of the prefix) where the copy is missing or differs in size or age, so that
    planning reads the bytes the jobs will: an object replaced in the bucket is a data edit. A path with no object
    is left to planning (which names it). Returns the paths fetched."""
    return _read_objects(url, endpoint, environ,
                         lambda client, bucket, prefix: _fetch(client, config, bucket, prefix, root))


def _read_objects(url: str, endpoint: str | None, environ: Mapping[str, str] | None,
                  read: Callable[[Any, str, str], list[str]]) -> list[str]:
    """``read(client, bucket, prefix)`` under ``url``; StorageError naming the URL where no credentials are found or
    the reading fails."""
    from botocore.exceptions import BotoCoreError

    environ = os.environ if environ is None else environ
    bucket, prefix = parse_url(url)
    _, client = _client(endpoint, environ)
    if client is None:
        raise StorageError(f"--storage {url}: no credentials (SNAKEMAKE_STORAGE_S3_ACCESS_KEY, AWS_ACCESS_KEY_ID...)")
    try:
        return read(client, bucket, prefix)
    except BotoCoreError as exc:
        raise StorageError(f"--storage {url}: could not read the data objects ({type(exc).__name__})") from None


def _fetch(client: Any, config: Mapping[str, Any], bucket: str, prefix: str, root: str | os.PathLike) -> list[str]:
    paths = [mapping[key] for _, mapping, key in _config_paths(config, "")]
    return _fetch_paths(client, paths, bucket, prefix, root)


def _fetch_paths(client: Any, paths: Sequence[str], bucket: str, prefix: str, root: str | os.PathLike) -> list[str]:
    """Each relative path of ``paths`` fetched as one object, else as the folder of the objects under it (an image
    folder, a Hugging Face or BEIR folder, a model folder); one with neither is left alone."""
    from botocore.exceptions import ClientError

    fetched = []
    for path in dict.fromkeys(paths):
        if not isinstance(path, str) or is_url(path) or os.path.isabs(path) or not path:
            continue
        name = "/".join(filter(None, (prefix, Path(path).as_posix())))
        if _fetch_object(client, bucket, name, Path(root) / path):
            fetched.append(path)
            continue
        folder = name.rstrip("/") + "/"
        try:
            keys = [item["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=folder)
                    for item in page.get("Contents") or ()]
        except ClientError:
            continue  # left to planning, which names what it misses
        for key in keys:
            inner = key[len(folder):]
            if inner and not inner.endswith("/") and _fetch_object(client, bucket, key, Path(root) / path / inner):
                fetched.append(f"{path.rstrip('/')}/{inner}")
    return fetched


def _fetch_object(client: Any, bucket: str, name: str, local: Path) -> bool:
    """Download the object ``name`` to ``local`` where the copy is missing or differs in size or age; False where
    there is no such object."""
    from botocore.exceptions import ClientError

    try:
        head = client.head_object(Bucket=bucket, Key=name)
    except ClientError:
        return False
    stamp = head["LastModified"].timestamp()
    if local.is_file() and local.stat().st_size == head["ContentLength"] and local.stat().st_mtime >= stamp:
        return True
    local.parent.mkdir(parents=True, exist_ok=True)
    tmp = local.with_name(f".{local.name}.tmp-{os.getpid()}")
    client.download_file(bucket, name, str(tmp))
    os.utime(tmp, (stamp, stamp))
    os.replace(tmp, local)
    return True


def fetch_paths(paths: Sequence[str], url: str, root: str | os.PathLike, *, endpoint: str | None = None,
                environ: Mapping[str, str] | None = None) -> list[str]:
    """``fetch_data`` for paths found inside the data rather than in the config (a manifest's images, a WebDataset
    pattern's tars, a model's folder): each relative path under ``url`` fetched into ``root``, as an object or as
    the folder of the objects under it. Returns the paths fetched (a folder's as its files)."""
    return _read_objects(url, endpoint, environ,
                         lambda client, bucket, prefix: _fetch_paths(client, paths, bucket, prefix, root))


def list_under(url: str, folder: str, *, endpoint: str | None = None,
               environ: Mapping[str, str] | None = None) -> list[str]:
    """The names of the objects under ``url``'s ``folder/`` (a path relative to the prefix, such as
    ``results/reports``), relative to it, sorted: one paginated listing, nothing downloaded. The planner lists the
    report folders other configs wrote into the bucket with it (not the local copy, which holds only what this
    process fetched). StorageError naming the URL where the listing fails."""
    from botocore.exceptions import BotoCoreError, ClientError

    environ = os.environ if environ is None else environ
    bucket, prefix = parse_url(url)
    client = storage_client(url, endpoint=endpoint, environ=environ)
    under = "/".join(filter(None, (prefix, Path(folder).as_posix().strip("/")))) + "/"
    try:
        return sorted(item["Key"][len(under):]
                      for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=under)
                      for item in page.get("Contents") or () if len(item["Key"]) > len(under))
    except ClientError as exc:
        raise StorageError(f"--storage {url}: could not list the objects under {folder} ({_code(exc) or 'error'})"
                           ) from None
    except BotoCoreError as exc:
        raise StorageError(f"--storage {url}: could not list the objects under {folder} ({type(exc).__name__})"
                           ) from None


__all__ = ["STORAGE_ROOT_ENV", "StorageError", "check_storage", "config_urls", "endpoint_url", "enter_root",
           "fetch_data", "fetch_paths", "is_url", "job_argv", "list_under", "local_root", "parse_url",
           "refuse_secret_flags", "refuse_urls_without_storage", "snakemake_flags", "storage_client", "storage_option",
           "under_prefix"]
