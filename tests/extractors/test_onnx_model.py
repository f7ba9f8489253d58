"""type: onnx. Tiny torch models exported with torch.onnx.export in the test (an image CNN, an MLP on numeric rows,
a one-layer BERT with a real WordPiece tokenizer folder); oracles: onnxruntime's InferenceSession run directly on
the same preprocessed batch (equal EXACTLY: same provider, same batch) and the torch model itself (within
TORCH_ATOL: onnxruntime fuses and reorders float32 arithmetic, so the last bits differ)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from vertebrae.core.errors import ConfigError
from vertebrae.extractors.registry import build_extractor

TORCH_ATOL = 1e-5  # |onnxruntime - torch| on float32 embeddings of unit scale (docs/models.md states it too)
SENTENCES = ["a cat sat on the mat", "the quick brown fox jumps over the lazy dog again and again", "hello",
             "onnx models are deployed as shipped", "tokens of different lengths pad the batch"]


def to_chw(image):
    """The image transform of the tiny CNN: 16 x 16, CHW float32 in [0, 1] (importable: part of the recipe)."""
    return np.asarray(image.resize((16, 16)), dtype=np.float32).transpose(2, 0, 1) / 255.0


def _export(module, args, path: Path, inputs: list[str], outputs: list[str], dynamic: dict) -> Path:
    import torch

    module.eval()
    with torch.no_grad():
        torch.onnx.export(module, args, str(path), dynamo=False, input_names=inputs, output_names=outputs,
                          dynamic_axes=dynamic)
    module.eval()  # the exporter restores the training flag it found
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory, minilm_path):
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    import tiny_models

    root = Path(tmp_path_factory.mktemp("onnx"))
    torch.manual_seed(0)
    cnn = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                              torch.nn.Flatten(), torch.nn.Linear(8, 6))
    _export(cnn, (torch.zeros(2, 3, 16, 16),), root / "cnn.onnx", ["pixels"], ["embedding"],
            {"pixels": {0: "batch"}, "embedding": {0: "batch"}})
    mlp = tiny_models.make_mlp(width=8, out=3)
    _export(mlp, (torch.zeros(2, 8),), root / "mlp.onnx", ["x"], ["y"], {"x": {0: "b"}, "y": {0: "b"}})

    class TwoIn(torch.nn.Module):
        def forward(self, x, y):
            return x + y, (x * y).unsqueeze(0).unsqueeze(0)  # a 2-D output and a 4-D one

    _export(TwoIn(), (torch.zeros(2, 4), torch.zeros(2, 4)), root / "two.onnx", ["x", "y"], ["sum", "grid"],
            {"x": {0: "b"}, "y": {0: "b"}})

    bert_dir = root / "bert"
    config = BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=128, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0, attn_implementation="eager")
    bert = BertModel(config, add_pooling_layer=False).eval()
    bert.save_pretrained(bert_dir)
    AutoTokenizer.from_pretrained(minilm_path).save_pretrained(bert_dir)
    tokenizer_dir = root / "tokenizer"
    AutoTokenizer.from_pretrained(minilm_path).save_pretrained(tokenizer_dir)

    class Tokens(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    ids = torch.ones(2, 7, dtype=torch.long)
    seq = {0: "b", 1: "s"}
    _export(Tokens(), (ids, ids, torch.zeros_like(ids)), root / "bert.onnx",
            ["input_ids", "attention_mask", "token_type_ids"], ["last_hidden_state"],
            {"input_ids": seq, "attention_mask": seq, "token_type_ids": seq, "last_hidden_state": seq})
    images = tiny_models.write_images(root / "images", 7)
    return SimpleNamespace(root=root, cnn=cnn, mlp=mlp, bert_dir=bert_dir, tokenizer=tokenizer_dir, images=images)


def _direct(path: Path, feed: dict) -> list[np.ndarray]:
    import onnxruntime

    return onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feed)


def test_image_model_equals_onnxruntime_exactly_and_torch_within_tolerance(models):
    import torch
    from PIL import Image

    from vertebrae.extractors.onnx_model import OnnxExtractor

    paths = [str(p) for p in models.images]
    ours = OnnxExtractor("cnn", models.root / "cnn.onnx", image_transform=to_chw, batch_size=len(paths)).transform(paths)
    batch = np.stack([to_chw(Image.open(p).convert("RGB")) for p in paths])
    direct = _direct(models.root / "cnn.onnx", {"pixels": batch})[0]
    assert ours.dtype == np.float32 and ours.shape == (7, 6)
    assert np.array_equal(ours, direct)
    with torch.no_grad():
        np.testing.assert_allclose(ours, models.cnn(torch.from_numpy(batch)).numpy(), atol=TORCH_ATOL, rtol=0)
    # batching: smaller batches give the same rows (a per-image model), within float tolerance
    two = OnnxExtractor("cnn", models.root / "cnn.onnx", image_transform=to_chw, batch_size=2).transform(paths)
    np.testing.assert_allclose(two, ours, atol=1e-6, rtol=0)


def test_features_model_from_config_and_its_recipe(models, tmp_path):
    import shutil

    import torch

    rows = np.random.default_rng(0).normal(size=(9, 8))
    decl = {"type": "onnx", "path": str(models.root / "mlp.onnx"), "batch_size": 9}
    extractor = build_extractor("mlp", decl, where="x")
    ours = extractor.transform(rows)
    assert np.array_equal(ours, _direct(models.root / "mlp.onnx", {"x": rows.astype(np.float32)})[0])
    with torch.no_grad():
        np.testing.assert_allclose(ours, models.mlp(torch.from_numpy(rows).float()).numpy(), atol=TORCH_ATOL, rtol=0)
    recipe = extractor.recipe()
    assert recipe["type"] == "onnx" and recipe["modality"] == "features" and recipe["output_name"] == "y"
    assert recipe["inputs"] == ["x"] and recipe["onnxruntime_version"] == __import__("onnxruntime").__version__
    # moved: same recipe; a changed byte: another one
    moved = tmp_path / "elsewhere.onnx"
    shutil.copy(models.root / "mlp.onnx", moved)
    assert build_extractor("mlp", {**decl, "path": str(moved)}, where="x").recipe() == recipe
    other = tmp_path / "other.onnx"
    _export(tiny_models_mlp(seed_out=4), (torch.zeros(2, 8),), other, ["x"], ["y"], {"x": {0: "b"}, "y": {0: "b"}})
    assert build_extractor("mlp", {**decl, "path": str(other)}, where="x").recipe()["model"] != recipe["model"]
    assert extractor.weight_files() == [models.root / "mlp.onnx"]


def tiny_models_mlp(seed_out: int):
    import tiny_models

    return tiny_models.make_mlp(width=8, out=seed_out)


def test_text_model_equals_onnxruntime_and_the_torch_bert_it_came_from(models):
    from transformers import AutoTokenizer

    from vertebrae.extractors.huggingface import HFTextExtractor
    from vertebrae.extractors.onnx_model import OnnxExtractor

    path, n = models.root / "bert.onnx", len(SENTENCES)
    tokens = AutoTokenizer.from_pretrained(models.tokenizer)(SENTENCES, padding=True, truncation=True,
                                                             max_length=256, return_tensors="np")
    hidden = _direct(path, {k: tokens[k].astype(np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")})[0]
    cls = OnnxExtractor("b", path, tokenizer=models.tokenizer, pooling="cls", batch_size=n).transform(SENTENCES)
    assert np.array_equal(cls, hidden[:, 0])
    mean = OnnxExtractor("b", path, tokenizer=models.tokenizer, pooling="mean", batch_size=n).transform(SENTENCES)
    mask = tokens["attention_mask"][:, :, None]
    np.testing.assert_allclose(mean, (hidden * mask).sum(1) / mask.sum(1), atol=1e-6, rtol=0)  # float64 there
    # the torch model it was exported from, pooled as hf_text pools (mean over the attention mask)
    reference = HFTextExtractor("ref", str(models.bert_dir), pooling="mean", normalize=False, device="cpu",
                                batch_size=2).transform(SENTENCES)
    np.testing.assert_allclose(mean, reference, atol=TORCH_ATOL, rtol=0)
    # batches of 2 pad differently; the masked mean does not see the padding
    two = OnnxExtractor("b", path, tokenizer=models.tokenizer, pooling="mean", batch_size=2).transform(SENTENCES)
    np.testing.assert_allclose(two, mean, atol=TORCH_ATOL, rtol=0)
    normed = OnnxExtractor("b", path, tokenizer=models.tokenizer, pooling="mean", normalize=True,
                           batch_size=n).transform(SENTENCES)
    np.testing.assert_allclose(normed, mean / np.linalg.norm(mean, axis=1, keepdims=True), atol=1e-6, rtol=0)


def test_external_data_is_digested_and_a_missing_file_refused(models, tmp_path):
    import onnx

    model = onnx.load(str(models.root / "mlp.onnx"))
    onnx.save_model(model, str(tmp_path / "ext.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="ext.data", size_threshold=0)
    decl = {"type": "onnx", "path": str(tmp_path / "ext.onnx")}
    extractor = build_extractor("e", decl, where="x")
    assert list(extractor.recipe()["model"]["external_data"]) == ["ext.data"]
    rows = np.ones((3, 8), dtype=np.float32)
    np.testing.assert_array_equal(extractor.transform(rows), build_extractor("m", {
        "type": "onnx", "path": str(models.root / "mlp.onnx")}, where="x").transform(rows))
    assert extractor.weight_files() == [tmp_path / "ext.onnx", tmp_path / "ext.data"]
    before = extractor.recipe()["model"]
    data = (tmp_path / "ext.data").read_bytes()
    (tmp_path / "ext.data").write_bytes(data[:-4] + b"\0\0\0\0")
    assert build_extractor("e", decl, where="x").recipe()["model"] != before
    os.remove(tmp_path / "ext.data")
    with pytest.raises(ConfigError, match=r"x\.path: .*ext\.onnx keeps weights in the external data file 'ext\.data', "
                                          r"not found beside it"):
        build_extractor("e", decl, where="x")


def test_bad_declarations_are_refused_naming_key_and_value(models, tmp_path):
    two = str(models.root / "two.onnx")
    with pytest.raises(ConfigError, match=r"x\.input_name: .*two\.onnx has 2 inputs \('x', 'y'\); name the one"):
        build_extractor("t", {"type": "onnx", "path": two, "output_name": "sum"}, where="x")
    with pytest.raises(ConfigError, match=r"x\.input_name: .*two\.onnx also needs input\(s\) \['y'\]"):
        build_extractor("t", {"type": "onnx", "path": two, "input_name": "x", "output_name": "sum"}, where="x")
    with pytest.raises(ConfigError, match=r"x\.input_name: 'z' is not an input of .*; its inputs: \['x', 'y'\]"):
        build_extractor("t", {"type": "onnx", "path": two, "input_name": "z"}, where="x")
    mlp = str(models.root / "mlp.onnx")
    with pytest.raises(ConfigError, match=r"x\.output_name: 'z' is not an output of .*; its outputs: \['y'\]"):
        build_extractor("t", {"type": "onnx", "path": mlp, "output_name": "z"}, where="x")
    with pytest.raises(ConfigError, match=r"x\.pooling: output 'y' of .* is already 2-D \(shape \['b', 3\]\)"):
        build_extractor("t", {"type": "onnx", "path": mlp, "pooling": "mean"}, where="x")
    bert = str(models.root / "bert.onnx")
    with pytest.raises(ConfigError, match=r"x\.pooling: output 'last_hidden_state' of .* is 3-D \(shape "
                                          r"\['b', 's', 16\]: rows x tokens x dims\); declare pooling: mean or cls"):
        build_extractor("t", {"type": "onnx", "path": bert, "tokenizer": str(models.tokenizer)}, where="x")
    with pytest.raises(ConfigError, match=r"x\.tokenizer: modality text needs a local tokenizer folder"):
        build_extractor("t", {"type": "onnx", "path": bert, "modality": "text", "pooling": "mean"}, where="x")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"x\.tokenizer: the folder .*empty holds no tokenizer"):
        build_extractor("t", {"type": "onnx", "path": bert, "tokenizer": str(tmp_path / "empty"), "pooling": "cls"},
                        where="x")
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes((models.root / "mlp.onnx").read_bytes()[:200])
    with pytest.raises(ConfigError, match=r"x\.path: .*corrupt\.onnx is not (a readable ONNX|an ONNX) model"):
        build_extractor("t", {"type": "onnx", "path": str(corrupt)}, where="x")
    with pytest.raises(ConfigError, match=r"x\.path: file not found: .*missing\.onnx"):
        build_extractor("t", {"type": "onnx", "path": str(tmp_path / "missing.onnx")}, where="x")
    with pytest.raises(ConfigError, match=r"x\.image_transform: modality image needs"):
        build_extractor("t", {"type": "onnx", "path": mlp, "modality": "image"}, where="x")
    with pytest.raises(ConfigError, match=r"x\.device: must be cpu, cuda, cuda:N or auto for type onnx, got 'mps'"):
        build_extractor("t", {"type": "onnx", "path": mlp, "device": "mps"}, where="x")


def test_a_3d_output_of_numeric_rows_is_pooled_over_every_token(tmp_path):
    """A graph whose output stacks x and 2x as two tokens: cls is x, mean is 1.5x (written with onnx.helper)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Unsqueeze", ["x", "axis"], ["t0"]), helper.make_node("Add", ["t0", "t0"], ["t1"]),
             helper.make_node("Concat", ["t0", "t1"], ["tokens"], axis=1)]
    graph = helper.make_graph(nodes, "tokens", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 4])],
                              [helper.make_tensor_value_info("tokens", TensorProto.FLOAT, ["b", 2, 4])],
                              initializer=[numpy_helper.from_array(np.array([1], dtype=np.int64), "axis")])
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "t.onnx"))
    rows = np.arange(12, dtype=np.float32).reshape(3, 4)
    decl = {"type": "onnx", "path": str(tmp_path / "t.onnx"), "batch_size": 2}
    np.testing.assert_array_equal(build_extractor("t", {**decl, "pooling": "cls"}, where="x").transform(rows), rows)
    np.testing.assert_array_equal(build_extractor("t", {**decl, "pooling": "mean"}, where="x").transform(rows), 1.5 * rows)


def test_cuda_without_a_cuda_provider_is_refused_by_validate(models, tmp_path):
    import onnxruntime

    from vertebrae.planning import plan

    config = {"benchmarks": {"iris": {
        "dataset": {"source": {"type": "sklearn", "name": "iris"}, "identity": {"kind": "declared", "name": "i",
                                                                               "revision": "1"}},
        "extractors": {"net": {"type": "onnx", "path": str(models.root / "mlp.onnx"), "device": "cuda"}}}}}
    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this onnxruntime has a CUDA provider")
    with pytest.raises(ConfigError, match=r"benchmarks\.iris\.extractors\.net\.device is 'cuda', but this onnxruntime "
                                          r"\(.*\) has no CUDAExecutionProvider"):
        plan(config, base_dir=tmp_path)


def test_the_docs_python_example_runs_as_written(models, tmp_path, monkeypatch, capsys):
    """docs/models.md's OnnxExtractor block, with the tiny BERT and its tokenizer where it names them."""
    import shutil

    from docs_support import block

    (tmp_path / "models").mkdir()
    shutil.copy(models.root / "bert.onnx", tmp_path / "models" / "bert.onnx")
    shutil.copytree(models.tokenizer, tmp_path / "models" / "bert-tokenizer")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(block("docs/models.md", "Models", "python", 1), "docs/models.md", "exec"), namespace)
    assert namespace["rows"].shape == (2, 16) and namespace["rows"].dtype == np.float32
    assert capsys.readouterr().out.startswith("(2, 16) ")
