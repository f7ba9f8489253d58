"""vertebrae.planning.job_files: the user's files a job spec names, which the rules declare as inputs."""

from __future__ import annotations

import os

import pytest

from image_sources import image_sources, zero_shot_bench
from vertebrae.data.sources.named_files import manifest_images
from vertebrae.extractors.local_files import local_model_files
from vertebrae.planning.job_files import data_files


def test_a_specs_data_files_are_its_sources_and_precomputed_files(tmp_path):
    for name in ("rows.npz", "qrels.tsv", "q.npz", "g.npy", "g_ids.txt"):
        (tmp_path / name).write_bytes(b"x")
    spec = {"dataset": {"source": {"type": "label_split", "source": {"type": "npz", "path": "rows.npz"},
                                   "relevance_path": "qrels.tsv", "name": "not-a-path"}},
            "extractor": {"decl": {"type": "precomputed", "files": {
                "query": {"path": "q.npz", "key": "embeddings"}, "gallery": "g.npy"}, "ids_path": "g_ids.txt"}}}
    assert data_files(spec, str(tmp_path)) == ["rows.npz", "qrels.tsv", "g_ids.txt", "q.npz", "g.npy"]
    # a model's own files are no data; a path that names no file (a glob) is left to its source
    assert data_files({"dataset": {"source": {"type": "webdataset", "path": "shards/*.tar"}},
                       "extractor": {"decl": {"type": "hf_text", "model_path": "rows.npz"}}}, str(tmp_path)) == []
    assert data_files({"stage": "score", "embedding": {"path": "results/x.h5"}}, str(tmp_path)) == []


def test_a_retrieval_partial_declares_one_input_its_fanout_bundle_and_not_the_protocol(tmp_path, monkeypatch):
    """A fanned-out partial reads only files of its candidate's fan-out bundle (the merge spec, both endpoints by
    range, the relevance rows by side: stages.fanout_bundle, run_score_fanout_partial), so the bundle folder is its
    one input, by pattern; the staging job reads the endpoints and the protocol (the protocol is the merge's to
    check, so it is no input of the 10,000 partial jobs)."""
    from small_workflow import small_config
    from vertebrae.planning import plan
    from vertebrae.planning.paths import artifact_path

    monkeypatch.chdir(tmp_path)
    planned = plan(small_config(tmp_path), base_dir=tmp_path)
    (merge_fp,) = set(planned.fanouts.values())
    merge = planned.specs[merge_fp]
    bundle = artifact_path("fanout", merge_fp, protocol="retrieval")
    assert bundle == f"results/retrieval/fanouts/{merge_fp}"
    for ref in merge["partials"]:
        assert planned.inputs(ref["fingerprint"]) == {"fanout": bundle}
    staging = planned.inputs(merge_fp, fanout=True)
    assert {staging["queries"], staging["gallery"], staging["protocol"]} == {
        merge["query"]["path"], merge["gallery"]["path"], merge["protocol"]["path"]}

# -- the files a source or a model names (issue 47): declared for exactly the jobs that read them

@pytest.fixture(scope="module")
def image_plan(tmp_path_factory):
    """The three sources as zero-shot benchmarks of 3 sample shards each, planned (working folder: ``root``)."""
    from vertebrae.planning import plan

    root = tmp_path_factory.mktemp("images")
    config = {"embedding": {"shards": 3, "batch_size": 2},
              "zero_shot": {name: zero_shot_bench(source) for name, source in image_sources(root).items()}}
    cwd = os.getcwd()
    os.chdir(root)
    try:
        planned = plan(config, base_dir=".")
    finally:
        os.chdir(cwd)
    return root, planned


def _spec_of(planned, stage, benchmark):
    (fp,) = [fp for fp, spec in planned.specs.items() if spec["stage"] == stage and spec.get("side") != "prompts"
             and spec.get("where", "").startswith(f"zero_shot.{benchmark}")]
    return fp


def _images(names):
    return [f"data/flat/img{i:03d}.png" for i in names]


def test_a_manifest_shard_job_declares_its_own_rows_images_and_the_protocol_job_all(image_plan, monkeypatch):
    root, planned = image_plan
    monkeypatch.chdir(root)
    embed = _spec_of(planned, "zero-shot-embed", "man")
    assert planned.specs[embed]["shards"] == [[0, 4], [4, 8], [8, 12]]
    order = [0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11]  # the manifest's rows: by class, then id
    for i in range(3):
        assert planned.inputs(embed, shard=i)["data"] == ["data/images.csv", *_images(order[4 * i:4 * i + 4])]
    assert planned.plan_inputs(embed)["data"] == ["data/images.csv"]  # the plan job counts rows: no image
    protocol = _spec_of(planned, "zero-shot-protocol", "man")  # hashes every image for the dataset's identity
    assert planned.inputs(protocol)["data"] == ["data/images.csv", *_images(order)]


def test_a_webdataset_shard_job_declares_the_tars_holding_its_rows(image_plan, monkeypatch):
    root, planned = image_plan
    monkeypatch.chdir(root)
    tars = [f"data/shards/train-{i:06d}.tar" for i in range(3)]
    embed = _spec_of(planned, "zero-shot-embed", "wds")
    for i in range(3):
        assert planned.inputs(embed, shard=i)["data"] == [tars[i]]
    assert planned.plan_inputs(embed)["data"] == tars  # check_tars hashes every tar
    assert planned.inputs(_spec_of(planned, "zero-shot-protocol", "wds"))["data"] == tars
    for i in range(4):
        (root / f"x-{i}.tar").write_bytes(b"x")
    assert data_files({"stage": "embed", "dataset": {"source": {"type": "webdataset", "path": "x-{0..3}.tar"}},
                       "shards": [[0, 5], [5, 12]], "tars": [[4, "a"], [0, "b"], [4, "c"], [4, "d"]]},
                      str(root), shard=1) == ["x-2.tar", "x-3.tar"]  # an empty tar is opened by no job


def test_an_image_folder_is_declared_as_its_folder(image_plan, monkeypatch):
    """Its readers list the folder (rows are its sorted walk): every job that reads it needs all of it."""
    root, planned = image_plan
    monkeypatch.chdir(root)
    embed = _spec_of(planned, "zero-shot-embed", "fold")
    assert planned.inputs(embed, shard=1)["data"] == planned.plan_inputs(embed)["data"] == ["data/folder"]


def test_a_retrieval_pairs_sides_and_their_images_are_declared(tmp_path):
    """A source pair's sides are sources too (their manifests, images and tars). A side whose plan records its tars
    reads only its shard's tars (not the other side); any other side's shard job loads the whole pair: every image
    and every tar."""
    sources = image_sources(tmp_path)
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n", encoding="utf-8")
    pair = {"type": "source_pair", "queries": sources["man"], "gallery": sources["wds"], "relevance_path": "qrels.tsv"}
    spec = {"stage": "embed", "protocol": "retrieval", "dataset": {"source": pair}, "shards": [[0, 4], [4, 12]]}
    images = manifest_images(sources["man"], tmp_path)
    assert len(images) == 12 and images[0] == "data/flat/img000.png"
    tars = [f"data/shards/train-{i:06d}.tar" for i in range(3)]
    gallery = {**spec, "side": "gallery", "tars": [[4, "a"], [4, "b"], [4, "c"]]}
    assert data_files(gallery, str(tmp_path), shard=1) == ["data/images.csv", "qrels.tsv", *tars[1:]]
    query = {**spec, "side": "query"}
    assert data_files(query, str(tmp_path), shard=0) == ["data/images.csv", "qrels.tsv", *images, *tars]


def test_a_models_local_files_are_declared_for_the_jobs_that_build_it(tmp_path):
    """A model folder's files (hidden ones are no part of a model), a weights / checkpoint / ONNX file, an
    open_clip ``local-dir:``; for the embedding and fit jobs and their plan jobs, never a score's. A hub id is the
    environment's (its cache): not declared."""
    folder = tmp_path / "models" / "vit"
    (folder / "sub").mkdir(parents=True)
    (folder / ".cache").mkdir()
    for name in ("config.json", "model.safetensors", "sub/tokenizer.json", ".cache/x", ".hidden"):
        (folder / name).write_text("x", encoding="utf-8")
    (tmp_path / "w.pt").write_bytes(b"x")
    files = ["models/vit/config.json", "models/vit/model.safetensors", "models/vit/sub/tokenizer.json"]
    for decl, expected in (
            ({"type": "hf_vision", "model": "models/vit"}, files),
            ({"type": "sentence_transformers", "model": "models/vit/"}, files),
            ({"type": "open_clip", "model": "local-dir:models/vit"}, files),
            ({"type": "open_clip", "model": "ViT-B-32", "pretrained": "w.pt"}, ["w.pt"]),
            ({"type": "timm", "model": "vit_tiny", "checkpoint": "w.pt"}, ["w.pt"]),
            ({"type": "torch", "factory": "m:f", "weights": "w.pt"}, ["w.pt"]),
            ({"type": "onnx", "path": "w.pt", "tokenizer": "models/vit"}, ["w.pt", *files]),
            ({"type": "hf_text", "model": "org/name"}, []),  # a hub id
            ({"type": "open_clip", "model": "ViT-B-32", "pretrained": "openai"}, [])):  # a tag
        assert local_model_files(decl, str(tmp_path)) == expected, decl
        for stage in ("embed", "embed-sweep", "fit", "zero-shot-embed"):
            spec = {"stage": stage, "extractor": {"decl": decl}}
            assert data_files(spec, str(tmp_path)) == expected
            assert data_files(spec, str(tmp_path), plan_job=True) == expected
        assert data_files({"stage": "score", "extractor": {"decl": decl}}, str(tmp_path)) == []
    # at an absolute path: declared on a shared disk; on object storage the node's or the image's (no object)
    decl = {"type": "torch", "factory": "m:f", "weights": str(tmp_path / "w.pt")}
    assert data_files({"stage": "embed", "extractor": {"decl": decl}}) == [str(tmp_path / "w.pt")]
    assert data_files({"stage": "embed", "extractor": {"decl": decl}}, storage=True) == []


def test_more_images_than_a_job_declares_are_left_to_the_shared_disk(image_plan, monkeypatch):
    """Above ``MAX_DECLARED_FILES`` images for one job (Snakemake's cost per declared input: docs/cloud.md), a job's
    images stay undeclared on a shared disk (a run on object storage refuses the manifest: test_storage_named_files)."""
    from vertebrae.planning import job_files

    root, planned = image_plan
    monkeypatch.chdir(root)
    monkeypatch.setattr(job_files, "MAX_DECLARED_FILES", 4)
    spec = planned.specs[_spec_of(planned, "zero-shot-embed", "man")]
    assert len(data_files(spec, shard=0)) == 5  # the manifest and its shard's 4 images
    assert data_files(planned.specs[_spec_of(planned, "zero-shot-protocol", "man")]) == ["data/images.csv"]
