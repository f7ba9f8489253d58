"""The zero-shot protocol's jobs driven by hand in a temporary working directory, with workflow plan specs:
artifact scores equal in-process results; corrupt, stale, mixed or unknown-schema inputs are refused."""

from __future__ import annotations

import copy
import csv
import json
import textwrap
from functools import partial

import numpy as np
import pytest

from vertebrae.cli import main
from vertebrae.core.artifacts import read_embeddings, write_embeddings, write_json_artifact
from vertebrae.core.errors import ArtifactError, ConfigError, ValidationError
from vertebrae.stages import zero_shot_jobs as zs_jobs
from vertebrae.stages.plan import run_plan
from vertebrae.planning import plan, zero_shot_benchmarks_from_config
from vertebrae.planning.paths import artifact_path
from workflow_support import comparable

plan_path, protocol_path, compressed_path, score_path = (
    partial(artifact_path, kind, protocol="zero_shot") for kind in ("plan", "protocol", "compressed", "score"))


def embedding_path(side, fp):
    return artifact_path("embedding", fp, protocol="zero_shot", side=side)


def shard_path(side, fp, index, count):
    return artifact_path("shard", fp, protocol="zero_shot", side=side, shard=(index, count))

ENCODERS = textwrap.dedent('''
    import numpy as np

    CENTERS = np.random.default_rng(5).normal(size=(3, 5))


    def samples(rows):
        return np.asarray(rows, dtype=np.float64)


    def texts(rows):
        return np.stack([CENTERS[("red", "green", "blue").index(t.split()[-1])] + 0.01 * len(t) for t in rows])
''')


def _config(**zero_shot):
    return {
        "seed": 1,
        "embedding": {"shards": 2, "batch_size": 2},
        "zero_shot": {"colours": {
            "dataset": {"source": {"type": "csv", "path": "rows.csv", "id_column": "id"},
                        "identity": {"kind": "declared", "name": "colours", "revision": "1"}},
            "templates": ["a {label}", "something {label}"],
            "sample_branch": "s", "text_branch": "t",
            "extractors": {"enc": {"type": "callable", "branches": {"s": "zs_stage_enc:samples", "t": "zs_stage_enc:texts"}}},
            "compression": {"method": "pca", "n_components": 2},
            "zero_shot": zero_shot,
        }},
    }


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    (tmp_path / "zs_stage_enc.py").write_text(ENCODERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    centers = np.random.default_rng(5).normal(size=(3, 5))
    with open("rows.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "a", "b", "c", "d", "e", "label"])
        for i in range(30):
            c = i % 3
            writer.writerow([f"r{i}", *(centers[c] + 0.7 * rng.normal(size=5)).tolist(), ("red", "green", "blue")[c]])
    return tmp_path


def _run_all(config):
    """Every job of the plan, in dependency order, through the runners; returns the plan."""
    wp = plan(config)
    for fp, spec in wp.specs.items():
        run_plan(wp.spec_json(fp), wp.plan_path(fp))
    by_stage = lambda stage: [s for s in wp.specs.values() if s["stage"] == stage]  # noqa: E731
    for spec in by_stage("zero-shot-protocol"):
        zs_jobs.run_write_protocol(plan_path(spec["fingerprint"]), protocol_path(spec["fingerprint"]))
    for spec in by_stage("zero-shot-embed"):
        fp, side = spec["fingerprint"], spec["side"]
        protocol = spec["protocol"]["path"] if side == "prompts" else None
        shards = [shard_path(side, fp, i, len(spec["shards"])) for i in range(len(spec["shards"]))]
        for i, path in enumerate(shards):
            zs_jobs.run_embed_shard(plan_path(fp), side, i, path, protocol=protocol)
        zs_jobs.run_merge(plan_path(fp), shards, embedding_path(side, fp))
    for spec in by_stage("compress-zero-shot"):
        zs_jobs.run_compress(plan_path(spec["fingerprint"]), spec["samples"]["path"], compressed_path(spec["fingerprint"]))
    for spec in by_stage("score-zero-shot"):
        raw = None if spec["raw_samples"] is None else spec["raw_samples"]["path"]
        zs_jobs.run_score(plan_path(spec["fingerprint"]), spec["samples"]["path"], spec["prompts"]["path"],
                          spec["protocol"]["path"], score_path(spec["fingerprint"]), raw_samples=raw)
    return wp


def _report_spec(wp):
    return wp.spec(wp.zero_shot_reports["colours"])


def test_artifact_scores_equal_in_process_and_reports_rebuild_from_score_keys(workdir):
    config = _config(top_k=[1, 2], sample_batch_size=4)
    wp = _run_all(config)
    spec = _report_spec(wp)
    scores = [c["score"]["path"] for c in spec["candidates"]]
    assert main(["zero-shot-from-artifacts", "--plan-json", plan_path(spec["fingerprint"]), "--protocol",
                 spec["protocol"]["path"], *[a for s in scores for a in ("--score-key", s)], "--json-output", "r.json",
                 "--markdown-output", "r.md"]) == 0
    # `vertebrae compare` and `vertebrae report` serve a zero-shot plan too, with the very same bytes
    compare_fp = wp.comparisons[spec["fingerprint"]]
    assert main(["compare", "--plan-json", wp.plan_path(compare_fp), "--report-plan",
                 plan_path(spec["fingerprint"]), "--protocol", spec["protocol"]["path"], "--output", "cmp.json",
                 *scores]) == 0
    assert main(["report", "--plan-json", plan_path(spec["fingerprint"]), "--protocol", spec["protocol"]["path"],
                 "--comparison", "cmp.json", "--json-output", "same.json", "--markdown-output", "same.md", *scores]) == 0
    assert (workdir / "same.json").read_bytes() == (workdir / "r.json").read_bytes()
    assert (workdir / "same.md").read_bytes() == (workdir / "r.md").read_bytes()
    written = json.loads((workdir / "r.json").read_text())
    expected = zero_shot_benchmarks_from_config(config)["colours"].run().to_dict()
    assert comparable(written) == comparable(expected)
    assert [c["name"] for c in written["candidate_results"]] == ["enc", "enc[pca_2]"]
    assert written["candidate_results"][0]["zero_shot"]["metrics"]["accuracy"] > 0.6
    assert written["dataset_summary"]["prompts"][0] == {"label": "blue", "text": "a blue", "template_id": "template_0",
                                                        "display": "blue"}
    # without a plan: names and provenance come from the score artifacts themselves
    assert main(["zero-shot-from-artifacts", "--protocol", spec["protocol"]["path"], "--benchmark", "colours",
                 *[a for s in scores for a in ("--score-key", s)], "--json-output", "r2.json", "--markdown-output", "r2.md"]) == 0
    # (all but the config's name for the dataset, which only the plan knows: the declared identity's name shows)
    rebuilt = json.loads((workdir / "r2.json").read_text())
    assert written["dataset_summary"].pop("name") == "colours" and "name" not in rebuilt["dataset_summary"]
    assert comparable(rebuilt) == comparable(written)
    assert "(dataset colours@1)" in (workdir / "r2.md").read_text() and "(dataset colours)" in (workdir / "r.md").read_text()


def test_a_report_combines_only_matching_settings(workdir):
    first = _run_all(_config())
    other = _run_all(_config(similarity="dot"))
    a = _report_spec(first)["candidates"][0]["score"]["path"]
    b = _report_spec(other)["candidates"][0]["score"]["path"]
    assert a != b  # settings are part of the score key: nothing is overwritten
    with pytest.raises(ArtifactError, match="zero_shot differ"):
        zs_jobs.run_report(None, _report_spec(first)["protocol"]["path"], [a, b], "x.json", "x.md")
    assert main(["zero-shot-from-artifacts", "--protocol", _report_spec(first)["protocol"]["path"], "--score-key", a,
                 "--score-key", b, "--json-output", "x.json", "--markdown-output", "x.md"]) == 2


def test_protocol_artifacts_are_verified_before_any_embedding_is_scored(workdir):
    wp = _run_all(_config())
    ref = _report_spec(wp)["protocol"]
    payload = json.loads((workdir / ref["path"]).read_text())["payload"]
    recipe = json.loads((workdir / ref["path"]).read_text())["manifest"]["recipe"]
    assert zs_jobs.read_zero_shot_protocol(ref, ref["path"]).fingerprint() == ref["fingerprint"]
    stale = copy.deepcopy(payload)
    stale["prompts"][0]["text"] = "a navy blue"  # a well-formed artifact whose payload is not the planned protocol
    write_json_artifact("stale.json", "protocol", stale, fingerprint=ref["fingerprint"], recipe=recipe)
    with pytest.raises(ArtifactError, match=f"stale.json: the protocol payload hashes to .*, not {ref['fingerprint']}"):
        zs_jobs.read_zero_shot_protocol(ref, "stale.json")
    unknown = {**payload, "schema": "vertebrae.zero-shot-protocol/v2"}
    write_json_artifact("unknown.json", "protocol", unknown, fingerprint=ref["fingerprint"], recipe=recipe)
    with pytest.raises(ArtifactError, match="unknown.json: invalid zero-shot protocol: .*schema"):
        zs_jobs.read_zero_shot_protocol(ref, "unknown.json")
    write_json_artifact("recipe.json", "protocol", payload, fingerprint=ref["fingerprint"],
                        recipe={**recipe, "source_dataset_identity_key": "declared:other@1"})
    with pytest.raises(ArtifactError, match="recipe.json: manifest recipe"):
        zs_jobs.read_zero_shot_protocol(ref, "recipe.json")
    text = (workdir / ref["path"]).read_text()
    (workdir / "corrupt.json").write_text(text.replace('"a blue"', '"a bleu"'))
    with pytest.raises(ArtifactError, match="corrupt.json: content hash mismatch"):
        zs_jobs.read_zero_shot_protocol(ref, "corrupt.json")
    score = next(s for s in wp.specs.values() if s["stage"] == "score-zero-shot" and s["pair"] is None)
    with pytest.raises(ArtifactError, match="stale.json"):
        zs_jobs.run_score(plan_path(score["fingerprint"]), score["samples"]["path"], score["prompts"]["path"],
                          "stale.json", "never.json")
    assert not (workdir / "never.json").exists()


def test_stale_compressed_samples_and_mixed_inputs_are_refused(workdir):
    wp = _run_all(_config())
    spec = next(s for s in wp.specs.values() if s["stage"] == "score-zero-shot" and s["pair"] is not None)
    artifact = read_embeddings(spec["samples"]["path"], fingerprint=spec["samples"]["fingerprint"])
    write_embeddings("stale.h5", artifact.matrix * 1.0001, list(artifact.row_ids), fingerprint=spec["samples"]["fingerprint"],
                     recipe=artifact.manifest["recipe"], metadata=artifact.manifest["metadata"])
    args = (plan_path(spec["fingerprint"]), "stale.h5", spec["prompts"]["path"], spec["protocol"]["path"], "out.json")
    with pytest.raises(ArtifactError, match="stale.h5: refitting the compression on the raw samples does not reproduce"):
        zs_jobs.run_score(*args, raw_samples=spec["raw_samples"]["path"])
    with pytest.raises(ValidationError, match="needs --raw-samples"):
        zs_jobs.run_score(*args)
    write_embeddings("raw-tagged.h5", artifact.matrix, list(artifact.row_ids), fingerprint=spec["samples"]["fingerprint"],
                     recipe=artifact.manifest["recipe"], metadata={"compression_pair": "0123456789abcdef"})
    with pytest.raises(ArtifactError, match="compressed by pair '0123456789abcdef', expected"):
        zs_jobs.run_score(plan_path(spec["fingerprint"]), "raw-tagged.h5", spec["prompts"]["path"], spec["protocol"]["path"],
                          "out.json", raw_samples=spec["raw_samples"]["path"])
    with pytest.raises(ValidationError, match="plan embeds side 'prompts', not 'samples'"):
        prompt_spec = next(s for s in wp.specs.values() if s["stage"] == "zero-shot-embed" and s["side"] == "prompts")
        zs_jobs.run_embed_shard(plan_path(prompt_spec["fingerprint"]), "samples", 0, "x.h5")


def test_specs_are_rechecked_against_the_current_declaration(workdir):
    wp = plan(_config())
    protocol_spec = next(s for s in wp.specs.values() if s["stage"] == "zero-shot-protocol")
    edited = copy.deepcopy(protocol_spec)
    edited["declaration"]["templates"] = ["a {label}", "something else {label}"]
    # the protocol is built once, by its write-protocol job, which refuses a declaration that no longer gives the
    # planned fingerprint; the plan job checks only that the recipe names it
    run_plan(json.dumps(edited), plan_path(edited["fingerprint"]))
    with pytest.raises(ValidationError, match="re-plan"):
        zs_jobs.run_write_protocol(plan_path(edited["fingerprint"]), "protocol.json")
    assert not (workdir / "protocol.json").exists()
    renamed = copy.deepcopy(protocol_spec)
    renamed["recipe"]["zero_shot_protocol"] = "0123456789abcdef"
    with pytest.raises(ValidationError, match="its recipe names protocol '0123456789abcdef'"):
        run_plan(json.dumps(renamed), "p.json")
    embed = next(s for s in wp.specs.values() if s["stage"] == "zero-shot-embed" and s["side"] == "samples")
    tampered = copy.deepcopy(embed)
    tampered["branch"] = "t"
    with pytest.raises(ValidationError, match="does not match its recipe"):
        run_plan(json.dumps(tampered), "p.json")
    counts = {s["side"]: len(s["shards"]) for s in wp.specs.values() if s["stage"] == "zero-shot-embed"}
    assert counts == {"samples": 2, "prompts": 2}
    for side in ("samples", "prompts"):  # a planned row count or shard bounds the source no longer gives
        spec = next(s for s in wp.specs.values() if s["stage"] == "zero-shot-embed" and s["side"] == side)
        run_plan(json.dumps(spec), f"{side}.json")  # as planned: accepted
        stale = copy.deepcopy(spec)
        stale["n_rows"] += 1
        with pytest.raises(ValidationError, match="re-plan"):
            run_plan(json.dumps(stale), "p.json")
        stale = copy.deepcopy(spec)
        stale["shards"][0][1] -= 1
        with pytest.raises(ValidationError, match="re-plan"):
            run_plan(json.dumps(stale), "p.json")


def test_config_errors_name_the_key(workdir):
    bad = _config()
    bad["zero_shot"]["colours"]["templates"] = ["a {colour}"]
    with pytest.raises(ConfigError, match=r"zero_shot.colours: template 0 'a \{colour\}': unknown field"):
        plan(bad)
    bad = _config()
    bad["zero_shot"]["colours"]["prompts"] = [{"label": "red", "texts": ["r"]}, {"label": "blue", "texts": ["b"]}]
    with pytest.raises(ConfigError, match="exactly one of prompts"):
        plan(bad)
    del bad["zero_shot"]["colours"]["templates"]
    with pytest.raises(ConfigError, match=r"\['green'\] have no prompt"):
        plan(bad)
    bad = _config()
    bad["zero_shot"]["colours"]["text_branch"] = "image"
    with pytest.raises(ConfigError, match="extractors.enc: .*text_branch 'image' is not one of its branches"):
        plan(bad)
    bad = _config()
    bad["zero_shot"]["colours"]["extractors"]["enc"]["branches"]["t"] = "zs_stage_enc:nothing"
    with pytest.raises(ConfigError, match=r"extractors.enc.branches.t: .*has no attribute 'nothing'"):
        plan(bad)
    bad = _config(similarity="euclid")
    with pytest.raises(ConfigError, match="zero_shot.colours.zero_shot.similarity"):
        plan(bad)


def test_shards_are_capped_per_side_and_score_keys_include_every_setting(workdir):
    config = _config()
    config["embedding"]["shards"] = 8
    wp = plan(config)
    counts = {s["side"]: len(s["shards"]) for s in wp.specs.values() if s["stage"] == "zero-shot-embed"}
    # capped at each side's batch count (batches of 2): 30 samples, 3 classes x 2 templates = 6 prompts
    assert counts == {"samples": 8, "prompts": 3}

    def score_fps(cfg):
        return sorted(fp for fp, s in plan(cfg).specs.items() if s["stage"] == "score-zero-shot")

    base = score_fps(_config())
    overlap = _config()
    overlap["zero_shot"]["colours"]["scoring"] = {"k": 2}
    assert set(score_fps(overlap)).isdisjoint(base)
    assert set(score_fps(_config(primary_metric="macro_f1"))).isdisjoint(base)
    seeded = _config()
    seeded["seed"] = 2
    assert set(score_fps(seeded)).isdisjoint(base)


def test_webdataset_shards_follow_tar_files_and_merge_byte_identically(tmp_path, monkeypatch):
    """13 samples in tars of 5, 5 and 3, batches of 4, 1 to 3 shard jobs: each job reads only its own tars (the row
    references it embeds and the files it opens for data), no batch crosses a tar, and the merged samples are the
    same bytes whatever the shard count, and those of the in-process path."""
    import os

    import format_fixtures
    from format_fixtures import tiny_images, write_tar_shards
    from vertebrae.core import image_refs
    from vertebrae.data.sources import webdataset as wds_module
    from vertebrae.data.sources import load_source
    from vertebrae.extractors.registry import build_extractor
    from vertebrae.stages.common import embed_endpoint

    monkeypatch.chdir(tmp_path)
    tars = [str(p) for p in write_tar_shards(tmp_path / "shards", tiny_images(13), label="txt")]
    source = {"type": "webdataset", "path": "shards/train-{000000..000002}.tar", "image_key": "png", "label_key": "txt"}
    extractor = {"type": "callable", "cache_identity": "centred-v1",
                 "branches": {"image": "format_fixtures:batch_centred_features", "text": "format_fixtures:prompt_features"}}
    opened: list[str] = []
    real_open = open

    def spying_open(path, *args, **kwargs):
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    merged = {}
    for shards in (1, 2, 3):
        config = {"embedding": {"shards": shards, "batch_size": 4}, "zero_shot": {"wds": {
            "dataset": {"source": source}, "sample_branch": "image", "text_branch": "text", "extractors": {"px": extractor},
            "prompts": [{"label": name, "texts": [f"a {name} picture"]} for name in ("blue", "green", "red")]}}}
        wp = plan(config)
        spec = next(s for s in wp.specs.values() if s["stage"] == "zero-shot-embed" and s["side"] == "samples")
        assert spec["segments"] == [0, 5, 10]
        fp = spec["fingerprint"]
        run_plan(wp.spec_json(fp), plan_path(fp))
        paths = [shard_path("samples", fp, i, len(spec["shards"])) for i in range(len(spec["shards"]))]
        for i, ((start, stop), path) in enumerate(zip(spec["shards"], paths)):
            mine = [tars[t] for t, first in enumerate((0, 5, 10)) if start <= first < stop]
            opened.clear()
            format_fixtures.BATCHES.clear()
            monkeypatch.setattr(wds_module, "open", spying_open, raising=False)
            monkeypatch.setattr(image_refs, "open", spying_open, raising=False)
            zs_jobs.run_embed_shard(plan_path(fp), "samples", i, path)
            monkeypatch.undo()
            monkeypatch.chdir(tmp_path)
            assert sorted({os.path.abspath(p) for p in opened}) == mine, (shards, i)  # data reads: its own tars only
            assert all(len(batch) == 1 and os.path.abspath(batch[0]) in mine for batch in format_fixtures.BATCHES)
        zs_jobs.run_merge(plan_path(fp), paths, embedding_path("samples", fp))
        merged[shards] = (fp, read_embeddings(embedding_path("samples", fp), fingerprint=fp).matrix)
    assert [s for s in wp.specs.values() if s["stage"] == "zero-shot-embed" and s["side"] == "samples"][0]["shards"] == [
        [0, 5], [5, 10], [10, 13]]
    assert len({fp for fp, _ in merged.values()}) == 1
    assert merged[1][1].tobytes() == merged[2][1].tobytes() == merged[3][1].tobytes()
    inputs = load_source(source, base_dir=tmp_path, where="source").features
    block = embed_endpoint(build_extractor("px", extractor, where="x"), inputs, list(inputs.ids), shards=2, batch_size=4,
                           endpoint="samples", branch="image")
    assert block.matrix.tobytes() == merged[1][1].tobytes()


def test_webdataset_shard_jobs_open_only_their_own_tars(tmp_path, monkeypatch):
    """A zero-shot samples endpoint and both webdataset sides of a source_pair, 3 shards each: every shard job, run
    again in a copy of the working directory from which every tar it does not own is deleted, writes the same
    embeddings (its plan records each tar's rows and digest, so it opens no other tar, not even its headers). A tar
    edited after planning is refused by the shard job reading it, and by the plan job where its headers changed."""
    import shutil

    from format_fixtures import tiny_images, write_tar_shards
    from vertebrae.stages import jobs

    work = tmp_path / "work"
    write_tar_shards(work / "shards", tiny_images(13), label="txt")  # 5 + 5 + 3
    write_tar_shards(work / "queries", tiny_images(7), per_shard=3, label="txt")  # 3 + 3 + 1
    gallery = {"type": "webdataset", "path": "shards/train-{000000..000002}.tar", "image_key": "png", "label_key": "txt"}
    queries = {**gallery, "path": "queries/train-{000000..000002}.tar"}
    extractor = {"type": "callable", "cache_identity": "centred-v1",
                 "branches": {"image": "format_fixtures:batch_centred_features", "text": "format_fixtures:prompt_features"}}
    config = {"embedding": {"shards": 3, "batch_size": 2}, "zero_shot": {"wds": {
        "dataset": {"source": gallery}, "sample_branch": "image", "text_branch": "text", "extractors": {"px": extractor},
        "prompts": [{"label": name, "texts": [f"a {name} picture"]} for name in ("blue", "green", "red")]}},
        "retrieval": {"pair": {"dataset": {"source": {"type": "source_pair", "relevance": "same_label",
                                                      "queries": queries, "gallery": gallery}},
                               "query_branch": "image", "gallery_branch": "image", "extractors": {"px": extractor}}}}
    monkeypatch.chdir(work)
    wp = plan(config)
    specs = [s for s in wp.specs.values() if s.get("tars") is not None]
    assert sorted((s["stage"], s["endpoint"] if s["stage"] != "embed" else s["side"]) for s in specs) == [
        ("embed", "gallery"), ("embed", "query"), ("zero-shot-embed", "samples")]

    def run_shard(spec, index, output):
        plan_file = f"plans/{spec['fingerprint']}.json"
        if spec["stage"] == "zero-shot-embed":
            zs_jobs.run_embed_shard(plan_file, "samples", index, output)
        else:
            jobs.run_embed_shard(plan_file, index, output, side=spec["side"])
        return read_embeddings(output, fingerprint=None)

    for spec in specs:
        folder = "queries" if spec.get("side") == "query" else "shards"
        assert [rows for rows, _ in spec["tars"]] == ([3, 3, 1] if folder == "queries" else [5, 5, 3])
        run_plan(wp.spec_json(spec["fingerprint"]), work / "plans" / f"{spec['fingerprint']}.json")
        firsts = np.cumsum([0] + [rows for rows, _ in spec["tars"]])[:-1]
        for i, (start, stop) in enumerate(spec["shards"]):
            whole = run_shard(spec, i, work / "out" / f"{spec['fingerprint']}-{i}.h5")
            alone = tmp_path / f"alone-{spec['fingerprint'][:8]}-{i}"
            shutil.copytree(work, alone)
            for t, first in enumerate(firsts):
                if not start <= first < stop:
                    (alone / folder / f"train-{t:06d}.tar").unlink()
            assert len(list((alone / folder).iterdir())) == 1  # 3 shards of 3 tars: one tar each
            monkeypatch.chdir(alone)
            mine = run_shard(spec, i, alone / "mine.h5")
            monkeypatch.chdir(work)
            assert mine.matrix.tobytes() == whole.matrix.tobytes() and mine.row_ids == whole.row_ids
            assert mine.manifest["fingerprint"] == whole.manifest["fingerprint"]
            # the same artifact but for the job's own timing record (``vertebrae.core.throughput``)
            assert {**mine.manifest, "metadata": None} == {**whole.manifest, "metadata": None}
            assert set(mine.manifest["metadata"]) == {"throughput"}

    spec = next(s for s in specs if s["stage"] == "zero-shot-embed")
    write_tar_shards(tmp_path / "edited", tiny_images(13)[5:10], label="txt")  # 5 other samples, same count
    shutil.copyfile(tmp_path / "edited" / "train-000000.tar", work / "shards" / "train-000000.tar")
    # the plan job checks the tars' headers (rows, segments), not their bytes: a job reads no digest cache, and
    # a multi-GB tar set is not hashed again there; each shard job checks its own tars' bytes (issue 47)
    run_plan(wp.spec_json(spec["fingerprint"]), work / "plans" / "stale.json")
    with pytest.raises(ValidationError, match=r"train-000000.tar changed since the plan was made; re-plan"):
        run_shard(spec, 0, work / "out" / "stale.h5")
    run_shard(spec, 1, work / "out" / "unaffected.h5")  # its own tar is the planned one
    write_tar_shards(tmp_path / "shorter", tiny_images(13)[5:9], label="txt")  # 4 samples: the headers say so
    shutil.copyfile(tmp_path / "shorter" / "train-000000.tar", work / "shards" / "train-000000.tar")
    with pytest.raises(ValidationError, match=r"the source now has 12 rows in 3 tar file\(s\), the plan expected 13"):
        run_plan(wp.spec_json(spec["fingerprint"]), work / "plans" / "stale.json")
