"""The user's files a job reads besides its artifacts: declared inputs of the job, so that it reads nothing undeclared.

A job spec names the data it reads inside its declarations: the dataset's source (``path``, ``labels_path``,
``ids_path``, ``groups_path``, a retrieval pair's ``relevance_path``..., nested ``source:`` of a split and a pair's
``queries:`` / ``gallery:`` sides included), a precomputed extractor's files (``path``, ``ids_path``, per-endpoint
``files``). ``data_files`` lists them as the config spells them (relative to the working folder, or absolute), so
the rules can declare them: a job run where only its declared inputs are (object storage, a node without the
shared disk) gets them. With them, the files those name in turn (``vertebrae.data.sources.named_files``,
``vertebrae.extractors.local_files``):

- an image manifest's images: an embedding shard job of a labelled source declares only its own rows' images (it
  reads only those); every other job that reads the source (its protocol job, which hashes every image for the
  dataset's identity; a retrieval endpoint's shard jobs, which load the whole pair) declares all of them; the plan
  job of a spec, which only counts the manifest's rows, none;
- a WebDataset source's tar files (its brace pattern expanded): a shard job of a spec whose plan records its tars
  (``spec["tars"]``) declares only the tars holding its rows (``read_planned_rows`` opens no other), every other job
  all of them;
- a model's local files (a weights or checkpoint file, a model or tokenizer folder's files, an ONNX model's
  external data): the jobs that build the extractor, embedding and fit jobs and their plan jobs (which hash them
  for the recipe). A hub id is the environment's (its cache), as the Python packages are: never declared.

An image folder, a Hugging Face ``datasets`` folder and a BEIR folder are declared as the folder their ``path``
names: their readers list it, so a job needs all of it.

The rules mark them ``ancient``: their bytes are already in the fingerprints (a data edit is a new fingerprint),
so touching a file reruns nothing. File names enter no fingerprint: they are inputs, never recipe.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

from vertebrae.core.storage import is_url

#: The stages whose job reads the data files its spec declares (and each plan job of a spec that declares any).
DATA_STAGES = frozenset({"embed", "embed-sweep", "fit", "protocol", "retrieval-protocol", "zero-shot-embed",
                         "zero-shot-protocol"})
#: The stages whose job builds its spec's extractor (and so reads a model's local files), as their plan jobs do.
MODEL_STAGES = frozenset({"embed", "embed-sweep", "fit", "zero-shot-embed"})
#: The stages whose job embeds rows ``spec["shards"][shard]`` of its endpoint (the rule's ``{i}``).
SHARD_STAGES = frozenset({"embed", "embed-sweep", "zero-shot-embed"})
#: The most images one job declares. Snakemake handles each declared input at every start (~60 us and ~1.3 KB in a
#: dry run, docs/cloud.md): a job of a larger manifest reads its images from the shared disk undeclared, and a run on
#: object storage refuses such a manifest (``storage_named_files``).
MAX_DECLARED_FILES = 100_000
_SIDES = ("queries", "gallery")


def _is_path_key(key: str) -> bool:
    return key == "path" or key.endswith("_path")


def _is_source_key(key: str) -> bool:
    return key == "source" or key.endswith("_source") or key in _SIDES


def _source_files(decl: Any) -> Iterator[str]:
    if not isinstance(decl, Mapping):
        return
    for key, value in decl.items():
        if isinstance(value, str) and value and _is_path_key(key):
            yield value
        elif _is_source_key(key):
            yield from _source_files(value)


def _sources(decl: Any) -> Iterator[tuple[str | None, Mapping[str, Any]]]:
    """``(side, declaration)`` of every source declaration inside ``decl``, itself first (side: ``queries`` or
    ``gallery`` under a pair's side, else None)."""
    if not isinstance(decl, Mapping):
        return
    yield None, decl
    for key, value in decl.items():
        if _is_source_key(key):
            for side, inner in _sources(value):
                yield (side or (key if key in _SIDES else None)), inner


def _extractor_files(decl: Any) -> Iterator[str]:
    if not isinstance(decl, Mapping) or decl.get("type") != "precomputed":
        return
    yield from (value for key, value in decl.items() if isinstance(value, str) and value and _is_path_key(key))
    files = decl.get("files")
    for entry in (files.values() if isinstance(files, Mapping) else ()):
        if isinstance(entry, str) and entry:
            yield entry
        else:
            yield from _extractor_files({**entry, "type": "precomputed"} if isinstance(entry, Mapping) else None)


def _named_files(spec: Mapping[str, Any], base_dir: str, shard: int | None, plan_job: bool,
                 storage: bool) -> Iterator[str]:
    """The images and tar files the spec's source names, and its model's local files, as the job reads them."""
    from vertebrae.data.sources.named_files import manifest_images, tars_of_rows, webdataset_tars

    dataset = spec.get("dataset")
    source = dataset.get("source") if isinstance(dataset, Mapping) else None
    stage = spec.get("stage")
    rows = spec["shards"][shard] if shard is not None and stage in SHARD_STAGES and spec.get("shards") else None
    retrieval = spec.get("protocol") == "retrieval"
    own_side = {"query": "queries", "gallery": "gallery"}.get(spec.get("side")) if retrieval else None
    planned = spec.get("tars")  # the shard job reads its rows from these tars alone (stages.jobs.planned_tar_rows)
    for side, decl in _sources(source):
        if rows is not None and planned is not None and own_side is not None and side not in (None, own_side):
            continue  # the pair's other side: not read
        tars = webdataset_tars(decl)
        if tars is not None:
            if rows is not None and planned is not None:
                if len(planned) == len(tars):  # else the job refuses its plan itself (re-plan)
                    tars = tars_of_rows(tars, planned, *rows)
            elif plan_job and stage not in SHARD_STAGES:
                tars = []  # a plan job opens them only to check an embedding spec's tars (check_tars)
            yield from (tar for tar in tars if os.path.isfile(os.path.join(base_dir, tar)))  # not a glob's text
            continue
        if plan_job:
            continue  # a plan job counts a manifest's rows: it opens no image
        images = manifest_images(decl, base_dir)
        if images is not None:
            # a labelled source's shard job reads its rows only; a retrieval endpoint's loads the whole pair
            images = images[rows[0]:rows[1]] if rows is not None and not retrieval and decl is source else images
            yield from images if len(images) <= MAX_DECLARED_FILES else ()  # too many: the shared disk's
    if stage in MODEL_STAGES:
        from vertebrae.extractors.local_files import local_model_files

        extractor = spec.get("extractor")
        for path in local_model_files(extractor.get("decl") if isinstance(extractor, Mapping) else None, base_dir):
            if not (storage and os.path.isabs(path)):  # on storage, a model at an absolute path is the node's or
                yield path  # the image's (an input must be an object under the prefix)


def data_files(spec: Mapping[str, Any], base_dir: str = ".", *, shard: int | None = None,
               plan_job: bool = False, storage: bool = False) -> list[str]:
    """The user's files and folders ``spec`` names (its dataset's source, its precomputed extractor's files), then
    the files those name (module docstring), in order, without repeats; [] for a spec that names none (a sklearn
    dataset, a score, a report). ``shard``: of the job embedding rows ``spec["shards"][shard]`` of a shard stage;
    ``plan_job``: of the spec's plan job; ``storage``: of a run on object storage (a model at an absolute path is
    then the environment's, as a hub cache is: baked into the image or on the node). A local path that does not exist under ``base_dir`` is left out (a
    pattern, a hub id: planning has checked what it reads); a URL is kept as it is."""
    dataset = spec.get("dataset")
    extractor = spec.get("extractor")
    found = [*_source_files(dataset.get("source") if isinstance(dataset, Mapping) else None),
             *_extractor_files(extractor.get("decl") if isinstance(extractor, Mapping) else None)]
    found = [path for path in dict.fromkeys(found) if is_url(path) or os.path.exists(os.path.join(base_dir, path))]
    return list(dict.fromkeys([*found, *_named_files(spec, base_dir, shard, plan_job, storage)]))


def _declarations(value: Any, where: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """``(key path, mapping)`` of every mapping with a ``type`` inside a config: its sources and extractors."""
    if isinstance(value, Mapping):
        if isinstance(value.get("type"), str):
            yield where, value
        for key, item in value.items():
            yield from _declarations(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _declarations(item, f"{where}[{i}]")


def storage_named_files(config: Mapping[str, Any], root: str) -> list[str]:
    """The files a config's declarations name inside the data, for planning on object storage to fetch into
    ``root`` (Snakemake's local copy of the prefix) beside the files the config names itself
    (``core.storage.fetch_data``, which must have run: the manifests are read here): every image manifest's images,
    every WebDataset pattern's tars, every model's local file or folder key as it is spelled.

    ConfigError, naming the key, for what a run on object storage cannot declare: an image named by URL or by an
    absolute path (a job gets only objects under the run's prefix; name the images relative to the manifest, under
    the prefix), and a manifest of more than ``MAX_DECLARED_FILES`` images (each job downloads every image it
    declares, the protocol job all of them: pack them as WebDataset tars, which a shard job reads by the tar)."""
    from vertebrae.core.errors import ConfigError
    from vertebrae.data.sources.named_files import manifest_images, webdataset_tars
    from vertebrae.extractors.local_files import LOCAL_DIR, LOCAL_KEYS

    found: list[str] = []
    for where, decl in _declarations(config, ""):
        kind = decl["type"]
        if kind == "manifest" and decl.get("image_column") and isinstance(decl.get("path"), str):
            try:
                images = manifest_images(decl, root) or []
            except Exception:  # noqa: BLE001 - a missing or unreadable manifest: planning names it
                continue
            for row, image in enumerate(images):
                if is_url(image) or os.path.isabs(image):
                    raise ConfigError(f"{where}.image_column: row {row} of {decl['path']} names the image "
                                      f"{image!r}, {'a URL' if is_url(image) else 'an absolute path'}; on object "
                                      "storage a job gets only the objects under the run's prefix: keep the images "
                                      "there, named relative to the manifest's folder")
            if len(images) > MAX_DECLARED_FILES:
                raise ConfigError(f"{where}.path: {decl['path']} lists {len(images):,} images, more than the "
                                  f"{MAX_DECLARED_FILES:,} a run on object storage declares for one job (the "
                                  "protocol job reads every image, each one an object to download); pack the images "
                                  "as WebDataset tar files (type: webdataset), whose shard jobs read only their tars")
            found.extend(images)
        elif kind == "webdataset":
            found.extend(webdataset_tars(decl) or [])
        for key in LOCAL_KEYS.get(kind, ()):
            value = decl.get(key)
            if isinstance(value, str) and value and not os.path.isabs(value):  # absolute: the node's, not fetched
                found.append(value[len(LOCAL_DIR):] if key == "model" and value.startswith(LOCAL_DIR) else value)
    return list(dict.fromkeys(found))


__all__ = ["DATA_STAGES", "MAX_DECLARED_FILES", "MODEL_STAGES", "SHARD_STAGES", "data_files", "storage_named_files"]
