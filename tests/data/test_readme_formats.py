"""docs/data.md, "Bring your data as it is": each format's YAML source and Python snippet run as written, on small data
written at the paths they name; both give the same rows and labels."""

from __future__ import annotations

import contextlib
import io
import re

import pytest
import yaml

from format_fixtures import tiny_images, write_hf_dataset, write_image_folder, write_tar_shards
from vertebrae.data.sources import load_source
from workflow_support import REPO

SECTION = "## Bring your data as it is"


def _subsection(title: str) -> str:
    text = (REPO / "docs" / "data.md").read_text(encoding="utf-8")
    body = text.split(SECTION + "\n", 1)[1]
    body = body.split("\n### " + title + "\n", 1)[1]
    return re.split(r"\n##+ ", body, maxsplit=1)[0]


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.S | re.M)


@pytest.mark.parametrize("title, write", [
    ("Image folders", lambda root, rows: write_image_folder(root / "data" / "pets", rows)),
    ("Hugging Face datasets", lambda root, rows: write_hf_dataset(root / "data" / "flowers", rows)),
    ("WebDataset shards", lambda root, rows: write_tar_shards(root / "data" / "shards", rows, per_shard=4)),
])
def test_snippet_runs_as_written(title, write, tmp_path, monkeypatch):
    if title != "Image folders":
        pytest.importorskip("datasets")
    rows = tiny_images(12)
    write(tmp_path, rows)
    text = _subsection(title)
    (snippet,), (python,) = _blocks(text, "yaml"), _blocks(text, "python")
    source = yaml.safe_load(snippet)["source"]
    data = load_source(source, base_dir=tmp_path, where="source")
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(python, f"docs/data.md {title}", "exec"), {})
    assert out.getvalue().startswith("12 ")
    assert len(data.labels) == 12 and sorted(map(str, set(data.labels))) in (["blue", "green", "red"], ["0", "1", "2"])


def test_retrieval_snippet_runs_as_written(tmp_path, monkeypatch):
    pytest.importorskip("datasets")
    from format_fixtures import write_captions
    from vertebrae.data.declared.retrieval import load_retrieval_source

    rows = tiny_images(12)
    write_image_folder(tmp_path / "data" / "pets", rows)
    write_captions(tmp_path / "data", rows)
    text = _subsection("Retrieval from these formats")
    (snippet,), (python,) = _blocks(text, "yaml"), _blocks(text, "python")
    data = load_retrieval_source(yaml.safe_load(snippet)["source"], base_dir=tmp_path, where="source")
    assert (len(data.gallery_ids), len(data.query_ids), len(data.records)) == (12, 3, 12)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(python, "docs/data.md retrieval", "exec"), {})
    assert out.getvalue() == "12 3\n"
