"""``vertebrae plan --spec-file``: a spec file is accepted only when its text hashes to its name (issue 18, problem 5)."""

from __future__ import annotations

import hashlib
import json

import pytest

from vertebrae.cli import main
from vertebrae.core.artifacts import read_json_artifact
from vertebrae.core.errors import ValidationError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.stages.plan import read_spec_file, run_plan, spec_file_text


def protocol_spec(name: str = "x") -> dict:
    recipe = {"dataset": f"declared:{name}@1", "target_type": "classification"}
    return {"stage": "protocol", "fingerprint": fingerprint("protocol", recipe), "recipe": recipe}


def written(tmp_path, spec: dict):
    name, text = spec_file_text(spec)
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_name_is_the_fingerprint_and_the_sha256_of_the_text_without_context():
    spec = {**protocol_spec(), "where": "benchmarks.a.dataset"}
    name, text = spec_file_text(spec)
    assert json.loads(text) == spec and " " not in text  # canonical: compact, sorted keys
    assert text.index('"fingerprint"') < text.index('"recipe"') < text.index('"stage"')
    content = json.dumps({k: v for k, v in spec.items() if k != "where"}, sort_keys=True, separators=(",", ":"))
    assert name == f"{spec['fingerprint']}-{hashlib.sha256(content.encode()).hexdigest()[:16]}.json"
    # a field outside the recipe that the job reads changes the name, not the fingerprint
    other = spec_file_text({**spec, "batch_size": 7})[0]
    assert other != name and other.startswith(spec["fingerprint"])
    # context (where it was declared, the candidate's name in this config) changes neither: a config that plans
    # the same job under another benchmark or candidate name names the same spec file
    extractor = {"name": "raw", "decl": {"type": "precomputed", "name": "kept"}, "where": "benchmarks.a.extractors.raw"}
    renamed = {"name": "pixels", "decl": {"type": "precomputed", "name": "kept"}, "where": "benchmarks.b.extractors.pixels"}
    assert spec_file_text({**spec, "where": "benchmarks.b.dataset", "extractor": renamed})[0] == \
        spec_file_text({**spec, "extractor": extractor})[0]
    # a declaration's own keys are content (a declared identity's name, a name inside decl)
    assert spec_file_text({**spec, "extractor": {**extractor, "decl": {"type": "precomputed", "name": "other"}}})[0] \
        != spec_file_text({**spec, "extractor": extractor})[0]


def test_a_spec_file_written_by_another_config_is_read_with_its_context(tmp_path):
    """Two configs plan one job under different names: one file name; the text read is whichever was written."""
    spec = protocol_spec()
    path = written(tmp_path, {**spec, "where": "benchmarks.other.dataset"})
    assert path.name == spec_file_text(spec)[0]
    assert read_spec_file(path)["where"] == "benchmarks.other.dataset"


def test_a_spec_file_plans_like_the_spec_text(tmp_path):
    spec = protocol_spec()
    path = written(tmp_path, spec)
    assert read_spec_file(path) == spec
    assert main(["plan", "--spec-file", str(path), "--output", str(tmp_path / "a.json")]) == 0
    run_plan(json.dumps(spec), tmp_path / "b.json")
    for out in ("a.json", "b.json"):
        assert read_json_artifact(tmp_path / out, "plan", fingerprint=spec["fingerprint"]) == spec


def test_an_edited_spec_file_is_refused_naming_it(tmp_path, capsys):
    spec = protocol_spec()
    path = written(tmp_path, spec)
    # the edit keeps the recipe and the fingerprint: only the name's digest can tell
    path.write_text(path.read_text(encoding="utf-8").replace('"stage"', '"where":"x","stage"'), encoding="utf-8")
    with pytest.raises(ValidationError, match="does not hash to the digest in its name"):
        read_spec_file(path)
    out = tmp_path / "plan.json"
    assert main(["plan", "--spec-file", str(path), "--output", str(out)]) == 2
    line = capsys.readouterr().err.strip()
    assert line.startswith("vertebrae: error: ") and str(path) in line and "\n" not in line
    assert not out.exists()


def test_a_spec_file_of_another_fingerprint_is_refused(tmp_path):
    spec, other = protocol_spec("x"), protocol_spec("y")
    path = written(tmp_path, spec)
    renamed = path.rename(tmp_path / path.name.replace(spec["fingerprint"], other["fingerprint"]))
    with pytest.raises(ValidationError, match=f"holds the job spec '{spec['fingerprint']}', not {other['fingerprint']}"):
        read_spec_file(renamed)
    odd = path.parent / "spec.json"
    odd.write_text("{}", encoding="utf-8")
    with pytest.raises(ValidationError, match="not a job spec file name"):
        read_spec_file(odd)


def test_plan_takes_exactly_one_of_spec_and_spec_file(tmp_path, capsys):
    path = written(tmp_path, protocol_spec())
    out = str(tmp_path / "p.json")
    assert main(["plan", "--output", out]) == 2
    assert main(["plan-zero-shot", "--spec", path.read_text(), "--spec-file", str(path), "--output", out]) == 2
    assert capsys.readouterr().err.count("exactly one of --spec (JSON text) or --spec-file") == 2
