"""Every model family resolves its names when the extractor is built, so at ``vertebrae validate`` (issue 45, part 2:
a misspelled sentence-transformers name passed validate and planning and failed inside the embed job after 1 min
47 s, its message buried in 414 lines; without the models extra ``st:`` failed with a bare PackageNotFoundError).

Offline here: hub ids resolve against a Hugging Face cache built in the test (tests/hub_fixtures.py), the packaged
all-MiniLM-L6-v2 linked in as ``sentence-transformers/all-MiniLM-L6-v2``; the online path (one metadata call) is
exercised with the call stubbed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from hub_fixtures import cache_entry, folder_entry, tiny_entry, use_cache
from vertebrae.core.errors import ConfigError
from vertebrae.extractors.registry import build_extractor
from workflow_support import BIN

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
E5 = "intfloat/e5-small-v2"


@pytest.fixture()
def hub(tmp_path, minilm_path, monkeypatch) -> Path:
    """A cache holding MiniLM (its real files) and a tiny stand-in for e5-small-v2, offline, in this process."""
    cache = tmp_path / "hub"
    folder_entry(cache, MINILM, minilm_path)
    tiny_entry(cache, E5)
    return use_cache(monkeypatch, cache)


def _env(cache: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("SENTENCE_TRANSFORMERS_HOME", "HF_HOME", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE")}
    env.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(cache), **extra)
    return env


def _validate(tmp_path: Path, extractors: dict, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    """``vertebrae validate`` of a labelled text benchmark declaring ``extractors``, and its wall seconds."""
    import tiny_models

    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    lines = tiny_models.CORPUS.read_text(encoding="utf-8").splitlines()[:25]
    (work / "texts.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    source = {"type": "manifest", "path": "texts.csv", "text_column": "text", "label_column": "label", "id_column": "id"}
    config = {"benchmarks": {"topics": {
        "dataset": {"source": source, "identity": {"kind": "declared", "name": "topics", "revision": "1"}},
        "extractors": extractors, "scoring": {"k": 2, "min_samples_per_cluster": 2}}}}
    (work / "c.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    start = time.perf_counter()
    proc = subprocess.run([str(BIN / "vertebrae"), "validate", "c.yaml"], cwd=work, capture_output=True, text=True,
                          env=env, timeout=300)
    return proc, time.perf_counter() - start


MISSPELLED = {
    "st": ({"type": "sentence_transformers", "model": "sentence-transformers/all-MiniLM-L6-v3"},
           r"benchmarks\.topics\.extractors\.st\.model: model 'sentence-transformers/all-MiniLM-L6-v3' is not in the "
           r"local cache \(.*\) and HF_HUB_OFFLINE is set; download it with `hf download "
           r"sentence-transformers/all-MiniLM-L6-v3` \(or `huggingface-cli download .*`\) on a machine with network, "
           r"or name a local folder; closest cached names: sentence-transformers/all-MiniLM-L6-v2$"),
    "e5": ({"type": "hf_text", "model": "intfloat/e5-smal-v2"},
           r"benchmarks\.topics\.extractors\.e5\.model: model 'intfloat/e5-smal-v2' is not in the local cache .* "
           r"HF_HUB_OFFLINE is set; download it with `hf download intfloat/e5-smal-v2`.*closest cached names: "
           r"intfloat/e5-small-v2$"),
    "clip": ({"type": "open_clip", "model": "ViT-B-23", "pretrained": "laion2b_s34b_b79k"},
             r"benchmarks\.topics\.extractors\.clip\.model: 'ViT-B-23' is not an open_clip model \(open_clip [\d.]+\); "
             r"closest open_clip names: .*\bViT-B-32\b.*; or name local-dir:FOLDER or hf-hub:ORG/REPO$"),
    "clip_tag": ({"type": "open_clip", "model": "ViT-B-32", "pretrained": "laion2b_s34b_b78k"},
                 r"benchmarks\.topics\.extractors\.clip_tag\.pretrained: 'laion2b_s34b_b78k' is not a pretrained tag "
                 r"of open_clip model ViT-B-32 \(open_clip [\d.]+\); closest: laion2b_s34b_b79k.*; its tags: "),
    "empty": ({"type": "sentence_transformers", "model": "models/empty"},
              r"benchmarks\.topics\.extractors\.empty\.model: the folder models/empty holds no modules\.json or "
              r"config\.json; name a sentence-transformers folder"),
}


@pytest.mark.parametrize("name", list(MISSPELLED))
def test_vertebrae_validate_refuses_a_misspelled_name_within_15_s_naming_the_candidate(name, tmp_path, minilm_path):
    decl, message = MISSPELLED[name]
    cache = tmp_path / "hub"
    folder_entry(cache, MINILM, minilm_path)
    tiny_entry(cache, E5)
    (tmp_path / "work" / "models" / "empty").mkdir(parents=True)
    proc, seconds = _validate(tmp_path, {name: decl}, _env(cache))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    error = proc.stderr.strip().splitlines()[-1]
    assert error.startswith("vertebrae: error: ") and "Traceback" not in proc.stderr, proc.stderr
    assert __import__("re").search(message, error), error
    # a tag is looked up in open_clip's registry, which imports open_clip (7 s here, more on a busy machine); every
    # other name is refused without importing a model library (about 1 s)
    assert seconds < (30 if name == "clip_tag" else 15), f"validate took {seconds:.1f} s"
    assert not (tmp_path / "work" / "results").exists()


def test_a_cached_hub_id_passes_validate_and_reads_its_snapshot(tmp_path, minilm_path):
    cache = tmp_path / "hub"
    folder_entry(cache, MINILM, minilm_path)
    extractors = {"st": {"type": "sentence_transformers", "model": MINILM},
                  "st_short": {"type": "sentence_transformers", "model": "all-MiniLM-L6-v2"},  # its own org, as ST reads it
                  "minilm": {"type": "hf_text", "model": MINILM}}
    proc, seconds = _validate(tmp_path, extractors, _env(cache))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "valid; 1 benchmark" in proc.stdout and "3 candidates: st, st_short, minilm" in proc.stdout
    assert seconds < 60


def test_a_missing_extra_names_the_pip_command(tmp_path, minilm_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['sentence_transformers'] = None  # not installed\n")
    cache = tmp_path / "hub"
    folder_entry(cache, MINILM, minilm_path)
    proc, seconds = _validate(tmp_path, {"st": {"type": "sentence_transformers", "model": MINILM}},
                              _env(cache, PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "vertebrae: error: benchmarks.topics.extractors.st: type sentence_transformers needs sentence-transformers, "
        "not installed here; install the models extra: pip install 'vertebrae[models]'")
    assert seconds < 15


@pytest.mark.parametrize("kind, module, dist", [("hf_vision", "transformers", "transformers"),
                                                ("open_clip", "open_clip", "open_clip_torch"),
                                                ("timm", "timm", "timm"), ("torch", "torch", "torch")])
def test_every_model_family_names_its_missing_package(kind, module, dist, monkeypatch, tmp_path):
    decl = {"hf_vision": {"model": str(tmp_path)}, "open_clip": {"model": "ViT-B-32"},
            "timm": {"model": "resnet18", "pretrained": True}, "torch": {"factory": "tiny_models:make_mlp"}}[kind]
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed: find_spec says None
    with pytest.raises(ConfigError, match=rf"^x\.m: type {kind} needs {dist}, not installed here; install the models "
                                          r"extra: pip install 'vertebrae\[models\]'$"):
        build_extractor("m", {"type": kind, **decl}, where="x.m")


def test_local_folders_must_hold_the_config_their_family_loads(tmp_path, hub, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    for kind, files in (("hf_text", r"config\.json"), ("hf_vision", r"config\.json"), ("hf_multimodal", r"config\.json"),
                        ("sentence_transformers", r"modules\.json or config\.json")):
        with pytest.raises(ConfigError, match=rf"^x\.model: the folder {empty} holds no {files}; name a "):
            build_extractor("m", {"type": kind, "model": str(empty)}, where="x")
    with pytest.raises(ConfigError, match=rf"^x\.model: the folder {empty} holds no open_clip_config\.json"):
        build_extractor("m", {"type": "open_clip", "model": f"local-dir:{empty}"}, where="x")
    with pytest.raises(ConfigError, match=r"^x\.model: folder not found: .*nowhere"):
        build_extractor("m", {"type": "open_clip", "model": f"local-dir:{tmp_path / 'nowhere'}"}, where="x")
    (empty / "config.json").write_text('{"hidden_size": 8}')
    with pytest.raises(ConfigError, match=rf"^x\.model: {empty / 'config.json'} has no model_type"):
        build_extractor("m", {"type": "hf_text", "model": str(empty)}, where="x")
    (empty / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match=rf"^x\.model: cannot read {empty / 'config.json'}"):
        build_extractor("m", {"type": "hf_vision", "model": str(empty)}, where="x")
    (empty / "open_clip_config.json").write_text('{"preprocess_cfg": {}}')
    with pytest.raises(ConfigError, match=r"open_clip_config\.json has no model_cfg"):
        build_extractor("m", {"type": "open_clip", "model": f"local-dir:{empty}"}, where="x")
    monkeypatch.chdir(tmp_path)  # os.getcwd: a model_path_from returning a folder without a config
    with pytest.raises(ConfigError, match=rf"^x\.model_path_from: the folder {tmp_path} holds no config\.json"):
        build_extractor("m", {"type": "hf_text", "model_path_from": "os:getcwd"}, where="x")


def test_cached_hub_ids_resolve_offline_and_are_checked_like_folders(hub, minilm_path):
    st = build_extractor("m", {"type": "sentence_transformers", "model": MINILM, "revision": None}, where="x")
    assert st.recipe()["model"] == {"hub_id": MINILM, "revision": "main"}  # the recipe of a hub id, as before
    assert build_extractor("m", {"type": "hf_text", "model": MINILM}, where="x").recipe()["model"]["hub_id"] == MINILM
    # the cached snapshot is read as a folder is: prompts, width and depth refused before any job
    with pytest.raises(ConfigError, match=r"x\.prompt_name: the model defines no prompt 'query'"):
        build_extractor("m", {"type": "sentence_transformers", "model": MINILM, "prompt_name": "query"}, where="x")
    with pytest.raises(ConfigError, match=r"x\.truncate_dim: 512 is above the model's embedding dimension 384"):
        build_extractor("m", {"type": "sentence_transformers", "model": MINILM, "truncate_dim": 512}, where="x")
    with pytest.raises(ConfigError, match=r"x\.hidden_layer: 7 is beyond the depth of BertModel \(" + MINILM):
        build_extractor("m", {"type": "hf_text", "model": MINILM, "hidden_layer": 7}, where="x")
    # another revision than the one cached, and a cache holding the config without the weights
    with pytest.raises(ConfigError, match=r"x\.model: model '.*MiniLM-L6-v2' at revision 'abc123' is not in the local "
                                          r"cache \(.*\) \(the cache holds it at main\).*hf download "
                                          r"sentence-transformers/all-MiniLM-L6-v2 --revision abc123"):
        build_extractor("m", {"type": "hf_text", "model": MINILM, "revision": "abc123"}, where="x")
    cache_entry(hub, "org/config-only", {"config.json": b'{"model_type": "bert"}'})
    with pytest.raises(ConfigError, match=r"x\.model: model 'org/config-only' is only partly in the local cache \(.* "
                                          r"holds no weights file\) and HF_HUB_OFFLINE is set"):
        build_extractor("m", {"type": "hf_vision", "model": "org/config-only"}, where="x")
    tiny_entry(hub, "org/tiny", revision="v1", commit="0123abcd")
    assert build_extractor("m", {"type": "hf_multimodal", "model": "org/tiny", "revision": "v1"}, where="x")
    assert build_extractor("m", {"type": "hf_multimodal", "model": "org/tiny", "revision": "0123abcd"}, where="x")


def test_a_name_nothing_is_cached_near_gets_no_closest_clause(hub):
    with pytest.raises(ConfigError) as info:
        build_extractor("m", {"type": "hf_text", "model": "zzz/qqq"}, where="x")
    assert str(info.value).endswith("or name a local folder")


def test_open_clip_tags_need_their_weights_and_tokenizer_cached_offline(hub):
    with pytest.raises(ConfigError, match=r"x\.pretrained: the tag's weights 'laion/CLIP-ViT-B-32-laion2B-s34B-b79K' "
                                          r"\(open_clip_model\.safetensors or open_clip_pytorch_model\.bin\) is not in "
                                          r"the local cache .* HF_HUB_OFFLINE is set; download it with `hf download "
                                          r"laion/CLIP-ViT-B-32-laion2B-s34B-b79K`"):
        build_extractor("m", {"type": "open_clip", "model": "ViT-B-32", "pretrained": "laion2b_s34b_b79k"}, where="x")
    cache_entry(hub, "laion/CLIP-ViT-B-32-laion2B-s34B-b79K", {"open_clip_model.safetensors": b""})
    clip = build_extractor("m", {"type": "open_clip", "model": "ViT-B-32", "pretrained": "laion2b_s34b_b79k"}, where="x")
    assert clip.recipe()["model"]["pretrained"] == "laion2b_s34b_b79k"
    # a SigLIP model's tokenizer comes from the hub too, even with random weights
    with pytest.raises(ConfigError, match=r"x\.model: the model's tokenizer 'timm/ViT-B-16-SigLIP' is not in the local "
                                          r"cache"):
        build_extractor("m", {"type": "open_clip", "model": "ViT-B-16-SigLIP"}, where="x")
    with pytest.raises(ConfigError, match=r"x\.model: model 'timm/nothing-here' is not in the local cache .* "
                                          r"HF_HUB_OFFLINE is set"):
        build_extractor("m", {"type": "open_clip", "model": "hf-hub:timm/nothing-here"}, where="x")
    cache_entry(hub, "org/oc", {"open_clip_config.json": b'{"model_cfg": {}}', "open_clip_model.safetensors": b""})
    assert build_extractor("m", {"type": "open_clip", "model": "hf-hub:org/oc"}, where="x")
    with pytest.raises(ConfigError, match=r"x\.pretrained: an hf-hub model carries its weights"):
        build_extractor("m", {"type": "open_clip", "model": "hf-hub:org/oc", "pretrained": "openai"}, where="x")


def test_a_registry_name_is_checked_without_importing_open_clip(tmp_path):
    probe = ("import sys\nfrom vertebrae.core.errors import ConfigError\n"
             "from vertebrae.extractors.registry import build_extractor\n"
             "build_extractor('m', {'type': 'open_clip', 'model': 'ViT-B-32'}, where='x')\n"
             "try:\n    build_extractor('m', {'type': 'open_clip', 'model': 'ViT-B-23'}, where='x')\n"
             "except ConfigError as exc:\n    print(exc)\n"
             "print(sorted(m for m in ('open_clip', 'torch') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         env=_env(tmp_path / "hub")).stdout.splitlines()
    assert out[0].startswith("x.model: 'ViT-B-23' is not an open_clip model") and out[1] == "[]"


def test_online_a_hub_id_the_cache_lacks_is_looked_up_once(hub, monkeypatch):
    from vertebrae.extractors import model_names

    use_cache(monkeypatch, hub, offline=False)
    calls = []

    def files(repo_id, revision, **_):
        calls.append((repo_id, revision))
        if repo_id == "org/there":
            return ["config.json", "model.safetensors"]
        if repo_id == "org/no-config":
            return ["README.md"]
        raise model_names.HubMiss({"org/moved": "revision", "org/offline": "unreachable"}.get(repo_id, "missing"),
                                  "404 Client Error")

    monkeypatch.setattr(model_names, "hub_files", files)
    assert build_extractor("m", {"type": "hf_text", "model": "org/there"}, where="x")
    build_extractor("m", {"type": "hf_text", "model": MINILM}, where="x")  # cached: no call
    assert calls == [("org/there", None)]
    with pytest.raises(ConfigError, match=r"x\.model: model 'intfloat/e5-smal-v2' is not on the Hugging Face hub \(or "
                                          r"private: log in with `hf auth login`\), nor in the local cache \(.*\), nor "
                                          r"a local folder; closest cached names: intfloat/e5-small-v2$"):
        build_extractor("m", {"type": "hf_text", "model": "intfloat/e5-smal-v2"}, where="x")
    with pytest.raises(ConfigError, match=r"x\.model: the hub has no revision 'v9' of model 'org/moved'"):
        build_extractor("m", {"type": "hf_text", "model": "org/moved", "revision": "v9"}, where="x")
    with pytest.raises(ConfigError, match=r"x\.model: model 'org/offline' is not in the local cache .* and the hub "
                                          r"could not be reached \(404 Client Error\); download it"):
        build_extractor("m", {"type": "hf_text", "model": "org/offline"}, where="x")
    with pytest.raises(ConfigError, match=r"x\.model: the hub repo 'org/no-config' holds no config\.json"):
        build_extractor("m", {"type": "hf_vision", "model": "org/no-config"}, where="x")
    calls.clear()  # sentence-transformers tries its own org for a name without one
    with pytest.raises(ConfigError, match=r"model 'nothing' is not on the Hugging Face hub"):
        build_extractor("m", {"type": "sentence_transformers", "model": "nothing"}, where="x")
    assert calls == [("nothing", None), ("sentence-transformers/nothing", None)]
