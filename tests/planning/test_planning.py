"""DAG-time planning: config validation (defaults, unknown keys, types) and the job specs of a plan."""

from __future__ import annotations

import copy
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml

from vertebrae import ConfigError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.stages.plan import KIND_OF_STAGE
from vertebrae.planning import artifact_path, gpus, load_config_file, plan, report_paths, validate_config
from vertebrae.planning.job_files import DATA_STAGES

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def default_config() -> dict:
    """The default config with digits_search scored in one job per candidate (its fan-out, scoring.gallery_shards,
    is planned and tested in test_a_fanned_out_score_replaces_the_score_job_by_partials_and_a_merge)."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text(encoding="utf-8"))
    assert config["retrieval"]["digits_search"].pop("scoring") == {"gallery_shards": 2}
    return config


@pytest.fixture(scope="module")
def default_plan(default_config):
    """The plan of the default config's scikit-learn-data benchmarks (digits, diabetes, digits_search), whose
    structure the tests below spell out; the text benchmarks (MiniLM over config/data/topics.csv) and zero-shot
    have their own tests (tests/workflow/test_text_benchmarks.py, test_zero_shot_workflow.py)."""
    config = copy.deepcopy(default_config)
    config.pop("zero_shot", None)
    config["benchmarks"].pop("topics_labelled", None)
    config["retrieval"].pop("topics_search", None)
    return plan(config)


def minimal_config() -> dict:
    return {"benchmarks": {"b": {
        "dataset": {"source": {"type": "sklearn", "name": "iris"}, "identity": {"kind": "declared", "name": "iris", "revision": 1}},
        "extractors": {"p": {"type": "precomputed"}, "s": {"type": "sklearn", "steps": [{"estimator": "sklearn.decomposition.PCA"}]}},
    }}}


# -- validate_config ------------------------------------------------------------------------------------


def test_validate_config_fills_defaults_without_mutating_the_input():
    config = minimal_config()
    before = copy.deepcopy(config)
    valid = validate_config(config)
    assert config == before  # the input is untouched
    assert valid["seed"] == 0
    assert valid["embedding"] == {"shards": "auto", "batch_size": 256}
    bench = valid["benchmarks"]["b"]
    assert bench["protocol"] == "labelled"
    assert "shards" not in bench  # no default: embedding.shards applies
    assert bench["scoring"] == {
        "k": "auto", "min_k": 10, "max_k": 50, "min_samples_per_cluster": 5, "kmeans_kwargs": {},
        "offline_chunk_size": 10000, "normalize_embeddings": True, "exclude_classes": None,
        "max_dense_bytes": 2000000000, "small_classes": "refuse",
    }
    sk = bench["extractors"]["s"]
    assert sk["random_state"] == 0 and sk["allow_sparse"] is True
    assert sk["steps"] == [{"estimator": "sklearn.decomposition.PCA", "params": {}}]
    assert bench["dataset"] == {**before["benchmarks"]["b"]["dataset"], "target_type": "classification",
                                "label_names": None, "target_names": None}
    assert bench["continuous_scoring"]["null_mode"] == "refit_permutation"


def test_validate_config_keeps_given_values_and_fills_the_rest():
    config = minimal_config()
    config["seed"] = 7
    config["embedding"] = {"shards": 2}
    config["benchmarks"]["b"]["scoring"] = {"k": 3}
    valid = validate_config(config)
    assert valid["seed"] == 7
    assert valid["embedding"] == {"shards": 2, "batch_size": 256}
    assert valid["benchmarks"]["b"]["scoring"]["k"] == 3
    assert valid["benchmarks"]["b"]["scoring"]["min_k"] == 10
    assert config["embedding"] == {"shards": 2}  # the nested input dicts are untouched too
    assert config["benchmarks"]["b"]["scoring"] == {"k": 3}


def test_the_default_config_is_valid(default_config):
    valid = validate_config(default_config)
    assert list(valid["benchmarks"]) == ["digits", "diabetes", "topics_labelled"]
    digits, diabetes = valid["benchmarks"]["digits"], valid["benchmarks"]["diabetes"]
    assert list(digits["extractors"]) == ["pixels", "pca16", "random_projection16"]
    assert "shards" not in digits  # embedding.shards (2) applies
    assert [(c["method"], c["n_components"]) for c in digits["compression"]] == [("pca", 8)]
    assert digits["stability"]["enabled"] is True and digits["stability"]["repeats"] == 3
    assert digits["separatix"]["enabled"] is True and digits["separatix"]["max_samples"] == 600
    assert list(diabetes["extractors"]) == ["features", "poly2", "pca3"]
    assert diabetes["shards"] == 1
    assert diabetes["dataset"]["target_type"] == "regression"
    assert diabetes["dataset"]["target_names"] == ["disease_progression"]
    assert diabetes["continuous_scoring"]["k"] == 4 and diabetes["continuous_scoring"]["n_null_permutations"] == 5
    assert diabetes["stability"]["enabled"] is True and diabetes["stability"]["repeats"] == 3
    assert diabetes["compression"] == []
    assert list(valid["retrieval"]) == ["digits_search", "topics_search"]
    search = valid["retrieval"]["digits_search"]
    assert search["dataset"]["source"] == {"type": "label_split", "source": {"type": "sklearn", "name": "digits"},
                                           "query_every": 6, "grade": "label_and_mean"}
    assert search["dataset"]["identity"] == {"kind": "declared", "name": "sklearn-digits-search", "revision": "1"}
    assert search["dataset"]["exclude_same_id"] is False
    assert search["shards"] == 1
    assert list(search["extractors"]) == ["pixels", "pca16"]
    assert search["extractors"]["pca16"]["steps"] == [
        {"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 16}},
    ]
    assert search["compression"] == {"method": "pca", "n_components": 8}
    # similarity and primary_metric as declared, the rest schema defaults (ks: none, the conventions' apply)
    assert search["retrieval"] == {
        "similarity": "cosine", "primary_metric": "ndcg@10", "conventions": "vertebrae", "bidirectional": False,
        "query_block_size": 512, "gallery_block_size": 10000, "max_dense_bytes": 2000000000, "worst_queries": 10,
    }


def _bench(config):
    return config["benchmarks"]["digits"]


UNKNOWN_KEYS = [
    ("(top level)", lambda c: c),
    ("embedding", lambda c: c["embedding"]),
    ("benchmarks.digits", _bench),
    ("benchmarks.digits.dataset", lambda c: _bench(c)["dataset"]),
    ("benchmarks.digits.dataset.source", lambda c: _bench(c)["dataset"]["source"]),
    ("benchmarks.digits.dataset.identity", lambda c: _bench(c)["dataset"]["identity"]),
    ("benchmarks.digits.extractors.pixels", lambda c: _bench(c)["extractors"]["pixels"]),
    ("benchmarks.digits.extractors.pca16.steps.1", lambda c: _bench(c)["extractors"]["pca16"]["steps"][1]),
    ("benchmarks.digits.scoring", lambda c: _bench(c)["scoring"]),
]


@pytest.mark.parametrize(("where", "locate"), UNKNOWN_KEYS, ids=[w for w, _ in UNKNOWN_KEYS])
def test_unknown_keys_are_refused_naming_the_key_path(default_config, where, locate):
    config = copy.deepcopy(default_config)
    locate(config)["colour_scheme"] = "blue"
    with pytest.raises(ConfigError) as info:
        validate_config(config)
    message = str(info.value)
    assert f"{where}:" in message
    assert "colour_scheme" in message


def test_an_unknown_key_in_a_step_names_the_extractor_and_step(default_config):
    config = copy.deepcopy(default_config)
    _bench(config)["extractors"]["random_projection16"]["steps"][0]["n_components"] = 16
    with pytest.raises(ConfigError, match=r"benchmarks\.digits\.extractors\.random_projection16\.steps\.0: .*n_components"):
        validate_config(config)


BAD_VALUES = [
    ("benchmarks.digits.dataset.source.type", lambda c: _bench(c)["dataset"]["source"].update(type="parquet"), "parquet"),
    ("embedding.shards", lambda c: c["embedding"].update(shards=0), "0"),
    ("embedding.shards", lambda c: c["embedding"].update(shards="4"), "'4'"),
    ("embedding.batch_size", lambda c: c["embedding"].update(batch_size=2.5), "2.5"),
    ("seed", lambda c: c.update(seed=-1), "-1"),
    ("benchmarks.digits.shards", lambda c: _bench(c).update(shards=0), "0"),
    ("benchmarks.digits.scoring.k", lambda c: _bench(c)["scoring"].update(k=0), "0"),
    ("benchmarks.digits.scoring.k", lambda c: _bench(c)["scoring"].update(k="many"), "many"),
    ("benchmarks.digits.scoring.normalize_embeddings", lambda c: _bench(c)["scoring"].update(normalize_embeddings="yes"), "yes"),
    ("benchmarks.digits.extractors.pixels.type", lambda c: _bench(c)["extractors"]["pixels"].update(type="keras"), "keras"),
    ("benchmarks.digits.dataset.identity.kind", lambda c: _bench(c)["dataset"]["identity"].update(kind="ephemeral"), "ephemeral"),
    ("benchmarks.digits.dataset.source.name", lambda c: _bench(c)["dataset"]["source"].update(name="mnist"), "mnist"),
    ("benchmarks.digits.protocol", lambda c: _bench(c).update(protocol="retrieval"), "retrieval"),
]


@pytest.mark.parametrize(("where", "mutate", "value"), BAD_VALUES, ids=[f"{w}={v}" for w, _, v in BAD_VALUES])
def test_wrong_types_and_enums_are_refused_naming_the_key(default_config, where, mutate, value):
    config = copy.deepcopy(default_config)
    mutate(config)
    with pytest.raises(ConfigError) as info:
        validate_config(config)
    assert f"{where}:" in str(info.value)
    assert value in str(info.value)


def test_no_benchmarks_and_bad_benchmark_names_are_refused(default_config):
    # neither benchmarks nor retrieval: the top-level anyOf fails
    with pytest.raises(ConfigError, match=r"config key \(top level\): .* is not valid under any of the given schemas"):
        validate_config({"seed": 0})
    with pytest.raises(ConfigError, match=r"config key \(top level\): .* is not valid under any of the given schemas"):
        validate_config({"seed": 0, "embedding": {"shards": 2}})
    with pytest.raises(ConfigError, match=r"config key \(top level\): .* is not valid under any of the given schemas"):
        plan({})
    with pytest.raises(ConfigError, match=r"benchmarks: .*non-empty"):
        validate_config({"benchmarks": {}})
    config = copy.deepcopy(default_config)
    config["benchmarks"]["my digits"] = config["benchmarks"].pop("digits")
    with pytest.raises(ConfigError, match=r"benchmarks: 'my digits'"):
        validate_config(config)
    config = copy.deepcopy(default_config)
    config["retrieval"]["my search"] = config["retrieval"].pop("digits_search")
    with pytest.raises(ConfigError, match=r"retrieval: 'my search'"):
        validate_config(config)
    # a retrieval benchmark may not share a labelled benchmark's report name
    config = copy.deepcopy(default_config)
    config["retrieval"]["digits"] = config["retrieval"].pop("digits_search")
    with pytest.raises(ConfigError, match=r"retrieval\.digits: a labelled benchmark has the same name"):
        plan(config)


def test_a_retrieval_only_config_is_valid_and_plans_only_retrieval(default_config):
    config = {"retrieval": {"digits_search": copy.deepcopy(default_config["retrieval"]["digits_search"])}}
    valid = validate_config(config)
    assert "benchmarks" not in valid and list(valid["retrieval"]) == ["digits_search"]
    assert valid["seed"] == 0 and valid["embedding"] == {"shards": "auto", "batch_size": 256}
    p = plan(config)
    assert p.reports == {} and list(p.retrieval_reports) == ["digits_search"]
    assert len(p.specs) == 14
    assert Counter(spec["stage"] for spec in p.specs.values()) == {
        "retrieval-protocol": 1, "fit": 1, "embed": 4, "compress-retrieval": 2, "score-retrieval": 4, "retrieval-report": 1,
        "compare": 1,
    }
    assert p.final_outputs() == ["results/reports/digits_search/report.json", "results/reports/digits_search/report.md"]
    # planning it next to the labelled benchmarks changes none of its fingerprints
    assert set(p.specs) <= set(plan(default_config).specs)


def test_a_missing_identity_is_refused(default_config):
    config = copy.deepcopy(default_config)
    del _bench(config)["dataset"]["identity"]
    with pytest.raises(ConfigError, match=r"benchmarks\.digits\.dataset: 'identity' is a required property"):
        validate_config(config)
    with pytest.raises(ConfigError, match=r"benchmarks\.digits\.dataset"):
        plan(config)


def test_a_declared_identity_without_revision_is_refused_by_plan(default_config):
    config = copy.deepcopy(default_config)
    _bench(config)["dataset"]["identity"] = {"kind": "declared", "name": "x"}
    with pytest.raises(ConfigError) as info:
        plan(config)
    assert "benchmarks.digits.dataset.identity" in str(info.value)
    assert "revision" in str(info.value)


def test_a_manifest_identity_without_manifest_is_refused_by_plan(default_config):
    config = copy.deepcopy(default_config)
    _bench(config)["dataset"]["identity"] = {"kind": "manifest", "name": "x"}
    with pytest.raises(ConfigError, match=r"benchmarks\.digits\.dataset\.identity"):
        plan(config)


def test_load_config_file_reports_unreadable_files(tmp_path):
    with pytest.raises(ConfigError, match="missing.yaml"):
        load_config_file(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("benchmarks: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="bad.yaml"):
        load_config_file(bad)


# -- plan on the default config -------------------------------------------------------------------------


def _benchmark_of(p, fp) -> str:
    """The benchmark a spec belongs to: fit/embed/protocol specs name their dataset key (benchmarks.NAME or, for
    specs of the retrieval protocol, retrieval.NAME); compress/score specs are reached through the report
    candidates (a compressed retrieval pair through its FP/query and FP/gallery refs); report specs name their
    benchmark."""
    spec = p.spec(fp)
    if spec["stage"] in ("report", "retrieval-report", "compare"):
        return spec["benchmark"]
    if "where" in spec:
        section, name = spec["where"].split(".")[:2]
        assert section == ("retrieval" if spec.get("protocol") == "retrieval" else "benchmarks"), spec["where"]
        return name
    owners = {name for name, report_fp in p.reports.items() for c in p.spec(report_fp)["candidates"]
              if fp in (c["score"]["fingerprint"], c["scored_embedding"])}
    owners |= {name for name, report_fp in p.retrieval_reports.items() for c in p.spec(report_fp)["candidates"]
               if fp in (c["score"]["fingerprint"], c["query"].split("/")[0], c["gallery"].split("/")[0])}
    (owner,) = owners
    return owner


def test_default_plan_has_thirty_nine_specs_by_stage_and_benchmark(default_plan):
    # digits: 1 protocol + 2 fit + 3 embed + 3 compress + (3 extractors x 2 variants =) 6 score + 1 report = 16
    # diabetes: 1 protocol + 2 fit + 3 embed + 0 compress + 3 score + 1 report = 10
    # digits_search: 1 retrieval-protocol + 1 fit (pca16, on the gallery) + (2 extractors x query/gallery =) 4 embed
    #   + 2 compress-retrieval (one pair per extractor) + (2 extractors x 2 variants =) 4 score-retrieval
    #   + 1 retrieval-report = 13; + 1 compare spec per report
    assert len(default_plan.specs) == 17 + 11 + 14 == 42
    assert Counter(spec["stage"] for spec in default_plan.specs.values()) == {
        "protocol": 2, "fit": 5, "embed": 10, "compress": 3, "score": 9, "report": 2,
        "retrieval-protocol": 1, "compress-retrieval": 2, "score-retrieval": 4, "retrieval-report": 1, "compare": 3,
    }
    by_benchmark = Counter((_benchmark_of(default_plan, fp), spec["stage"]) for fp, spec in default_plan.specs.items())
    assert by_benchmark == {
        ("digits", "protocol"): 1, ("digits", "fit"): 2, ("digits", "embed"): 3, ("digits", "compress"): 3,
        ("digits", "score"): 6, ("digits", "report"): 1, ("digits", "compare"): 1,
        ("diabetes", "protocol"): 1, ("diabetes", "fit"): 2, ("diabetes", "embed"): 3, ("diabetes", "score"): 3,
        ("diabetes", "report"): 1, ("diabetes", "compare"): 1,
        ("digits_search", "retrieval-protocol"): 1, ("digits_search", "fit"): 1, ("digits_search", "embed"): 4,
        ("digits_search", "compress-retrieval"): 2, ("digits_search", "score-retrieval"): 4,
        ("digits_search", "retrieval-report"): 1, ("digits_search", "compare"): 1,
    }
    fits = {(_benchmark_of(default_plan, fp), default_plan.spec(fp)["extractor"]["name"], default_plan.spec(fp)["endpoint"])
            for fp in default_plan.fingerprints("fit")}
    # the precomputed extractors (pixels, features) learn nothing; retrieval extractors are fitted on the gallery
    assert fits == {("digits", "pca16", "samples"), ("digits", "random_projection16", "samples"),
                    ("diabetes", "poly2", "samples"), ("diabetes", "pca3", "samples"),
                    ("digits_search", "pca16", "gallery")}
    for fp in default_plan.fingerprints("fit"):
        spec = default_plan.spec(fp)
        assert spec["recipe"]["endpoint"] == spec["endpoint"]
        assert spec.get("protocol") == ("retrieval" if _benchmark_of(default_plan, fp) == "digits_search" else None)
    digits_embeds = {fp for fp in default_plan.fingerprints("embed") if _benchmark_of(default_plan, fp) == "digits"}
    for fp in default_plan.fingerprints("compress"):
        spec = default_plan.spec(fp)
        assert spec["embedding"]["fingerprint"] in digits_embeds
        assert spec["compression"]["method"] == "pca" and spec["compression"]["n_components"] == 8
    assert {default_plan.spec(fp)["embedding"]["fingerprint"] for fp in default_plan.fingerprints("compress")} == digits_embeds
    for fp in default_plan.fingerprints("score"):
        spec = default_plan.spec(fp)
        assert "plan" in spec and "scoring" not in spec and "seed" not in spec
        expected = "regression" if _benchmark_of(default_plan, fp) == "diabetes" else "classification"
        assert spec["target_type"] == expected
    # retrieval: one compressed pair per extractor, from that extractor's query and gallery embeddings
    (retrieval_protocol,) = default_plan.fingerprints("retrieval-protocol")
    assert default_plan.spec(retrieval_protocol)["protocol"] == "retrieval"
    search_embeds = {fp for fp in default_plan.fingerprints("embed") if _benchmark_of(default_plan, fp) == "digits_search"}
    pairs = set()
    for fp in default_plan.fingerprints("compress-retrieval"):
        spec = default_plan.spec(fp)
        query, gallery = default_plan.spec(spec["query"]["fingerprint"]), default_plan.spec(spec["gallery"]["fingerprint"])
        assert (query["side"], gallery["side"]) == ("query", "gallery")
        assert query["extractor"]["name"] == gallery["extractor"]["name"]
        assert spec["compression"]["method"] == "pca" and spec["compression"]["n_components"] == 8
        assert spec["recipe"]["fit_endpoint"] == "gallery"
        assert spec["recipe"]["query"] == query["fingerprint"] and spec["recipe"]["gallery"] == gallery["fingerprint"]
        pairs.add(query["extractor"]["name"])
        search_embeds -= {query["fingerprint"], gallery["fingerprint"]}
    assert pairs == {"pixels", "pca16"} and search_embeds == set()
    for fp in default_plan.fingerprints("score-retrieval"):
        spec = default_plan.spec(fp)
        assert spec["protocol"]["fingerprint"] == retrieval_protocol == spec["recipe"]["protocol"]
        assert spec["recipe"]["query"] == spec["query"]["fingerprint"] and spec["recipe"]["gallery"] == spec["gallery"]["fingerprint"]
        assert spec["retrieval"]["similarity"] == "cosine" and spec["retrieval"]["primary_metric"] == "ndcg@10"
        assert spec["retrieval"]["ks"] == [1, 5, 10] and spec["retrieval"]["bidirectional"] is False


def test_every_spec_fingerprint_hashes_its_recipe(default_plan):
    for fp, spec in default_plan.specs.items():
        assert spec["fingerprint"] == fp
        assert fp == fingerprint(KIND_OF_STAGE[spec["stage"]], spec["recipe"])
        assert len(fp) == 16


# hand-computed: edges are batch_size * (batches * i // count), the last one capped at n_rows
#   digits, 2 shards of 1797 rows in 8 batches of 256: 0, 256 * 4 = 1024, 1797
#   diabetes, its own single shard of 442 rows: 0, 442
#   digits_search, its own single shard per side: the queries are rows i % 6 == 0 of the 1797 digits, i.e.
#   0, 6, ..., 1794 (1797 = 6 * 299 + 3): 300 rows; the gallery the other 1797 - 300 = 1497 rows
EXPECTED_SHARDS = {
    "digits": (1797, [[0, 1024], [1024, 1797]]),  # 8 batches of 256 (the last one 5 rows), 4 per shard
    "diabetes": (442, [[0, 442]]),
    ("digits_search", "query"): (300, [[0, 300]]),
    ("digits_search", "gallery"): (1497, [[0, 1497]]),
}


def test_default_embed_specs_shard_all_rows_of_each_benchmark(default_plan):
    seen = Counter()
    for fp in default_plan.fingerprints("embed"):
        spec = default_plan.spec(fp)
        benchmark = _benchmark_of(default_plan, fp)
        retrieval = spec.get("protocol") == "retrieval"
        if retrieval:
            assert spec["side"] == spec["endpoint"] == spec["recipe"]["endpoint"] and spec["branch"] is None
            benchmark = (benchmark, spec["side"])
        else:
            assert spec["endpoint"] == spec["recipe"]["endpoint"] == "samples" and "side" not in spec
        seen[benchmark] += 1
        n_rows, expected = EXPECTED_SHARDS[benchmark]
        assert spec["n_rows"] == n_rows
        assert spec["batch_size"] == 256
        shards = spec["shards"]
        assert shards == expected
        assert shards[0][0] == 0 and shards[-1][1] == n_rows
        assert all(a[1] == b[0] for a, b in zip(shards, shards[1:]))
        assert all(a % 256 == 0 for a, _ in shards)  # shards start on batch edges
        count = len(expected)
        assert default_plan.shard_counts[fp] == count
        directory = "results/retrieval/embeddings" if retrieval else "results/embeddings"
        assert default_plan.shard_paths(fp) == [f"{directory}/{fp}/shard-{i}-of-{count}.h5" for i in range(count)]
    assert seen == {"digits": 3, "diabetes": 3, ("digits_search", "query"): 2, ("digits_search", "gallery"): 2}


def test_embed_specs_reference_their_fit(default_plan):
    names = Counter()
    fits_used = Counter()
    for fp in default_plan.fingerprints("embed"):
        spec = default_plan.spec(fp)
        benchmark = _benchmark_of(default_plan, fp)
        names[(benchmark, spec["extractor"]["name"])] += 1
        if spec["extractor"]["name"] in ("pixels", "features"):  # precomputed: nothing to fit
            assert spec["fit"] is None and "fit" not in spec["recipe"]
        else:
            fit_fp = spec["fit"]["fingerprint"]
            fit = default_plan.spec(fit_fp)
            assert fit["stage"] == "fit"
            assert fit["extractor"] == spec["extractor"]
            assert _benchmark_of(default_plan, fit_fp) == benchmark
            # labelled extractors are fitted on the samples they embed; retrieval ones on the gallery, for both sides
            assert fit["endpoint"] == ("gallery" if spec.get("protocol") == "retrieval" else spec["endpoint"])
            assert spec["recipe"]["fit"] == fit_fp
            assert spec["fit"]["path"] == f"results/fitted/{fit_fp}.json"
            fits_used[fit_fp] += 1
    assert names == {
        ("digits", "pixels"): 1, ("digits", "pca16"): 1, ("digits", "random_projection16"): 1,
        ("diabetes", "features"): 1, ("diabetes", "poly2"): 1, ("diabetes", "pca3"): 1,
        ("digits_search", "pixels"): 2, ("digits_search", "pca16"): 2,  # query and gallery
    }
    # every fit is used: once per labelled embedding, twice (query and gallery) for the retrieval one
    assert set(fits_used) == set(default_plan.fingerprints("fit"))
    assert sorted(fits_used.values()) == [1, 1, 1, 1, 2]


def test_final_outputs_and_paths_are_relative_results_paths(default_plan):
    assert default_plan.final_outputs() == [
        "results/reports/digits/report.json", "results/reports/digits/report.md",
        "results/reports/diabetes/report.json", "results/reports/diabetes/report.md",
        "results/reports/digits_search/report.json", "results/reports/digits_search/report.md",
    ]

    paths = []

    def collect(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "path" and isinstance(value, str):
                    paths.append(value)
                else:
                    collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    for spec in default_plan.specs.values():
        collect({k: v for k, v in spec.items() if k not in ("dataset", "where")})
    for path in paths:
        assert path.startswith("results/") and not Path(path).is_absolute() and ".." not in Path(path).parts
    # by directory, hand-counted (9 labelled candidates: 6 digits + 3 diabetes; 4 retrieval candidates):
    #   scores:     9 candidate score refs, listed both in each report spec and in its recipe = 18
    #   protocols:  9 score specs + 2 report specs = 11
    #   embeddings: 6 score specs of uncompressed variants + 3 compress specs = 9
    #   compressed: 3 score specs of the pca_8 variants
    #   fitted:     4 labelled embed specs of learning extractors (pca16, random_projection16, poly2, pca3)
    #               + 2 retrieval embed specs of pca16 (query and gallery share the gallery fit) = 6
    #   retrieval/scores:     4 candidate score refs, in the report spec and in its recipe = 8
    #   retrieval/relevance:  4 score-retrieval specs + 1 retrieval-report spec = 5
    #   retrieval/embeddings: (2 uncompressed score specs + 2 compress-retrieval specs) x (query, gallery) = 8
    #   retrieval/compressed: 2 score specs of the pca_8 variants x (query, gallery) = 4
    #   plans:      3 compare specs' report refs
    def directory(path):
        parts = path.split("/")
        return "/".join(parts[1:3]) if parts[1] == "retrieval" else parts[1]

    assert Counter(directory(path) for path in paths) == {
        "scores": 18, "protocols": 11, "embeddings": 9, "compressed": 3, "fitted": 6,
        "retrieval/scores": 8, "retrieval/relevance": 5, "retrieval/embeddings": 8, "retrieval/compressed": 4,
        "plans": 3,
    }
    for name in ("digits", "diabetes"):
        report = default_plan.spec(default_plan.reports[name])
        assert report["protocol"]["path"] == f"results/protocols/{report['protocol']['fingerprint']}.json"
        for candidate in report["candidates"]:
            assert candidate["score"]["path"] == f"results/scores/{candidate['score']['fingerprint']}.json"
            score = default_plan.spec(candidate["score"]["fingerprint"])
            scored = candidate["scored_embedding"]
            assert score["embedding"]["fingerprint"] == scored
            if candidate["compression"] is None:
                assert scored == candidate["embedding"]
                assert score["embedding"]["path"] == f"results/embeddings/{scored}.h5"
            else:
                assert default_plan.spec(scored)["stage"] == "compress"
                assert score["embedding"]["path"] == f"results/compressed/{scored}/samples.h5"
    report = default_plan.spec(default_plan.retrieval_reports["digits_search"])
    assert report["protocol"]["path"] == f"results/retrieval/relevance/{report['protocol']['fingerprint']}.json"
    for candidate in report["candidates"]:
        assert candidate["score"]["path"] == f"results/retrieval/scores/{candidate['score']['fingerprint']}.json"
        score = default_plan.spec(candidate["score"]["fingerprint"])
        assert score["protocol"] == report["protocol"]
        for side in ("query", "gallery"):
            assert score[side]["fingerprint"] == candidate[side]
            if candidate["compression"] is None:
                assert default_plan.spec(candidate[side])["side"] == side
                assert score[side]["path"] == f"results/retrieval/embeddings/{candidate[side]}.h5"
            else:
                pair, suffix = candidate[side].split("/")
                assert suffix == side and default_plan.spec(pair)["stage"] == "compress-retrieval"
                assert score[side]["path"] == f"results/retrieval/compressed/{pair}/{side}.h5"



def test_artifact_path_spells_out_the_results_layout():
    """The layout existing results/ trees were written with: every template, by protocol."""
    fp = "0123456789abcdef"
    expected = {
        "labelled": {"plan": f"results/plans/{fp}.json", "fitted": f"results/fitted/{fp}.json",
                     "embedding": f"results/embeddings/{fp}.h5", "compressed": f"results/compressed/{fp}/samples.h5",
                     "protocol": f"results/protocols/{fp}.json", "score": f"results/scores/{fp}.json"},
        "retrieval": {"plan": f"results/plans/{fp}.json", "fitted": f"results/fitted/{fp}.json",
                      "embedding": f"results/retrieval/embeddings/{fp}.h5",
                      "compressed": f"results/retrieval/compressed/{fp}/gallery.h5",
                      "protocol": f"results/retrieval/relevance/{fp}.json",
                      "score": f"results/retrieval/scores/{fp}.json"},
        "zero_shot": {"plan": f"results/zero_shot/plans/{fp}.json", "embedding": f"results/zero_shot/prompts/{fp}.h5",
                      "compressed": f"results/zero_shot/compressed/{fp}/samples.h5",
                      "protocol": f"results/zero_shot/protocols/{fp}.json", "score": f"results/zero_shot/scores/{fp}.json"},
    }
    side = {"labelled": "samples", "retrieval": "gallery", "zero_shot": "prompts"}
    for protocol, paths in expected.items():
        for artifact, path in paths.items():
            assert artifact_path(artifact, fp, protocol=protocol, side=side[protocol]) == path, (protocol, artifact)
    assert artifact_path("shard", fp, shard=(1, 2)) == f"results/embeddings/{fp}/shard-1-of-2.h5"
    assert artifact_path("shard", fp, protocol="retrieval", side="query", shard=(0, 3)) == \
        f"results/retrieval/embeddings/{fp}/shard-0-of-3.h5"
    assert artifact_path("shard", fp, protocol="zero_shot", side="samples", shard=(0, 1)) == \
        f"results/zero_shot/samples/{fp}/shard-0-of-1.h5"
    assert artifact_path("shard", "{fp}", shard=("{i}", "{n}")) == "results/embeddings/{fp}/shard-{i}-of-{n}.h5"
    assert report_paths("digits") == {"json": "results/reports/digits/report.json",
                                      "markdown": "results/reports/digits/report.md"}
    with pytest.raises(ValueError, match="shard"):
        artifact_path("shard", fp)
    with pytest.raises(ValueError, match="shard"):
        artifact_path("plan", fp, shard=(0, 1))


def test_rule_inputs_come_whole_from_the_plan(default_config):
    """``WorkflowPlan.inputs``: the named inputs each rule's shell line uses, read from the spec's references."""
    p = plan(default_config)
    names = {
        "fit": {"plan"}, "protocol": {"plan"}, "retrieval-protocol": {"plan"}, "zero-shot-protocol": {"plan"},
        "compress": {"plan", "embeddings"}, "score": {"plan", "embeddings", "protocol"},
        "compress-retrieval": {"plan", "queries", "gallery"}, "score-retrieval": {"plan", "queries", "gallery", "protocol"},
        "compress-zero-shot": {"plan", "samples"}, "score-zero-shot": {"plan", "samples", "prompts", "protocol"},
        "report": {"plan", "protocol", "scores", "comparison"},
        "retrieval-report": {"plan", "protocol", "scores", "comparison"},
        "zero-shot-report": {"plan", "protocol", "scores", "comparison"},
        "compare": {"plan", "report_plan", "protocol", "scores"},
    }
    seen = set()
    for fp, spec in p.specs.items():
        stage, inputs = spec["stage"], p.inputs(fp)
        data = inputs.pop("data", None)  # the user's files the job reads (planning.job_files), where it names any
        assert data == (p.data_files(fp) or None if stage in DATA_STAGES else None), stage
        seen.add(stage)
        plan_dir = "results/zero_shot/plans" if stage.startswith("zero-shot") or stage.endswith("zero-shot") else "results/plans"
        assert inputs["plan"] == p.plan_path(fp) == f"{plan_dir}/{fp}.json", stage
        if stage == "embed":
            assert inputs == {"plan": p.plan_path(fp), **({} if spec["fit"] is None else {"fitted": spec["fit"]["path"]})}
        elif stage == "zero-shot-embed":
            assert set(inputs) == ({"plan", "protocol"} if spec["side"] == "prompts" else {"plan"})
        elif stage == "score-zero-shot" and spec["raw_samples"] is not None:
            assert inputs == {"plan": p.plan_path(fp), "samples": spec["samples"]["path"], "prompts": spec["prompts"]["path"],
                              "protocol": spec["protocol"]["path"], "raw_samples": spec["raw_samples"]["path"]}
        else:
            assert set(inputs) == names[stage], stage
        if "shards" in spec:
            assert p.inputs(fp, merge=True) == {"plan": p.plan_path(fp), "shards": p.shard_paths(fp)}
    assert seen == set(names) | {"embed", "zero-shot-embed"}
    for name in (*p.reports, *p.retrieval_reports, *p.zero_shot_reports):
        spec = p.spec(p.report_fingerprint(name))
        assert spec["benchmark"] == name
        assert p.inputs(spec["fingerprint"])["scores"] == [c["score"]["path"] for c in spec["candidates"]]
        compare_fp = p.comparisons[spec["fingerprint"]]
        assert p.inputs(spec["fingerprint"])["comparison"] == f"results/comparisons/{compare_fp}.json"
        report_inputs = {k: v for k, v in p.inputs(spec["fingerprint"]).items() if k != "comparison"}
        assert p.inputs(compare_fp) == {**report_inputs, "plan": p.plan_path(compare_fp), "report_plan": report_inputs["plan"]}
    score = p.spec(p.fingerprints("score-retrieval")[0])
    assert p.inputs(score["fingerprint"]) == {"plan": p.plan_path(score["fingerprint"]), "queries": score["query"]["path"],
                                              "gallery": score["gallery"]["path"], "protocol": score["protocol"]["path"]}


@pytest.mark.parametrize("decl, expected", [
    ({"type": "huggingface", "device": "cuda"}, 1),
    ({"type": "open_clip", "device": "cuda:1"}, 1),
    ({"type": "open_clip", "device": "auto"}, 0),
    ({"type": "huggingface", "device": "cpu"}, 0),
    ({"type": "huggingface", "device": "cudax"}, 0),
    ({"type": "sklearn"}, 0),
])
def test_gpus_follow_the_declared_device(decl, expected):
    assert gpus({"stage": "embed", "extractor": {"name": "m", "decl": decl, "where": "x"}}) == expected


def test_jobs_without_extractor_ask_for_no_gpu():
    assert gpus({"stage": "score"}) == 0


@pytest.mark.parametrize("fanout", [False, True])
def test_a_probe_on_a_cuda_device_asks_for_a_gpu_in_the_job_that_fits_it(tmp_path, fanout):
    """The planned specs of a linear probe on ``torch:cpu`` (planned here, where no GPU is) with the device made
    ``cuda``: the score job (or, fanned out, the probe's partial job) asks for one GPU; the merge and the report,
    whose specs repeat the metric, and every other job ask for none."""
    import copy
    import json

    config = {"seed": 0, "benchmarks": {"wine": {
        "dataset": {"source": {"type": "sklearn", "name": "wine"},
                    "identity": {"kind": "declared", "name": "wine", "revision": "1"}},
        "extractors": {"raw": {"type": "precomputed"}}, "fanout": fanout,
        "metrics": [{"type": "linear_probe", "device": "torch:cpu"}, {"type": "knn"}]}}}
    planned = plan(config, base_dir=tmp_path)
    asking = set()
    for fp, spec in planned.specs.items():
        assert gpus(spec) == 0
        on_cuda = json.loads(json.dumps(spec).replace('"torch:cpu"', '"cuda:1"'))
        if gpus(copy.deepcopy(on_cuda)):
            asking.add(spec["stage"])
            assert spec["stage"] != "score-labelled-partial" or spec["recipe"]["metric"]["type"] == "linear_probe"
    assert asking == {"score-labelled-partial" if fanout else "score"}

def test_report_spec_lists_candidates_in_declaration_order(default_plan):
    digits = default_plan.spec(default_plan.reports["digits"])
    assert [c["name"] for c in digits["candidates"]] == [
        "pixels", "pixels[pca_8]", "pca16", "pca16[pca_8]", "random_projection16", "random_projection16[pca_8]",
    ]
    diabetes = default_plan.spec(default_plan.reports["diabetes"])
    assert [c["name"] for c in diabetes["candidates"]] == ["features", "poly2", "pca3"]
    candidates = digits["candidates"] + diabetes["candidates"]
    score_fps = [c["score"]["fingerprint"] for c in candidates]
    assert len(set(score_fps)) == 9 and set(score_fps) == set(default_plan.fingerprints("score"))
    labelled_embeds = {fp for fp in default_plan.fingerprints("embed") if default_plan.spec(fp).get("protocol") != "retrieval"}
    assert len(labelled_embeds) == 6 and {c["embedding"] for c in candidates} == labelled_embeds
    for report in (digits, diabetes):
        embeds = {c["embedding"] for c in report["candidates"]}
        assert len(embeds) == 3 and {_benchmark_of(default_plan, fp) for fp in embeds} == {report["benchmark"]}
    for plain, compressed in zip(digits["candidates"][::2], digits["candidates"][1::2]):
        assert compressed["name"] == f"{plain['name']}[pca_8]"
        assert compressed["embedding"] == plain["embedding"] == plain["scored_embedding"]
        assert compressed["scored_embedding"] != plain["embedding"]
        assert compressed["extractor"] == plain["extractor"]
        assert plain["compression"] is None
        assert compressed["compression"]["method"] == "pca" and compressed["compression"]["n_components"] == 8
    assert all(c["compression"] is None and c["scored_embedding"] == c["embedding"] for c in diabetes["candidates"])

    search = default_plan.spec(default_plan.retrieval_reports["digits_search"])
    assert search["benchmark"] == "digits_search"
    assert [c["name"] for c in search["candidates"]] == ["pixels", "pixels[pca_8]", "pca16", "pca16[pca_8]"]
    (retrieval_protocol,) = default_plan.fingerprints("retrieval-protocol")
    assert search["protocol"]["fingerprint"] == search["recipe"]["protocol"] == retrieval_protocol
    score_fps = [c["score"]["fingerprint"] for c in search["candidates"]]
    assert len(set(score_fps)) == 4 and set(score_fps) == set(default_plan.fingerprints("score-retrieval"))
    plain_embeds = {c[side] for c in search["candidates"][::2] for side in ("query", "gallery")}
    assert plain_embeds == set(default_plan.fingerprints("embed")) - labelled_embeds
    pairs = set()
    for plain, compressed in zip(search["candidates"][::2], search["candidates"][1::2]):
        assert compressed["name"] == f"{plain['name']}[pca_8]"
        assert compressed["extractor"] == plain["extractor"]
        assert plain["compression"] is None
        assert compressed["compression"]["method"] == "pca" and compressed["compression"]["n_components"] == 8
        assert default_plan.spec(plain["query"])["side"] == "query" and default_plan.spec(plain["gallery"])["side"] == "gallery"
        pair = compressed["query"].split("/")[0]
        assert (compressed["query"], compressed["gallery"]) == (f"{pair}/query", f"{pair}/gallery")
        pair_spec = default_plan.spec(pair)
        assert pair_spec["query"]["fingerprint"] == plain["query"] and pair_spec["gallery"]["fingerprint"] == plain["gallery"]
        pairs.add(pair)
    assert pairs == set(default_plan.fingerprints("compress-retrieval"))


# -- plans of a small npz dataset -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def npz_dir(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("npz")
    rng = np.random.default_rng(1)
    np.savez(base / "data.npz", embeddings=rng.normal(size=(30, 5)), labels=np.repeat(["x", "y", "z"], 10))
    return base


def small_config() -> dict:
    return {
        "seed": 0,
        "embedding": {"shards": 3, "batch_size": 10},
        "benchmarks": {"small": {
            "dataset": {"source": {"type": "npz", "path": "data.npz"},
                        "identity": {"kind": "declared", "name": "small", "revision": "1"}},
            "extractors": {
                "raw": {"type": "precomputed"},
                "pca": {"type": "sklearn", "steps": [{"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 3}}]},
            },
        }},
    }


def fps(p, bench="small") -> dict:
    """Every fingerprint of one benchmark, by (stage, extractor name)."""
    report = p.spec(p.reports[bench])
    out = {"protocol": report["protocol"]["fingerprint"], "report": p.reports[bench]}
    for c in report["candidates"]:
        embed = p.spec(c["embedding"])
        out[("embed", c["name"])] = c["embedding"]
        out[("score", c["name"])] = c["score"]["fingerprint"]
        out[("fit", c["name"])] = embed["fit"]["fingerprint"] if embed["fit"] else None
    return out


def changed(a: dict, b: dict) -> set:
    assert set(a) == set(b)
    return {key for key in a if a[key] != b[key]}


def test_small_plan_is_stable_and_complete(npz_dir):
    a, b = plan(small_config(), base_dir=npz_dir), plan(small_config(), base_dir=npz_dir)
    assert fps(a) == fps(b)
    assert fps(a)[("fit", "raw")] is None and fps(a)[("fit", "pca")] is not None
    for fp in a.fingerprints("embed"):
        assert a.spec(fp)["shards"] == [[0, 10], [10, 20], [20, 30]]
        assert a.shard_counts[fp] == 3


def test_renaming_an_extractor_changes_only_the_report(npz_dir):
    base = plan(small_config(), base_dir=npz_dir)
    config = small_config()
    extractors = config["benchmarks"]["small"]["extractors"]
    config["benchmarks"]["small"]["extractors"] = {"identity": extractors["raw"], "pca_renamed": extractors["pca"]}
    renamed = plan(config, base_dir=npz_dir)
    old, new = fps(base), fps(renamed)
    mapping = {"raw": "identity", "pca": "pca_renamed"}
    for key, value in old.items():
        if isinstance(key, tuple):
            assert new[(key[0], mapping[key[1]])] == value, key
    assert new["protocol"] == old["protocol"]
    assert new["report"] != old["report"]
    changed = {old["report"], new["report"], base.comparisons[old["report"]], renamed.comparisons[new["report"]]}
    assert set(base.specs) ^ set(renamed.specs) == changed  # the report and its comparison


def test_fingerprints_depend_on_the_dataset_revision(npz_dir):
    base = fps(plan(small_config(), base_dir=npz_dir))
    config = small_config()
    config["benchmarks"]["small"]["dataset"]["identity"]["revision"] = "2"
    assert changed(base, fps(plan(config, base_dir=npz_dir))) == {
        "protocol", "report", ("embed", "raw"), ("embed", "pca"), ("score", "raw"), ("score", "pca"), ("fit", "pca"),
    }


def test_fingerprints_depend_on_extractor_params(npz_dir):
    base = fps(plan(small_config(), base_dir=npz_dir))
    config = small_config()
    config["benchmarks"]["small"]["extractors"]["pca"]["steps"][0]["params"]["n_components"] = 2
    assert changed(base, fps(plan(config, base_dir=npz_dir))) == {"report", ("fit", "pca"), ("embed", "pca"), ("score", "pca")}
    config = small_config()
    config["benchmarks"]["small"]["extractors"]["pca"]["random_state"] = 5
    assert changed(base, fps(plan(config, base_dir=npz_dir))) == {"report", ("fit", "pca"), ("embed", "pca"), ("score", "pca")}


def test_fingerprints_depend_on_scoring_k_and_seed(npz_dir):
    base = fps(plan(small_config(), base_dir=npz_dir))
    only_scores = {"report", ("score", "raw"), ("score", "pca")}
    config = small_config()
    config["benchmarks"]["small"]["scoring"] = {"k": 2}
    assert changed(base, fps(plan(config, base_dir=npz_dir))) == only_scores
    config = small_config()
    config["seed"] = 1
    assert changed(base, fps(plan(config, base_dir=npz_dir))) == only_scores


def test_fingerprints_do_not_depend_on_shards_or_batch_size(npz_dir):
    base = plan(small_config(), base_dir=npz_dir)
    config = small_config()
    config["embedding"] = {"shards": 2, "batch_size": 7}
    other = plan(config, base_dir=npz_dir)
    assert fps(base) == fps(other)
    for fp in other.fingerprints("embed"):
        assert other.spec(fp)["shards"] == [[0, 14], [14, 30]]  # 5 batches of 7 (the last 2 rows), cut 2 / 3
        assert other.spec(fp)["batch_size"] == 7


def test_two_benchmarks_sharing_dataset_and_extractor_share_embed_fingerprints(npz_dir):
    config = small_config()
    first = config["benchmarks"]["small"]
    config["benchmarks"]["again"] = {
        "dataset": copy.deepcopy(first["dataset"]),
        "extractors": {"projection": copy.deepcopy(first["extractors"]["pca"])},
        "scoring": {"k": 2},
    }
    p = plan(config, base_dir=npz_dir)
    small, again = fps(p, "small"), fps(p, "again")
    assert again[("embed", "projection")] == small[("embed", "pca")]
    assert again[("fit", "projection")] == small[("fit", "pca")]
    assert again["protocol"] == small["protocol"]
    assert again[("score", "projection")] != small[("score", "pca")]  # scoring k differs
    assert len(p.fingerprints("embed")) == 2 and len(p.fingerprints("fit")) == 1
    assert len(p.fingerprints("protocol")) == 1 and len(p.fingerprints("report")) == 2
    assert p.final_outputs() == [
        "results/reports/small/report.json", "results/reports/small/report.md",
        "results/reports/again/report.json", "results/reports/again/report.md",
    ]


def test_shard_count_is_capped_at_the_batch_count(tmp_path):
    (tmp_path / "five.csv").write_text("f1,f2,label\n1,2,a\n3,4,b\n5,6,a\n7,8,b\n9,0,a\n", encoding="utf-8")
    config = {
        "embedding": {"shards": 8, "batch_size": 1},
        "benchmarks": {"five": {
            "dataset": {"source": {"type": "csv", "path": "five.csv"}, "identity": {"kind": "declared", "name": "five", "revision": 1}},
            "extractors": {"raw": {"type": "precomputed"}},
        }},
    }
    p = plan(config, base_dir=tmp_path)
    (fp,) = p.fingerprints("embed")
    assert p.spec(fp)["n_rows"] == 5
    assert p.spec(fp)["shards"] == [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5]]
    assert p.shard_counts[fp] == 5
    assert p.shard_paths(fp)[-1] == f"results/embeddings/{fp}/shard-4-of-5.h5"

    config["benchmarks"]["five"]["shards"] = 2  # a per-benchmark override
    p = plan(config, base_dir=tmp_path)
    (fp,) = p.fingerprints("embed")
    assert p.spec(fp)["shards"] == [[0, 2], [2, 5]]

    config["embedding"]["batch_size"] = 2  # 3 batches: at most 3 shards, cut on batch edges
    del config["benchmarks"]["five"]["shards"]
    p = plan(config, base_dir=tmp_path)
    (fp,) = p.fingerprints("embed")
    assert p.spec(fp)["shards"] == [[0, 2], [2, 4], [4, 5]]
    assert p.shard_counts[fp] == 3


def test_auto_shards_plan_a_tiny_dataset_as_one_shard_with_the_same_merged_fingerprint(tmp_path):
    # the default, shards: auto, plans a 5-row endpoint as one shard although 5 batches allow 5; a declared count
    # (the config's or the benchmark's) still applies, and the merged embedding's fingerprint is the same either way
    (tmp_path / "five.csv").write_text("f1,f2,label\n1,2,a\n3,4,b\n5,6,a\n7,8,b\n9,0,a\n", encoding="utf-8")
    config = {
        "embedding": {"batch_size": 1},
        "benchmarks": {"five": {
            "dataset": {"source": {"type": "csv", "path": "five.csv"}, "identity": {"kind": "declared", "name": "five", "revision": 1}},
            "extractors": {"raw": {"type": "precomputed"}},
        }},
    }
    auto = plan(config, base_dir=tmp_path)
    (fp,) = auto.fingerprints("embed")
    assert auto.spec(fp)["shards"] == [[0, 5]] and auto.shard_counts[fp] == 1
    assert auto.shard_paths(fp) == [f"results/embeddings/{fp}/shard-0-of-1.h5"]
    config["embedding"]["shards"] = 8
    declared = plan(config, base_dir=tmp_path)
    assert declared.fingerprints("embed") == [fp] and declared.shard_counts[fp] == 5
    config["benchmarks"]["five"]["shards"] = "auto"  # a benchmark's own auto overrides the config's count
    assert plan(config, base_dir=tmp_path).shard_counts[fp] == 1


def test_auto_shards_follow_rows_and_model_cost(tmp_path, monkeypatch):
    from hub_fixtures import tiny_entry, use_cache
    from vertebrae.extractors.registry import build_extractor
    from vertebrae.planning.resources import AUTO_MAX_ROWS, auto_shards

    tiny_entry(use_cache(monkeypatch, tmp_path / "hub"), "org/some-model")  # a hub id resolves in the local cache
    precomputed = build_extractor("p", {"type": "precomputed"}, where="x")
    model = build_extractor("m", {"type": "hf_text", "model": "org/some-model"}, where="x")
    assert auto_shards(precomputed, 2_000) == auto_shards(model, 2_000) == 1  # a small endpoint: one job
    assert auto_shards(precomputed, 150_000) == 1 and auto_shards(model, 150_000) == 50  # 20 ms a row, 60 s a shard
    assert auto_shards(precomputed, 3 * AUTO_MAX_ROWS) == 3  # rows a shard bounded (memory)
    assert auto_shards(model, 10 ** 9) == 64


def test_a_content_identity_is_hashed_at_plan_time(npz_dir, tmp_path):
    config = small_config()
    config["benchmarks"]["small"]["dataset"]["identity"] = {"kind": "content"}
    a = fps(plan(config, base_dir=npz_dir))
    data = dict(np.load(npz_dir / "data.npz"))
    data["embeddings"][0, 0] += 1.0
    np.savez(tmp_path / "data.npz", **data)
    b = fps(plan(config, base_dir=tmp_path))
    assert changed(a, b) == set(a) - {("fit", "raw")}


# -- refusals of unsafe names and duplicate keys (issue 15, items 9 and 10) -----------------------------------


@pytest.mark.parametrize("section", ["benchmarks", "retrieval", "zero_shot"])
@pytest.mark.parametrize("name", ["..", ".", ".hidden", "-x", "a/b", "a b"])
def test_unsafe_benchmark_names_are_refused_naming_the_section(default_config, section, name):
    # Before: ".." matched "^[A-Za-z0-9_.-]+$" and its report went to results/reports/../report.json.
    config = copy.deepcopy(default_config)
    old = next(iter(config[section]))
    config[section][name] = config[section].pop(old)
    message = f"config key {section}: {name!r} is not a safe benchmark name"
    with pytest.raises(ConfigError, match=re_escape(message)):
        validate_config(config)
    with pytest.raises(ConfigError, match=re_escape(message)):
        plan(config)


def test_the_planner_rechecks_benchmark_names_and_dotted_names_stay_valid():
    from vertebrae.planning.config import check_benchmark_name

    for section in ("benchmarks", "retrieval", "zero_shot"):
        with pytest.raises(ConfigError, match=re_escape(f"config key {section}: '..' is not a safe benchmark name")):
            check_benchmark_name(section, "..")
    config = minimal_config()
    config["benchmarks"]["iris.v1_2-b"] = config["benchmarks"].pop("b")
    assert list(plan(config).reports) == ["iris.v1_2-b"]


def re_escape(text: str) -> str:
    import re

    return re.escape(text)


DUPLICATE_EXTRACTORS = """\
benchmarks:
  b:
    dataset:
      source: {type: sklearn, name: iris}
      identity: {kind: declared, name: iris, revision: 1}
    extractors:
      p: {type: precomputed}
    extractors:
      s:
        type: sklearn
        steps: [{estimator: sklearn.decomposition.PCA}]
"""


def test_load_config_file_refuses_duplicate_keys_naming_key_and_lines(tmp_path):
    # Before: the second `extractors:` silently replaced the first, dropping extractor p.
    path = tmp_path / "dup.yaml"
    path.write_text(DUPLICATE_EXTRACTORS, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert str(info.value) == (f"config file {path}, line 8: key 'extractors' is given twice in one mapping (first at "
                               "line 6); YAML would keep only the last one, so duplicate keys are refused")
    top = tmp_path / "top.yaml"
    top.write_text("seed: 1\nbenchmarks: {}\nseed: 2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"top\.yaml, line 3: key 'seed' is given twice .*first at line 1"):
        load_config_file(top)
    # the same key in two different mappings, and a merge key overridden on purpose, are fine
    ok = tmp_path / "ok.yaml"
    ok.write_text("base: &b {k: 3, seed: 0}\na: {<<: *b, k: 5}\nb: {k: 4}\n", encoding="utf-8")
    assert load_config_file(ok) == {"base": {"k": 3, "seed": 0}, "a": {"k": 5, "seed": 0}, "b": {"k": 4}}
    as_json = tmp_path / "c.json"
    as_json.write_text('{"seed": 1, "seed": 2}', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"c\.json, line 1: key 'seed' is given twice"):
        load_config_file(as_json)


def test_plan_rereads_the_config_files_it_was_given(tmp_path):
    import yaml as pyyaml

    path = tmp_path / "dup.yaml"
    path.write_text(DUPLICATE_EXTRACTORS, encoding="utf-8")
    parsed = pyyaml.safe_load(DUPLICATE_EXTRACTORS)  # what Snakemake hands over: one extractor left, no error
    assert list(parsed["benchmarks"]["b"]["extractors"]) == ["s"]
    assert plan(parsed).reports  # the config alone cannot tell
    with pytest.raises(ConfigError, match=r"dup\.yaml, line 8: key 'extractors' is given twice"):
        plan(parsed, config_files=[str(path)])


def test_snakemake_dry_run_refuses_a_config_file_with_a_duplicate_key(tmp_path):
    from workflow_support import snakemake

    (tmp_path / "dup.yaml").write_text(DUPLICATE_EXTRACTORS, encoding="utf-8")
    proc = snakemake(tmp_path, "-n", "--configfile", str(tmp_path / "dup.yaml"), check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "line 8: key 'extractors' is given twice in one mapping (first at line 6)" in output
    # the same config without the duplicate plans both extractors
    (tmp_path / "ok.yaml").write_text(DUPLICATE_EXTRACTORS.replace("    extractors:\n      s:", "      s:"),
                                      encoding="utf-8")
    proc = snakemake(tmp_path, "-n", "--configfile", str(tmp_path / "ok.yaml"), check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_a_header_only_csv_is_refused_at_plan_time_naming_the_file(tmp_path):
    # Before: "an endpoint needs at least one row to be embedded", naming no file (issue 15, item 15).
    (tmp_path / "h.csv").write_text("f0,f1,label\n", encoding="utf-8")
    config = {"benchmarks": {"b": {
        "dataset": {"source": {"type": "csv", "path": "h.csv"}, "identity": {"kind": "declared", "name": "h", "revision": 1}},
        "extractors": {"p": {"type": "precomputed"}},
    }}}
    with pytest.raises(ValueError, match=re_escape(f"CSV file {tmp_path / 'h.csv'} has a header but no data rows")):
        plan(config, base_dir=tmp_path)


def test_a_fanned_out_score_replaces_the_score_job_by_partials_and_a_merge(default_config):
    one_job = plan(default_config)
    config = copy.deepcopy(default_config)
    config["retrieval"]["digits_search"]["scoring"] = {"query_shards": 2, "gallery_shards": 3, "device": "cuda"}
    p = plan(config)
    merges = p.fingerprints("merge-retrieval-partials")
    singles = [fp for fp in one_job.fingerprints("score-retrieval") if one_job.spec(fp)["query"]["path"].startswith(
        "results/retrieval/") and fp not in p.fingerprints("score-retrieval")]
    assert sorted(merges) == sorted(singles) and len(merges) == 4  # same fingerprints: the split changes no result
    assert p.reports == one_job.reports and p.retrieval_reports == one_job.retrieval_reports  # the reports too
    assert len(p.fingerprints("score-retrieval-partial")) == 4 * 2 * 3
    for fp in merges:
        merge = p.spec(fp)
        assert merge["recipe"] == one_job.spec(fp)["recipe"] and merge["device"] == "cuda" and p.gpus(fp) == 1
        assert merge["fanout"] == {"query_shards": 2, "gallery_shards": 3, "n_queries": 300, "n_gallery": 1497,
                                   "where": "retrieval.digits_search.scoring"}
        assert p.inputs(fp)["partials"] == [ref["path"] for ref in merge["partials"]]
        assert p.inputs(fp, fanout=True) == {"plan": p.plan_path(fp), "queries": merge["query"]["path"],
                                             "gallery": merge["gallery"]["path"], "protocol": merge["protocol"]["path"]}
        for ref in merge["partials"]:
            partial = p.spec(ref["fingerprint"])
            # one input: the candidate's fan-out bundle (merge spec, endpoints, relevance rows); no plan per partial
            assert p.inputs(ref["fingerprint"]) == {"fanout": f"results/retrieval/fanouts/{fp}"}
            assert ref["path"] == f"results/retrieval/partials/{fp}/{ref['fingerprint']}.h5"  # under its merge
            assert ref["path"] == artifact_path("partial", ref["fingerprint"], protocol="retrieval", merge=fp)
            assert partial["device"] == "cuda" and p.gpus(ref["fingerprint"]) == 1
            # sized from the split's largest partial (300 queries / 2, 1,497 gallery items / 3): one size for all
            assert p.partial_mem_mb(ref["fingerprint"]) == 650 + -(-int(min(
                1.25 * (12 * (150 + 499) * 1024 + 8 * min(512, 150) * min(10000, 499)), 2_000_000_000)) // 2 ** 20)
    assert p.fanout_scores_pattern() == "|".join(merges)
    with pytest.raises(ValueError, match="merge=<fingerprint> is given for partials and only for partials"):
        artifact_path("partial", merges[0], protocol="retrieval")
    with pytest.raises(ValueError, match="only for partials"):
        artifact_path("score", merges[0], protocol="retrieval", merge=merges[0])
    assert one_job.fanout_scores_pattern() == "no-fanout"
    # one value for every partial job: the rule gets a constant, not a function evaluated per job
    per_job = lambda wildcards: 0  # noqa: E731
    assert p.partial_resources(mem_mb=per_job, gpu=per_job) == {
        "mem_mb": p.partial_mem_mb(p.spec(merges[0])["partials"][0]["fingerprint"]), "gpu": 1}
    cpu_config = copy.deepcopy(config)
    cpu_config["retrieval"]["digits_search"]["scoring"]["device"] = "cpu"  # no partial asks for a GPU: no gpu
    assert list(plan(cpu_config).partial_resources(mem_mb=per_job, gpu=per_job)) == ["mem_mb"]
    config["retrieval"]["digits_search"]["scoring"]["query_shards"] = 3  # a second benchmark, split otherwise
    config["retrieval"]["other"] = copy.deepcopy(config["retrieval"]["digits_search"])
    config["retrieval"]["other"]["scoring"] = {"query_shards": 1, "gallery_shards": 2}
    mixed = plan(config)
    assert len(mixed.fanouts) == 4 * 3 * 3  # "other" plans the same scores: the first benchmark's split stands
    config["retrieval"]["other"]["retrieval"]["similarity"] = "dot"  # other scores, split otherwise, on CPU
    mixed = plan(config)
    assert len(mixed.fanouts) == 4 * 3 * 3 + 4 * 1 * 2
    assert len({mixed.partial_mem_mb(fp) for fp in mixed.fanouts}) > 1 and {mixed.gpus(fp) for fp in mixed.fanouts} == {0, 1}
    assert mixed.partial_resources(mem_mb=per_job, gpu=per_job) == {"mem_mb": per_job, "gpu": per_job}


@pytest.mark.parametrize("key, value, message", [
    ("query_shards", 0, "retrieval.digits_search.scoring.query_shards"),
    ("gallery_shards", 1498, "retrieval.digits_search.scoring.gallery_shards: 1498 shards for 1497 gallery"),
    ("device", "tpu", "retrieval.digits_search.scoring.device"),
])
def test_bad_splits_are_refused_naming_the_key(default_config, key, value, message):
    config = copy.deepcopy(default_config)
    config["retrieval"]["digits_search"]["scoring"] = {key: value}
    with pytest.raises(ConfigError, match=re.escape(message)):
        plan(config)


def test_the_plan_lists_the_reports_other_configs_wrote_into_the_out_folder(tmp_path, monkeypatch):
    # issue 47: the leaderboard and index jobs declare them; a listing of reports/*/ (this config's own left out)
    monkeypatch.chdir(tmp_path)
    for name, files in (("b", ("report.json",)), ("other", ("report.json", "report.md", "ranking.html")),
                        ("no_json", ("report.md",))):
        (tmp_path / "results" / "reports" / name).mkdir(parents=True)
        for file in files:
            (tmp_path / "results" / "reports" / name / file).write_text("{}", encoding="utf-8")
    planned = plan(minimal_config())
    assert planned.other_reports == {"other": ["report.json", "report.md", "ranking.html"]}
    assert planned.page_reports() == ["results/reports/b/report.json", "results/reports/other/report.json"]
    assert planned.other_report_files("report.md", "report.html") == ["results/reports/other/report.md"]
    assert plan(minimal_config(), base_dir=tmp_path / "elsewhere").other_reports == {}
