"""docs/data.md, "Bring your data as it is": its config (a labels-only table and a BEIR folder) and its Python snippet run
as written, on files this test writes where the snippets name them."""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import time
from pathlib import Path

import numpy as np
import yaml

from tests.beir_fixtures import write_beir
from tests.workflow.test_readme_own_data import first_yaml, section
from vertebrae.planning import benchmarks_from_config, retrieval_benchmarks_from_config
from workflow_support import BIN

TITLE = "## Bring your data as it is"


def _python_block(text: str) -> str:
    match = re.search(r"^```python\n(.*?)^```", text, re.S | re.M)
    assert match, "no ```python block"
    return match.group(1)


def _write_files(work: Path, rows: int = 60) -> None:
    rng = np.random.default_rng(27)
    ids = np.array([f"img-{i:03d}" for i in range(rows)])
    labels = np.arange(rows) % 3
    (work / "data").mkdir()
    (work / "emb").mkdir()
    (work / "data/labels.csv").write_text("id,label\n" + "".join(f"{i},{'abc'[y]}\n" for i, y in zip(ids, labels)),
                                          encoding="utf-8")
    for name, spread in (("a", 3.0), ("b", 0.5)):
        order = rng.permutation(rows)
        emb = spread * rng.normal(size=(3, 5))[labels] + rng.normal(size=(rows, 5))
        np.savez(work / f"emb/{name}.npz", embeddings=emb[order], ids=ids[order])
    write_beir(work / "data/scifact")
    docs, queries = [f"d{i}" for i in range(1, 6)], ["q1", "q2", "q3"]
    gallery = np.eye(5, 4) + 0.1 * rng.normal(size=(5, 4))
    np.savez(work / "emb/scifact-corpus.npz", embeddings=gallery[::-1], ids=np.array(docs[::-1]))
    np.savez(work / "emb/scifact-queries.npz", embeddings=gallery[[0, 1, 3]] + 0.05, ids=np.array(queries))
    for path in work.rglob("*"):
        if path.is_file():
            os.utime(path, (time.time() - 60, time.time() - 60))


def test_the_bring_your_data_snippets_run_as_written(tmp_path, monkeypatch):
    text = section(TITLE)
    work = tmp_path / "mine"
    work.mkdir()
    _write_files(work)
    (work / "my-config.yaml").write_text(first_yaml(text), encoding="utf-8")  # as pasted from the docs
    proc = subprocess.run([str(BIN / "vertebrae"), "validate", "my-config.yaml"], cwd=work, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "labelled benchmark my_models (benchmarks.my_models): 2 candidates: model_a, model_b" in proc.stdout
    assert "retrieval benchmark scifact (retrieval.scifact): 1 candidate: minilm" in proc.stdout

    monkeypatch.chdir(work)
    config = yaml.safe_load((work / "my-config.yaml").read_text(encoding="utf-8"))
    labelled = benchmarks_from_config(config, base_dir=work)["my_models"].run().to_dict()
    assert labelled["ranking"][0] == "model_a", labelled["ranking"]  # the better separated file ranks first
    retrieval = retrieval_benchmarks_from_config(config, base_dir=work)["scifact"].run().to_dict()
    score = retrieval["candidate_results"][0]["primary_score"]

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(_python_block(text), "docs/data.md", "exec"), {})
    assert float(printed.getvalue().strip()) == score  # the Python face equals the config's
    assert 0.5 < score <= 1.0
