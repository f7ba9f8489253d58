"""``vertebrae verify --storage s3://BUCKET/PREFIX [RESULTS_DIR]``: check the results of a run on object storage
(``vertebrae run CONFIG --storage s3://BUCKET/PREFIX``, ``core.storage``) as ``vertebrae verify RESULTS_DIR`` checks a
local tree, and with ``--repair`` move the bad objects (and everything built from them) aside in the bucket.

The URL is the one the run was given; the run's working tree is the prefix, so its out folder RESULTS_DIR (default
``results``, relative as the run spells it) is ``s3://BUCKET/PREFIX/RESULTS_DIR/``. Storage verify cannot use is
refused first, naming the URL (``core.storage.check_storage``: unreachable endpoint, no credentials, no bucket, no
read access; with ``--repair`` no write access either). Every object under the out folder is then downloaded into a
private temporary folder laid out as the tree (moved-aside objects, ``<key>.corrupt-<UTC time>``, as empty stand-ins
only, so that a new name never takes an old one's), and checked by ``stages.verify.verify`` itself: the same checks,
the same problem text, each bad object named by its ``s3://`` URL. Exit status 2 when one is bad, as locally. A
folder output that lacks one of its files (a fan-out bundle, a layer sweep's shard folder) is named as one bad folder
(``cut_short``): Snakemake uploads a folder output object by object, and a run from a working folder other than the
interrupted run's takes a partly uploaded folder as done.

``--repair`` moves aside in the temporary tree with ``stages.verify.quarantine`` (the bad file, every file built from
it, a fan-out bundle folder as one), then makes the same moves in the bucket: each ``(old, new)`` pair becomes a copy
of the object (of every object under a folder's key) to the new key, then a delete of the original. The moves are made
last-built first, the bad object last, so an interrupted repair leaves the bad object in place for the next verify to
find again (repairs converge). A following ``vertebrae run CONFIG --storage URL`` rebuilds exactly those objects.

The temporary folder takes the results' size on local disk (``TMPDIR``) and is removed at the end. Endpoint and
credentials come from the environment, as the run's do; no message holds a credential.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from vertebrae.core.errors import ArtifactError, ConfigError, VertebraeError
from vertebrae.core.out_folder import normal_out, write_out_record
from vertebrae.core.storage import StorageError, check_storage, endpoint_url, is_url, parse_url, storage_client

MOVED = ".corrupt-"


def results_prefix(url: str, results_dir: str | os.PathLike = "results") -> tuple[str, str, str]:
    """``(bucket, key prefix of the out folder, out folder)`` of a run's storage ``url`` and its out folder
    ``results_dir`` (relative, as the run spells it); ConfigError naming it for an absolute one or one that climbs."""
    bucket, prefix = parse_url(url)
    out = normal_out(results_dir)
    parts = PurePosixPath(Path(out).as_posix()).parts
    if Path(out).is_absolute() or ".." in parts or out == ".":
        raise ConfigError(f"RESULTS_DIR {results_dir}: with --storage it names the out folder under {url} as the "
                          "run spelled it (default results), not a local path")
    return bucket, "/".join(filter(None, (prefix, *parts))), out


def _objects(client: Any, bucket: str, prefix: str) -> Iterator[dict[str, Any]]:
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        yield from page.get("Contents", [])


def _relative(key: str, prefix: str, hidden: bool = False) -> PurePosixPath | None:
    """A key's path under the out folder; None for a folder marker, a hidden or temporary object (unless
    ``hidden``), or a name that would leave the temporary tree."""
    rel = PurePosixPath(key[len(prefix) + 1:])
    if not key.startswith(prefix + "/") or key.endswith("/") or not rel.parts \
            or any(p in ("", ".", "..") or (p.startswith(".") and not hidden) for p in rel.parts):
        return None
    return rel


def download(client: Any, bucket: str, prefix: str, tree: Path,
             names: list[PurePosixPath] | None = None) -> dict[str, str]:
    """Every object under ``prefix/`` into ``tree`` as laid out under the prefix (a moved-aside one as an empty
    stand-in); returns local path -> key. ``names``: where given, the path of every object under the prefix, hidden
    ones too (Snakemake's ``.snakemake_timestamp`` in a folder output), is appended to it."""
    keys = {}
    for item in _objects(client, bucket, prefix):
        if names is not None and (name := _relative(item["Key"], prefix, hidden=True)) is not None:
            names.append(name)
        rel = _relative(item["Key"], prefix)
        if rel is None:
            continue
        local = tree.joinpath(*rel.parts)
        local.parent.mkdir(parents=True, exist_ok=True)
        if any(MOVED in p for p in rel.parts):
            local.touch()
        else:
            client.download_file(bucket, item["Key"], str(local))
        keys[str(local)] = item["Key"]
    return keys


SWEEP_SHARD = re.compile(r"shard-\d+-of-\d+")  # a layer sweep's shard folder: sweeps/<sweep fp>/shard-i-of-n/


def _sweep_layers(tree: Path, sweep: str) -> set[str] | None:
    """The file names a shard folder of layer sweep ``sweep`` holds (``<layer fp>.h5``, from the sweep's plan under
    ``tree``); None where the plan is missing or bad (the local checks, or Snakemake's rerun of the plan job, see to
    it)."""
    from vertebrae.core.artifacts import read_json_artifact

    for path in tree.rglob(f"plans/{sweep}.json"):
        try:
            spec = read_json_artifact(path, "plan", fingerprint=sweep)
        except VertebraeError:
            return None
        if isinstance(spec, dict) and spec.get("stage") == "embed-sweep":
            return {f"{layer['fingerprint']}.h5" for layer in spec.get("layers", [])}
    return None


def cut_short(tree: Path, names: list[PurePosixPath]) -> list[tuple[str, str]]:
    """``(folder, problem)`` of each folder output among the objects ``names`` (paths under the out folder ``tree``,
    hidden ones included) that lacks a file: a fan-out bundle (``stages.fanout_bundle``) without its ``inputs.json``
    or a file it records, a layer sweep's shard folder (``sweeps/<sweep fp>/shard-i-of-n/``) without a layer's file
    its sweep's plan names.

    Snakemake uploads a folder output object by object (the S3 plugin's ``store_object``), each object whole or not
    at all: an upload cut short leaves part of the folder, and a run from another working folder takes a folder with
    any object under it as there (the record of the interrupted job lies in the working folder it ran in, where a
    rerun redoes the job). The local checks see only the files present, so the missing ones are found here. A
    folder whose objects were all hidden is made in ``tree``, so that it moves aside as any other."""
    from vertebrae.core.artifacts import read_json_document
    from vertebrae.stages.fanout_bundle import FANOUT_KIND, INPUTS, bundle_of, expected_files

    present: dict[Path, set[str]] = {}
    for name in names:
        local = tree.joinpath(*name.parts)
        folder = bundle_of(local)
        if folder is None and SWEEP_SHARD.fullmatch(local.parent.name) and local.parent.parent.parent.name == "sweeps":
            folder = local.parent
        if folder is not None:
            present.setdefault(folder, set()).add(name.name)
    found = []
    for folder, files in sorted(present.items()):
        if bundle_of(folder / INPUTS) != folder:  # a layer sweep's shard folder
            expected = _sweep_layers(tree, folder.parent.name)
            lacking = sorted((expected or set()) - files)
            what, where = "the layer sweep's shard folder", ", which the sweep's plan names"
        elif INPUTS not in files:
            lacking, what, where = [INPUTS], "the fan-out bundle", ""
        else:
            try:
                recorded = read_json_document(folder / INPUTS, FANOUT_KIND, fingerprint=folder.name)[1]
            except VertebraeError:
                continue  # a bad inputs.json: the local checks name it
            lacking = sorted(set(expected_files(recorded)) - files)
            what, where = "the fan-out bundle", f", which its {INPUTS} records"
        if lacking:
            folder.mkdir(parents=True, exist_ok=True)
            found.append((str(folder), f"{what} lacks {', '.join(lacking)}{where}: an upload cut short (Snakemake "
                                       "uploads a folder object by object)"))
    return found


def _key(local: str, tree: Path, prefix: str) -> str:
    return "/".join((prefix, *Path(os.path.relpath(local, tree)).parts))


def move_object(client: Any, bucket: str, old: str, new: str) -> None:
    """``old`` copied to ``new`` (a managed copy: objects over 5 GB too), then deleted."""
    client.copy({"Bucket": bucket, "Key": old}, bucket, new)
    client.delete_object(Bucket=bucket, Key=old)


def move_in_bucket(client: Any, bucket: str, moved: list[tuple[str, str]], tree: Path, prefix: str) -> list[tuple[str, str]]:
    """Make the local moves ``moved`` (``(old, new)`` paths under ``tree``, files or folders: ``quarantine``'s) in
    the bucket, last first; returns ``(old key, new key)`` of each object moved."""
    done = []
    for old, new in reversed(moved):
        old_key, new_key = _key(old, tree, prefix), _key(new, tree, prefix)
        if os.path.isdir(new):  # a fan-out bundle folder: every object under its key
            pairs = [(item["Key"], new_key + item["Key"][len(old_key):]) for item in _objects(client, bucket, old_key)]
        else:
            pairs = [(old_key, new_key)]
        for source, target in pairs:
            move_object(client, bucket, source, target)
            done.append((source, target))
    return done


def verify_storage(url: str, results_dir: str | os.PathLike = "results", *, repair: bool = False,
                   environ: Mapping[str, str] | None = None) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Check every object of the out folder ``results_dir`` of the run on storage ``url``: ``(URL, problem)`` of the
    corrupt or stale ones, and with ``repair`` the ``(old URL, new URL)`` of each object moved aside in the bucket
    (the bad ones and everything built from them)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from vertebrae.stages.verify import quarantine, verify

    environ = os.environ if environ is None else environ
    bucket, prefix, out = results_prefix(url, results_dir)
    endpoint = endpoint_url((), environ)
    check_storage(url, endpoint=endpoint, environ=environ, write=repair)
    client = storage_client(url, endpoint=endpoint, environ=environ)
    base = f"s3://{bucket}/{prefix}"
    with tempfile.TemporaryDirectory(prefix="vertebrae-verify-") as tmp:
        tree = Path(tmp).joinpath(*Path(out).parts)
        try:
            names: list[PurePosixPath] = []
            if not download(client, bucket, prefix, tree, names):
                raise ArtifactError(f"results {base}/: no objects there (run with --storage {url} writes them; "
                                    "give RESULTS_DIR if the run's out folder is not results)")
            write_out_record(out, tmp)  # the out folder as the run spelled it: specs' paths start from its parent

            def named(text: str) -> str:
                return text.replace(str(tree), base).replace(tmp, f"s3://{bucket}/{parse_url(url)[1]}".rstrip("/"))

            cut = cut_short(tree, names)  # a folder output's upload cut short: the folder, not the files present
            inside = tuple(folder + os.sep for folder, _ in cut)
            bad = cut + [(path, problem) for path, problem in verify(tree) if not path.startswith(inside)]
            moved: list[tuple[str, str]] = []
            if repair:
                for path, _ in bad:
                    if os.path.lexists(path):
                        moved += quarantine(path)
                moved = move_in_bucket(client, bucket, moved, tree, prefix)
        except (BotoCoreError, ClientError) as exc:
            step = "move objects aside in" if repair else "read"
            raise StorageError(f"--storage {url}: could not {step} {base}/ ({type(exc).__name__})") from None
        bad = [(named(path), named(problem)) for path, problem in bad]
    return bad, [(f"s3://{bucket}/{old}", f"s3://{bucket}/{new}") for old, new in reversed(moved)]


def run_verify(results_dir: str = "results", repair: bool = False, storage: str | None = None) -> None:
    """``vertebrae verify [--storage URL] [--repair] [RESULTS_DIR]``: a local tree (``stages.verify.run_verify``), or
    with ``--storage`` the out folder of a run on object storage: each bad object printed by its URL, ArtifactError
    (exit status 2) when there are any and ``repair`` is off; with ``repair`` they and what was built from them are
    moved aside in the bucket."""
    from vertebrae.stages import verify as local

    if storage is None:
        if is_url(results_dir):
            raise ConfigError(f"RESULTS_DIR {results_dir}: a URL; give the storage the run was given as --storage "
                              f"(vertebrae verify --storage {results_dir}), and RESULTS_DIR only where its out folder "
                              "is not results")
        local.run_verify(results_dir, repair=repair)
        return
    bad, moved = verify_storage(storage, results_dir, repair=repair)
    where = f"{storage.rstrip('/')}/{normal_out(results_dir)}"
    for url, problem in bad:
        print(f"{'moved aside' if repair else 'bad'}: {url}: {problem}")
    if bad and not repair:
        raise ArtifactError(f"{len(bad)} corrupt or stale object(s) under {where}/; `vertebrae verify --repair "
                            f"--storage {storage}` moves them aside for the workflow to rebuild")
    for old, new in moved:
        print(f"  {old} -> {new}")
    print(f"{where}/: " + (f"{len(bad)} object(s) moved aside with what was built from them ({len(moved)} objects); "
                           f"`vertebrae run CONFIG --storage {storage}` rebuilds them" if bad
                           else "every artifact verifies"))


__all__ = ["cut_short", "download", "move_in_bucket", "move_object", "results_prefix", "run_verify", "verify_storage"]
