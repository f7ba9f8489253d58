"""Issue 46 parts 1-2: target views (nuisance targets) and label hierarchies, in process and at validate time.

Oracles: each view's OverlapIndex equals overlapindex called directly on that view's labels; an embedding built to
encode the acquisition site and not the species is reported as encoding the nuisance (and ranked last on it); the
three levels of a hierarchy score as direct calls on each level's labels. Refusals are checked through ``plan``
(what ``vertebrae validate`` runs), each naming the key and the value.
"""

from __future__ import annotations

import contextlib
import csv
import io

import numpy as np
import overlapindex
import pytest
from sklearn.preprocessing import normalize

from docs_support import block
from vertebrae import BenchmarkDataset, CallableExtractor, ConfigError, DatasetIdentity, Hierarchy
from vertebrae.core.labels import semantic_key
from vertebrae.data.target_views import hierarchy_levels, same_partition
from vertebrae.data.targets import build_targets
from vertebrae.scoring.paired.rows import RowResamplingConfig

DOCS = "docs/protocols/target-views.md"
N_PER, N_SPECIES = 12, 8
PARENTS = {**{s: f"g{s // 2}" for s in range(N_SPECIES)}, "g0": "f0", "g1": "f0", "g2": "f1", "g3": "f2"}


def task_part(x):
    return x[:, :6]


def site_part(x):
    return x[:, 6:]


def toy_rows(seed: int = 0):
    """Species (ints 0..7, 12 rows each), a site balanced within every species, and features whose first 6 columns
    encode the species only and last 6 the site only."""
    rng = np.random.default_rng(seed)
    species = np.repeat(np.arange(N_SPECIES), N_PER)
    site = np.tile(np.array(["a", "b"]), species.size // 2)
    task = rng.normal(size=(N_SPECIES, 6))[species] * 4 + rng.normal(size=(species.size, 6))
    site_emb = np.where(site == "a", 3.0, -3.0)[:, None] + rng.normal(size=(species.size, 6))
    return np.hstack([task, site_emb]), species, site


def direct_overlap(X, labels, k_per_class, seed=0):
    keys = np.array([semantic_key(v) for v in labels], dtype=object)
    oracle = overlapindex.OverlapIndex(model_type="MiniBatchKMeans", kmeans_k=dict(k_per_class),
                                       kmeans_kwargs={"random_state": seed}, offline_chunk_size=10000)
    oracle.fit(normalize(X), keys)
    return float(oracle.index)


@pytest.fixture(scope="module")
def toy():
    X, species, site = toy_rows()
    dataset = BenchmarkDataset.from_embeddings(X, species.tolist(), identity=DatasetIdentity.declared("toy", "1"))
    extractors = [CallableExtractor("task", task_part), CallableExtractor("site", site_part)]
    # the docs' snippet, as written (but for fewer row resamples), on this data
    text = block(DOCS, "In Python", "python").replace("scoring_config=OverlapScoringConfig(k=2),",
                                                      "scoring_config=OverlapScoringConfig(k=2), row_resampling=rows,")
    namespace = {"dataset": dataset, "extractors": extractors, "site": site, "parents": PARENTS,
                 "rows": RowResamplingConfig(resamples=20, min_classes=3)}  # rows: the 2-class site only
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        exec(compile(text, DOCS, "exec"), namespace)
    assert "target views" in printed.getvalue()
    return X, species, site, namespace["result"]


def test_each_view_scores_as_overlapindex_called_directly(toy):
    X, species, site, result = toy
    for view, labels in (("species", species), ("site", site)):
        for candidate in result.reports[view].extractor_results:
            part = task_part(X) if candidate.name == "task" else site_part(X)
            expected = direct_overlap(part, labels.tolist(), candidate.overlap.k_per_class)
            assert candidate.overlap.score == expected
            assert result.table()[candidate.name][view] == candidate.primary_score == expected


def test_an_embedding_of_the_site_is_reported_as_encoding_the_nuisance(toy):
    result = toy[3]
    assert result.summary["primary"] == "species" and result.primary.ranking_available
    assert [r.name for r in result.primary.ranked_results()] == ["task", "site"]  # the primary ranking: species
    assert result.summary["rankings"]["site"] == ["task", "site"]  # a nuisance: lowest separation first
    assert result.nuisance_encoders("site") == [{"candidate": "site", "more_than": ["task"]}]
    markdown = result.markdown()
    assert "**site** encodes site significantly more than task" in markdown
    assert "site (nuisance, lower is better)" in markdown


def test_a_nuisance_views_own_report_ranks_lowest_first_and_says_so(toy):
    from vertebrae.reports.leaderboard import leaderboard_rows
    from vertebrae.results import BenchmarkResult

    result = toy[3]
    report = result.reports["site"]
    scores = {c.name: c.primary_score for c in report.extractor_results}
    assert scores["site"] > scores["task"]  # the site embedding separates the site most ...
    document = report.to_dict()
    assert document["ranking"] == ["task", "site"]  # ... so it ranks last: lower is better
    assert document["metadata"]["view"] == {"name": "site", "role": "nuisance", "better": "lower"}
    assert "view" not in result.primary.metadata  # the primary view's report is the benchmark's own
    assert [r.name for r in BenchmarkResult.from_dict(document).ranked_results()] == ["task", "site"]
    markdown = report.markdown()
    assert "is a **nuisance**: lower separation is better" in markdown and "rank 1 encodes site least" in markdown
    assert "| task (leader) |" in markdown and "| encodes more |" in markdown.split("really ahead?")[1]
    assert "Every other candidate encodes site significantly more" in markdown
    assert "a candidate encodes it more or less when its adjusted p" in markdown
    from vertebrae.reports.figures import _pyplot, report_figures

    figures = report_figures(document, name="birds@site")
    assert figures["comparison"].axes[0].get_title() == "birds@site: who encodes site more? (lower is better)"
    for figure in figures.values():
        _pyplot().close(figure)
    rows = {r.candidate: (r.rank, r.verdict) for r in leaderboard_rows([("site/report.json", document)])}
    assert rows == {"task": (1, "leader"), "site": (2, "behind")}


def test_the_leaderboard_shows_views_as_views_of_their_benchmark(toy):
    from vertebrae.reports.across import across
    from vertebrae.reports.leaderboard import benchmarks_of, leaderboard_rows, paired_verdicts

    result = toy[3]
    site, primary = result.reports["site"].to_dict(), result.primary.to_dict()
    other = {**primary, "metadata": {**primary["metadata"], "benchmark": "other"}}
    reports = [("r/birds@site/report.json", site), ("r/birds/report.json", primary), ("r/other/report.json", other)]
    rows = leaderboard_rows(reports)
    assert benchmarks_of(rows) == ["birds", "birds / view site (nuisance: lower is better)", "other"]
    assert paired_verdicts(reports)["birds / view site (nuisance: lower is better)"][("site", "task")] == "behind"
    standings = across(rows, paired_verdicts(reports))
    assert standings.compared == ("birds", "other")  # a benchmark counts once, by its primary view


def test_three_level_hierarchy_scores_equal_direct_calls(toy):
    X, species, _, result = toy
    assert result.summary["levels"] == ["family", "genus", "leaf"]
    genus = [PARENTS[s] for s in species.tolist()]
    family = [PARENTS[g] for g in genus]
    for level, labels in (("family", family), ("genus", genus), ("leaf", species.tolist())):
        for candidate in result.reports[level].extractor_results:
            part = task_part(X) if candidate.name == "task" else site_part(X)
            assert result.table()[candidate.name][level] == direct_overlap(part, labels, candidate.overlap.k_per_class)
    # the leaf level is the dataset's own target: the species view's report, no second scoring
    assert result.reports["leaf"] is result.reports["species"]
    assert result.summary["views"][-1]["alias"] == "species"
    figure = result.figure()
    assert [line.get_label() for line in figure.axes[0].get_lines()] == ["task", "site"]


def test_labels_keep_their_typed_identity():
    levels = hierarchy_levels(Hierarchy(parents={1: "odd", 2: "even", "odd": "n", "even": "n"}), [1, 2, 2, 1],
                              None, base_dir=None, where="h")
    assert levels == [["n"] * 4, ["odd", "even", "even", "odd"], [1, 2, 2, 1]]
    assert build_targets(levels[2]).catalog.keys == ("@int:1", "@int:2")  # ints stay ints
    a, b = build_targets(["x", "x", "y"]), build_targets([5, 5, 6])
    assert same_partition(a, b) and not same_partition(a, build_targets(["x", "y", "y"]))


# ---- refusals at validate time ------------------------------------------------------------------------------------
def _write_table(path, rows, header):
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)


@pytest.fixture()
def table(tmp_path, monkeypatch):
    """A csv dataset (id, 2 features, label, site, taxon path) and a config over it; plan() as validate runs it."""
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(1)
    rows = []
    for i in range(40):
        species = f"s{i % 4}"
        rows.append([f"r{i}", *np.round(rng.normal(size=2), 3), species, "ab"[i % 2],
                     f"f{i % 4 // 2}/{species}"])
    _write_table(tmp_path / "data.csv", rows, ["id", "x1", "x2", "label", "site", "taxon"])

    def plan(**bench):
        from vertebrae.planning.planner import plan as make_plan

        config = {"benchmarks": {"t": {
            "dataset": {"source": {"type": "csv", "path": "data.csv", "id_column": "id",
                                   "feature_columns": ["x1", "x2"]}},
            "extractors": {"raw": {"type": "precomputed"}}, "scoring": {"k": 2}, **bench}}}
        return make_plan(config, base_dir=tmp_path)

    return tmp_path, plan


def test_views_plan_their_own_jobs_and_the_default_plan_is_unchanged(table):
    _, plan = table
    before = plan()
    after = plan(targets={"species": {"column": "label"}, "site": {"column": "site", "role": "nuisance"}},
                 hierarchy={"column": "taxon", "levels": ["family", "species_path"]})
    assert after.reports["t"] == before.reports["t"]  # the species view is the dataset's own target: same report
    assert set(after.reports) == {"t", "t@site", "t@family"}
    assert set(before.specs) <= set(after.specs)  # nothing of the benchmark's own plan changes
    embeds = {fp for fp, s in after.specs.items() if s["stage"] == "embed"}
    assert embeds == {fp for fp, s in before.specs.items() if s["stage"] == "embed"}  # embeddings shared
    views = after.specs[after.views["t"]]
    assert [(v["view"], v["alias"]) for v in views["views"]] == [
        ("species", None), ("site", None), ("family", None), ("species_path", "species")]


def test_targets_without_the_datasets_own_target_plan_no_job_for_it(table):
    _, plan = table
    planned = plan(targets={"path": {"column": "taxon"}, "site": {"column": "site", "role": "nuisance"}})
    stages = [s["stage"] for s in planned.specs.values()]
    assert stages.count("protocol") == stages.count("report") == stages.count("score") == 2  # path and site only
    assert {fp for fp, s in planned.specs.items() if s["stage"] == "report"} == set(planned.reports.values())
    # the dataset's own target as a second view: its report is plan_labelled's, not the primary view's
    planned = plan(targets={"site": {"column": "site"}, "species": {}})
    assert planned.reports["t@species"] == plan().reports["t"] != planned.reports["t"]


def test_validate_lists_views_under_their_benchmark(table):
    from vertebrae.cli.commands import describe

    _, plan = table
    planned = plan(targets={"species": {"column": "label"}, "site": {"column": "site", "role": "nuisance"}},
                   hierarchy={"column": "taxon", "levels": ["family", "species_path"]})
    assert describe(planned) == ["  labelled benchmark t (benchmarks.t): 1 candidate: raw; views species (primary), "
                                 "site (nuisance), family (level 1), species_path (level 2, = species)"]


@pytest.mark.parametrize("bench, key, value", [
    ({"targets": {"site": {"column": "nope"}}}, "benchmarks.t.targets.site.column", "'nope'"),
    ({"targets": {"site": {"key": "site"}}}, "benchmarks.t.targets.site.key", "'csv'"),
    ({"targets": {"main": {"column": "label"}, "site": {"column": "label", "role": "nuisance"}}},
     "benchmarks.t.targets.site", "'main'"),
    ({"targets": {"site": {"column": "site", "role": "nuisance"}}, "primary_view": "site"},
     "benchmarks.t.primary_view", "'site'"),
    ({"hierarchy": {"column": "missing"}}, "benchmarks.t.hierarchy.column", "'missing'"),
    ({"hierarchy": {"column": "site"}}, "benchmarks.t.hierarchy.column ('site')", "one level"),
    ({"hierarchy": {"column": "taxon", "separator": "|"}}, "benchmarks.t.hierarchy.column", "'f0/s0'"),
])
def test_bad_views_are_refused_naming_key_and_value(table, bench, key, value):
    _, plan = table
    with pytest.raises(ConfigError) as info:
        plan(**bench)
    assert key in str(info.value) and value in str(info.value)


def test_a_file_view_must_align_by_id(table):
    root, plan = table
    _write_table(root / "scanner.csv", [[f"r{i}", "s" + str(i % 3)] for i in range(40)] + [["zz", "s1"]],
                 ["id", "label"])
    with pytest.raises(ConfigError, match=r"benchmarks\.t\.targets\.scanner\.file.*'zz' is not a row"):
        plan(targets={"scanner": {"file": "scanner.csv", "role": "nuisance"}, "species": {"column": "label"}})
    _write_table(root / "scanner.csv", [[f"r{i}", "s" + str(i % 3)] for i in range(39)], ["id", "label"])
    with pytest.raises(ConfigError, match=r"no row for id\(s\) \['r39'\]"):
        plan(targets={"scanner": {"file": "scanner.csv", "role": "nuisance"}, "species": {"column": "label"}})


def test_a_class_with_two_parents_and_a_cycle_are_refused(table):
    root, plan = table
    rows = (root / "data.csv").read_text().replace("f0/s1", "f1/s1", 1)  # s1 now under f0 and f1
    (root / "data.csv").write_text(rows)
    with pytest.raises(ConfigError, match=r"benchmarks\.t\.hierarchy: class 's1' has two parents, '(f0|f1)'"):
        plan(hierarchy={"column": "taxon"})
    _write_table(root / "parents.csv", [["s0", "g0"], ["s1", "g0"], ["s2", "g1"], ["s3", "g1"], ["g0", "s0"],
                                        ["g1", "x"]], ["child", "parent"])
    with pytest.raises(ConfigError, match=r"benchmarks\.t\.hierarchy: the parent table has a cycle: 's0' -> 'g0' -> 's0'"):
        plan(hierarchy={"file": "parents.csv"})
    _write_table(root / "parents.csv", [["s0", "g0"], ["s0", "g1"]], ["child", "parent"])
    with pytest.raises(ConfigError, match=r"class 's0' has two parents, 'g0' and 'g1'"):
        plan(hierarchy={"file": "parents.csv"})

    _write_table(root / "parents.csv", [["s0", "g0"], ["s1", "g0"], ["s2", "g1"], ["s3", "g1"], ["g0", "f0"]],
                 ["child", "parent"])
    with pytest.raises(ConfigError, match=r"unequal depths: 'f0' -> 'g0' -> 's0' but 'g1' -> 's2'"):
        plan(hierarchy={"file": "parents.csv"})
