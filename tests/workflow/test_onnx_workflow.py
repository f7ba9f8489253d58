"""type: onnx in the workflow: a tiny MLP written as an ONNX graph in the test embeds iris (the torch-exported
models and their torch oracles are in tests/extractors/test_onnx_model.py); the embeddings equal
onnxruntime run directly on the rows, the report equals the in-process benchmark's, and a changed model file
(same path) reruns the embedding job; before it, `vertebrae validate` refuses a model with two inputs."""

from __future__ import annotations

import subprocess

import numpy as np

from vertebrae.planning import benchmarks_from_config
from workflow_support import BIN, comparable, job_counts, snakemake, write_config, written_report


def _write_two_inputs(path) -> None:
    """x + y: a graph with two inputs, which numeric rows cannot both feed."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Add", ["x", "y"], ["s"])], "two",
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["b", 4]) for n in ("x", "y")],
                              [helper.make_tensor_value_info("s", TensorProto.FLOAT, ["b", 4])])
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def _write_mlp(path, seed: int) -> None:
    """A 4 -> 8 -> 3 tanh MLP as an ONNX graph (Gemm, Tanh, Gemm), written with onnx.helper: no torch import."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    weights = [numpy_helper.from_array(rng.normal(size=shape).astype(np.float32), name)
               for name, shape in (("w1", (4, 8)), ("b1", (8,)), ("w2", (8, 3)), ("b2", (3,)))]
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]), helper.make_node("Tanh", ["h"], ["t"]),
         helper.make_node("Gemm", ["t", "w2", "b2"], ["y"])], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 3])], initializer=weights)
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_onnx_model_through_the_workflow(tmp_path, monkeypatch):
    import onnxruntime
    from sklearn.datasets import load_iris

    from vertebrae.core.artifacts import read_embeddings

    (tmp_path / "models").mkdir()
    _write_mlp(tmp_path / "models" / "mlp.onnx", seed=0)
    config = {
        "embedding": {"shards": 1},
        "benchmarks": {"iris_onnx": {
            "dataset": {"source": {"type": "sklearn", "name": "iris"},
                        "identity": {"kind": "declared", "name": "iris", "revision": "1"}},
            "extractors": {"mlp": {"type": "onnx", "path": "models/mlp.onnx", "batch_size": 16}},
            "scoring": {"k": 5},
            # iris's 3 classes: the score job and the in-process run resample rows; 20 (the least), not 200
            "row_resampling": {"resamples": 20},
        }},
    }
    # first a model with two inputs and no input_name: vertebrae validate refuses it, naming the key and both names
    _write_two_inputs(tmp_path / "models" / "two.onnx")
    bad = {"benchmarks": {"iris_onnx": {**config["benchmarks"]["iris_onnx"],
                                        "extractors": {"two": {"type": "onnx", "path": "models/two.onnx"}}}}}
    write_config(tmp_path, bad)
    proc = subprocess.run([str(BIN / "vertebrae"), "validate", "config/config.yaml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert ("benchmarks.iris_onnx.extractors.two.input_name: models/two.onnx has 2 inputs ('x', 'y'); name the one "
            "to use with input_name") in proc.stderr
    write_config(tmp_path, config)
    snakemake(tmp_path)
    [merged] = [read_embeddings(p, fingerprint=p.stem) for p in (tmp_path / "results" / "embeddings").glob("*.h5")]
    embedded = merged.matrix
    rows = load_iris().data.astype(np.float32)
    direct = onnxruntime.InferenceSession(str(tmp_path / "models" / "mlp.onnx"),
                                          providers=["CPUExecutionProvider"]).run(None, {"x": rows})[0]
    np.testing.assert_allclose(embedded, direct, atol=1e-6, rtol=0)  # other batches: the last bits may differ
    monkeypatch.chdir(tmp_path)  # model files are relative to the working directory, like the workflow's
    written = written_report(tmp_path, "iris_onnx")
    assert comparable(written) == comparable(benchmarks_from_config(config, base_dir=tmp_path)["iris_onnx"].run().to_dict())
    recipe = next(r["embedding_metadata"]["extractor"] for r in written["extractor_results"] if r["name"] == "mlp")
    assert recipe["type"] == "onnx" and recipe["onnxruntime_version"] == onnxruntime.__version__
    # the same path with other bytes is another model: its embedding job runs again
    _write_mlp(tmp_path / "models" / "mlp.onnx", seed=1)
    counts = job_counts(snakemake(tmp_path, "-n", "--quiet", "rules").stdout)
    assert counts["embed_shard"] == 1
