"""A key of another extractor type is refused, not ignored (issue 27: ``path:`` on ``type: sklearn`` passed
validate and the run failed 30 s later on the wrong input)."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from vertebrae.core.errors import ConfigError
from vertebrae.extractors.registry import EXTRACTOR_KEYS, build_extractor
from vertebrae.planning import plan
from vertebrae.planning.config import config_schema
from workflow_support import BIN

PCA = [{"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 2}}]
IRIS = {"source": {"type": "sklearn", "name": "iris"}, "identity": {"kind": "declared", "name": "iris", "revision": "1"}}


def test_a_key_of_another_type_names_the_key_the_type_and_its_owners():
    with pytest.raises(ConfigError, match=r"x\.path: a key of extractor type\(s\) precomputed, onnx, not of type "
                                          r"'sklearn', which would ignore it; type 'sklearn' takes steps, random_state"):
        build_extractor("pca", {"type": "sklearn", "steps": PCA, "path": "emb.npz"}, where="x")
    with pytest.raises(ConfigError, match=r"x\.model: a key of extractor type\(s\) open_clip, hf_text, hf_vision, "
                                          r"hf_multimodal, timm, sentence_transformers, not of type 'callable'"):
        build_extractor("c", {"type": "callable", "branches": {"a": "numpy:cumsum"}, "model": "m"}, where="x")
    with pytest.raises(ConfigError, match=r"x\.steps: a key of extractor type\(s\) sklearn, not of type 'precomputed'"):
        build_extractor("p", {"type": "precomputed", "steps": PCA}, where="x")
    with pytest.raises(ConfigError, match=r"x\.random_state: a key of extractor type\(s\) sklearn"):
        build_extractor("p", {"type": "precomputed", "random_state": 3}, where="x")
    # the schema's defaults, filled into every extractor, are not the user's keys
    build_extractor("p", {"type": "precomputed", "random_state": 0, "allow_sparse": True}, where="x")


def test_every_schema_key_belongs_to_some_type_and_every_type_is_listed():
    props = config_schema()["$defs"]["extractor"]["properties"]
    assert set(props) - {"type"} == {key for keys in EXTRACTOR_KEYS.values() for key in keys}
    assert set(props["type"]["enum"]) == set(EXTRACTOR_KEYS)


def test_vertebrae_validate_refuses_path_on_sklearn_before_any_job(tmp_path):
    config = {"benchmarks": {"iris": {"dataset": IRIS, "extractors": {
        "pca": {"type": "sklearn", "steps": PCA, "path": "emb.npz"}}}}}
    with pytest.raises(ConfigError, match=r"benchmarks\.iris\.extractors\.pca\.path: a key of extractor type\(s\) "
                                          r"precomputed, onnx, not of type 'sklearn'"):
        plan(config, base_dir=tmp_path)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    proc = subprocess.run([str(BIN / "vertebrae"), "validate", "c.yaml"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2 and "extractors.pca.path: a key of extractor type(s) precomputed" in proc.stderr
    assert not (tmp_path / "results").exists()
