"""A declared split read from a file (issue 49): a CSV / TSV table of ids and train/val/test, or a JSON mapping or
list, equals the same split given inline (the same recipe, so the same fingerprint, and the same scores); a bad file
is refused naming the file, the line or the columns; in a config (``split: {path: FILE}``) it is read at planning,
its content in the metric's recipe, refused by ``vertebrae validate`` naming the config key; with object storage the
file is fetched for planning as every config path is."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from vertebrae import KNNMetric, LinearProbeMetric, read_split
from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.data.targets import classification_targets
from vertebrae.scoring.metric_registry import metric_from_config

SEED = 1


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(5)
    n = 60
    y = np.arange(n) % 3
    x = rng.normal(size=(3, 8))[y] + 0.9 * rng.normal(size=(n, 8))
    ids = [f"img-{i:03d}" for i in range(n)]
    parts = np.array(["train", "train", "val", "test", "train"] * n)[:n]
    inline = {p: [ids[i] for i in np.flatnonzero(parts == p) if i != 7] for p in ("train", "val", "test")}
    return x, y, ids, parts, inline


def _csv(path: Path, ids, parts, *, sep=",", header=("id", "split"), skip=(7,)) -> Path:
    lines = [sep.join((*header, "note"))]
    lines += [sep.join((i, p, "x")) for k, (i, p) in enumerate(zip(ids, parts)) if k not in skip]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_csv_tsv_and_json_equal_the_inline_mapping_recipe_and_scores(data, tmp_path):
    x, y, ids, parts, inline = data
    forms = [read_split(_csv(tmp_path / "s.csv", ids, parts), row_ids=ids),
             read_split(_csv(tmp_path / "s.tsv", ids, parts, sep="\t", header=("image", "subset")),
                        id_column="image", split_column="subset", row_ids=ids)]
    (tmp_path / "s.json").write_text(json.dumps(inline), encoding="utf-8")
    forms.append(read_split(tmp_path / "s.json"))
    targets = classification_targets(y)
    knn = KNNMetric(k=5, split=inline).compute(x, targets, row_ids=ids, seed=SEED)
    probe = LinearProbeMetric(Cs=(0.1, 1.0), split=inline).compute(x, targets, row_ids=ids, seed=SEED)
    for split in forms:
        assert split == inline  # row 7 is in no part, as the inline mapping leaves it out
        assert KNNMetric(k=5, split=split).recipe() == KNNMetric(k=5, split=inline).recipe()
        assert KNNMetric(k=5, split=split).compute(x, targets, row_ids=ids, seed=SEED).score == knn.score
        assert LinearProbeMetric(Cs=(0.1, 1.0), split=split).compute(x, targets, row_ids=ids,
                                                                    seed=SEED).score == probe.score
    # a JSON list in row order is the inline list; no val rows: no val key (the train/test recipe kept)
    (tmp_path / "l.json").write_text(json.dumps(parts.tolist()), encoding="utf-8")
    assert read_split(tmp_path / "l.json", row_ids=ids) == parts.tolist()
    no_val = [p if p != "val" else "test" for p in parts]
    assert read_split(_csv(tmp_path / "t.csv", ids, no_val, skip=()), row_ids=ids) == {
        "train": [i for i, p in zip(ids, no_val) if p == "train"], "test": [i for i, p in zip(ids, no_val) if p == "test"]}


def test_text_ids_naming_integer_rows_are_read_as_integers(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("id,split\n0,train\n1,train\n2,test\n", encoding="utf-8")
    split = read_split(path, row_ids=[0, 1, 2, 3])  # integer ids (a dataset without ids numbers its rows)
    assert split == {"train": [0, 1], "test": [2]}
    assert KNNMetric(split=split).recipe() == KNNMetric(split={"train": [0, 1], "test": [2]}).recipe()
    assert read_split(path) == {"train": ["0", "1"], "test": ["2"]}  # without the dataset's ids: text


def test_bad_files_are_refused_naming_the_file_line_and_columns(data, tmp_path):
    x, y, ids, parts, inline = data
    with pytest.raises(ValidationError, match=r"missing\.csv: file not found"):
        read_split(tmp_path / "missing.csv")
    bad = parts.copy()
    bad[4] = "dev"
    with pytest.raises(ValidationError, match=r"s\.csv: line 6: column 'split' holds 'dev' \(row 'img-004'\)"):
        read_split(_csv(tmp_path / "s.csv", ids, bad))
    with pytest.raises(ValidationError, match=r"no column 'split' \(key 'split_column'\); the header's columns are "
                                              r"\['id', 'part', 'note'\]"):
        read_split(_csv(tmp_path / "s.csv", ids, parts, header=("id", "part")))
    with pytest.raises(ValidationError, match=r"2 id\(s\) name no row of the dataset: 'img-000' \(line 2\), "
                                              r"'img-001' \(line 3\)"):
        read_split(_csv(tmp_path / "s.csv", ids, parts), row_ids=ids[2:])
    (tmp_path / "d.csv").write_text("id,split\na,train\nb,test\na,test\n", encoding="utf-8")
    with pytest.raises(ValidationError, match=r"lines 2 and 4 both name row 'a'"):
        read_split(tmp_path / "d.csv")
    (tmp_path / "l.json").write_text(json.dumps(["train", "test"]), encoding="utf-8")
    with pytest.raises(ValidationError, match=r"a list of 2 values for 60 dataset rows"):
        read_split(tmp_path / "l.json", row_ids=ids)
    (tmp_path / "m.json").write_text(json.dumps({"train": ["a"], "dev": ["b"]}), encoding="utf-8")
    with pytest.raises(ValidationError, match=r"keys \['dev'\]: a split mapping holds only train, val and test"):
        read_split(tmp_path / "m.json")
    with pytest.raises(ConfigError, match=r"names a file .*vertebrae\.read_split\(path\)"):
        KNNMetric(split={"path": "s.csv"})


IRIS = {"dataset": {"source": {"type": "sklearn", "name": "iris"}, "identity": {"kind": "content"}},
        "extractors": {"raw": {"type": "precomputed"}}}


def _iris_split(folder: Path, name: str = "splits.csv", bad_line: int | None = None) -> dict:
    rows = ["id,split"] + [f"{i},{'train' if i % 5 < 3 else 'val' if i % 5 == 3 else 'test'}" for i in range(150)]
    if bad_line is not None:
        rows[bad_line - 1] = rows[bad_line - 1].split(",")[0] + ",holdout"
    (folder / name).write_text("\n".join(rows) + "\n", encoding="utf-8")
    return {p: [i for i in range(150) if (i % 5 < 3, i % 5 == 3, i % 5 == 4)[k]]
            for k, p in enumerate(("train", "val", "test"))}


def _config(split) -> dict:
    return {"benchmarks": {"flowers": {**IRIS, "metrics": [{"type": "knn", "k": 5, "split": split}]}}}


def test_a_config_split_file_is_read_at_planning_into_the_recipe(tmp_path):
    from vertebrae.planning import plan

    inline = _iris_split(tmp_path)

    def scores(config):
        planned = plan(config, base_dir=tmp_path)
        return sorted(fp for fp, spec in planned.specs.items() if spec["stage"] not in ("embed", "protocol"))

    from_file = scores(_config({"path": "splits.csv"}))
    assert from_file == scores(_config(inline))  # the same recipe, so the same fingerprints
    (tmp_path / "splits.csv").write_text((tmp_path / "splits.csv").read_text().replace("0,train", "0,test", 1))
    assert scores(_config({"path": "splits.csv"})) != from_file  # the fingerprint follows the file's content
    from vertebrae.planning.labelled import benchmarks_from_config  # the in-process twin reads it too

    metric = benchmarks_from_config(_config({"path": "splits.csv"}), base_dir=tmp_path)["flowers"].plan.metrics[0]
    assert metric.recipe() == metric_from_config({"type": "knn", "k": 5, "split": read_split(
        tmp_path / "splits.csv", row_ids=range(150))}).recipe()


def test_vertebrae_validate_names_the_config_key_and_the_file(tmp_path, monkeypatch, capsys):
    from vertebrae.cli import main

    monkeypatch.chdir(tmp_path)
    _iris_split(tmp_path, bad_line=12)
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(_config({"path": "splits.csv"})))
    assert main(["validate", "bad.yaml"]) == 2
    err = capsys.readouterr().err
    assert "benchmarks.flowers.metrics[0].split.path:" in err and "splits.csv: line 12: column 'split' holds " \
        "'holdout'" in err, err
    (tmp_path / "gone.yaml").write_text(yaml.safe_dump(_config({"path": "nowhere.json"})))
    assert main(["validate", "gone.yaml"]) == 2
    assert "benchmarks.flowers.metrics[0].split.path: file not found: " in capsys.readouterr().err


def test_object_storage_fetches_the_split_file_for_planning(tmp_path):
    from vertebrae.core import storage

    config = _config({"path": "s3://bucket/run/splits/iris.csv"})
    config = storage.under_prefix(config, "s3://bucket/run")
    assert config["benchmarks"]["flowers"]["metrics"][0]["split"]["path"] == "splits/iris.csv"

    class Client:  # the calls _fetch makes of a boto3 client, over one object
        def head_object(self, Bucket, Key):
            import datetime

            from botocore.exceptions import ClientError

            if Key != "run/splits/iris.csv":
                raise ClientError({"Error": {"Code": "404"}}, "HeadObject")
            return {"LastModified": datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc), "ContentLength": 3}

        def download_file(self, bucket, name, local):
            Path(local).write_text("abc")

    assert storage._fetch(Client(), config, "bucket", "run", tmp_path) == ["splits/iris.csv"]
    assert (tmp_path / "splits" / "iris.csv").read_text() == "abc"


def test_a_target_view_scores_on_the_split_read_from_the_file(tmp_path):
    from vertebrae.planning import plan

    rows = ["id,x1,x2,label,site"] + [f"r{i},{i % 7},{i % 3},s{i % 4},{'ab'[i % 2]}" for i in range(40)]
    (tmp_path / "data.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (tmp_path / "split.json").write_text(json.dumps({"train": [f"r{i}" for i in range(30)],
                                                      "test": [f"r{i}" for i in range(30, 40)]}))
    config = {"benchmarks": {"t": {
        "dataset": {"source": {"type": "csv", "path": "data.csv", "id_column": "id", "feature_columns": ["x1", "x2"]}},
        "extractors": {"raw": {"type": "precomputed"}}, "scoring": {"k": 2},
        "targets": {"species": {"column": "label"}, "site": {"column": "site", "role": "nuisance"}},
        "metrics": [{"type": "knn", "k": 3, "split": {"path": "split.json"}}]}}}
    planned = plan(config, base_dir=tmp_path)
    splits = [spec["plan"]["metrics"][0]["split"] for spec in planned.specs.values() if spec["stage"] == "report"]
    assert len(splits) == 2 and all(s == json.loads((tmp_path / "split.json").read_text()) for s in splits)


def test_the_conventions_yaml_plans_as_written_with_its_split_file(tmp_path):
    from docs_support import block
    from vertebrae.planning import plan

    config = yaml.safe_load(block("docs/conventions.md", "A declared train / val / test split", "yaml"))
    inline = _iris_split(tmp_path)
    planned = plan(config, base_dir=tmp_path)
    metrics = next(s for s in planned.specs.values() if s["stage"] == "report")["plan"]["metrics"]
    assert [m["split"] for m in metrics] == [
        metric_from_config({"type": "knn", "split": inline}).recipe()["split"]] * 2
