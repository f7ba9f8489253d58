"""Every code example of the behaviour spec (../shared/spec/*.md) runs as written against the package.

The examples are read from the spec files themselves: fenced ```python blocks, and, where a file is rendered
without fences (spec/scoring.md), the runs of lines that open with an import and continue while they are Python.
Each example runs unedited in a namespace that holds small stand-ins for the names it leaves to the user (its
images, labels, embeddings, extractors); a name it takes from an earlier example of the same file (``protocol``,
``ZeroShotBenchmark``) comes from running that earlier example first. Image-text examples use a tiny open_clip
model built offline (tests/tiny_models.py). Afterwards every object the example defines is checked: results are
ranked, finite and strict JSON; configs round-trip through ``to_dict``; a benchmark it builds but does not run is run.
"""

from __future__ import annotations

import ast
import builtins
import json
import math
import os
import re
from dataclasses import is_dataclass
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _spec_dir() -> Path | None:
    for candidate in (os.environ.get("VERTEBRAE_SPEC_DIR"), ROOT.parent / "shared" / "spec", ROOT / "shared" / "spec"):
        if candidate and Path(candidate).is_dir() and any(Path(candidate).glob("*.md")):
            return Path(candidate)
    return None


SPEC = _spec_dir()
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
ANY_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
STARTS_EXAMPLE = re.compile(r"^(from|import)\s+[A-Za-z_]")
CONTINUES_EXAMPLE = re.compile(r"^(from\s|import\s|def\s|class\s|@|[A-Za-z_][\w.]*\s*(=|\(|\[))")


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


def _paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n[ \t]*\n", text) if p.strip()]


def plain_examples(text: str) -> list[str]:
    """Unfenced examples: a paragraph opening with an import, then the paragraphs after it that read as code."""
    examples, current = [], None
    for paragraph in _paragraphs(ANY_FENCE.sub("\n", text)):
        first = paragraph.lstrip("\n").splitlines()[0]
        if current is not None and CONTINUES_EXAMPLE.match(first) and _parses(current + "\n\n" + paragraph):
            current += "\n\n" + paragraph
            continue
        if current is not None:
            examples.append(current)
            current = None
        if STARTS_EXAMPLE.match(first) and _parses(paragraph):
            current = paragraph
    if current is not None:
        examples.append(current)
    return examples


def spec_examples(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return [block.rstrip() + "\n" for block in FENCE.findall(text)] + [block + "\n" for block in plain_examples(text)]


def _collect() -> list[tuple[str, int, str]]:
    if SPEC is None:
        return []
    return [(path.name, i, code) for path in sorted(SPEC.glob("*.md")) for i, code in enumerate(spec_examples(path))]


EXAMPLES = _collect()
#: the examples the spec holds today, by file; a new or removed example must be looked at (and stood in for)
EXPECTED = {"retrieval.md": 0, "scoring.md": 6, "zero-shot.md": 2}
#: examples that fail for a missing feature another item of issue 17 builds: {(file, index): reason}
XFAIL: dict[tuple[str, int], str] = {}


# ---------------------------------------------------------------------------------------------------------
# names the examples leave to the user


def _free_names(code: str) -> set[str]:
    """Names an example reads without defining them itself."""
    tree = ast.parse(code)
    stored, loaded = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (stored if isinstance(node.ctx, (ast.Store, ast.Del)) else loaded).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stored.add(node.name)
        elif isinstance(node, ast.arg):
            stored.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            stored.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return loaded - stored - set(dir(builtins))


def _defined_names(code: str) -> list[str]:
    """Top-level names an example assigns (the objects it builds)."""
    names = []
    for node in ast.parse(code).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        names += [t.id for t in targets if isinstance(t, ast.Name)]
    return names


IMAGE_LABELS = ["cat", "dog", "bird"] * 4


def _images() -> np.ndarray:
    """12 small RGB images, uint8 N x H x W x C, one colour cast per class."""
    rng = np.random.default_rng(0)
    base = np.array([[200, 60, 40], [40, 180, 60], [50, 70, 210]])[np.arange(12) % 3]
    pixels = base[:, None, None, :] + rng.normal(0, 25, size=(12, 32, 32, 3))
    return np.clip(pixels, 0, 255).astype(np.uint8)


def image_colour(inputs) -> np.ndarray:
    """A stand-in image encoder: mean colour per channel, plus a constant (never a zero row)."""
    rows = [np.asarray(image, dtype=np.float64).reshape(-1, 3).mean(axis=0) / 255.0 for image in inputs]
    return np.column_stack([np.asarray(rows), np.ones(len(rows))])


COLOUR_WORDS = {"cat": [1.0, 0.2, 0.1], "dog": [0.1, 1.0, 0.2], "bird": [0.1, 0.2, 1.0]}


def text_colour(inputs) -> np.ndarray:
    """A stand-in text encoder into the same 4-d space: the colour of the class named in the prompt."""
    rows = []
    for text in inputs:
        colour = next((c for word, c in COLOUR_WORDS.items() if word in text), [0.3, 0.3, 0.3])
        rows.append([*colour, 1.0])
    return np.asarray(rows)


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory):
    """Lazily built stand-ins, by name."""
    from vertebrae import BenchmarkDataset, DatasetIdentity
    from vertebrae.extractors import PrecomputedExtractor
    from vertebrae.extractors.callable import CallableRetrievalExtractor

    cache = {}

    def open_clip_model():
        if "clip" not in cache:
            pytest.importorskip("open_clip")
            import tiny_models
            from vertebrae.extractors.open_clip import OpenCLIPExtractor

            folder = tiny_models.build_open_clip(tmp_path_factory.mktemp("spec-clip") / "clip")
            cache["clip"] = OpenCLIPExtractor("tiny_clip", f"local-dir:{folder}", device="cpu", batch_size=8)
        return cache["clip"]

    def labelled_dataset():
        rng = np.random.default_rng(1)
        labels = np.repeat(["a", "b", "c"], 20)
        centres = rng.normal(0, 3, size=(3, 8))
        embeddings = centres[np.repeat(np.arange(3), 20)] + rng.normal(0, 1, size=(60, 8))
        return BenchmarkDataset.from_embeddings(embeddings, labels, identity=DatasetIdentity.declared("spec-toy", "1"))

    makers = {
        "images": _images,
        "labels": lambda: list(IMAGE_LABELS),
        "clip_extractor": open_clip_model,
        "openclip": open_clip_model,
        "custom_adapter": lambda: CallableRetrievalExtractor("colour", image_colour, text_colour,
                                                             cache_identity="spec-colour-v1"),
        "query_embeddings": lambda: np.random.default_rng(2).normal(size=(1, 8)),
        "gallery_embeddings": lambda: np.random.default_rng(3).normal(size=(1, 8)),
        "dataset": labelled_dataset,
        "extractor": lambda: PrecomputedExtractor("candidate"),
    }
    return makers


# ---------------------------------------------------------------------------------------------------------
# checks of what an example built


def _check_result(result) -> None:
    ranked = result.ranked_results()
    assert ranked, "no ranked candidate"
    for item in ranked:
        assert isinstance(item.primary_score, float) and math.isfinite(item.primary_score), item.name
    json.dumps(result.to_dict(), allow_nan=False)
    assert result.RENDER(result).strip()


def _check(name: str, value):
    """Check one object an example defined: the result it is or produces (a benchmark is run), True for a checked
    config, None for something this test does not check by itself (a user function, checked through its user)."""
    if hasattr(value, "ranked_results"):
        _check_result(value)
        return value
    if callable(getattr(value, "run", None)) and not isinstance(value, type):
        result = value.run()
        _check_result(result)
        return result
    if is_dataclass(value) and hasattr(value, "to_dict"):
        data = value.to_dict()
        json.dumps(data, allow_nan=False)
        if hasattr(type(value), "from_dict"):
            assert type(value).from_dict(data) == value, f"{name} does not round-trip through to_dict/from_dict"
        return True
    return None


def _scores(result) -> dict[str, float]:
    return {item.name: item.primary_score for item in result.candidates}


def _check_retrieval(ns, checked):
    # one query, one relevant gallery item: it ranks first, NDCG@10 = 1
    assert _scores(checked["result"]) == {"candidate": 1.0}


def _check_custom_metric(ns, checked):
    item = checked["benchmark"].ranked_results()[0]
    assert item.primary_metric_name == "my_metric" and item.primary_score == 0.87
    assert set(item.metrics) == {"overlap", "my_metric"} and 0.0 <= item.overlap.score <= 1.0


def _check_zero_shot(ns, checked):
    assert ns["dataset"].modality == "image" and ns["dataset"].n_rows == len(IMAGE_LABELS)
    assert len(ns["protocol"].prompt_rows()) == 2 * 3  # two templates x three classes
    assert set(_scores(checked["result"])) == {"tiny_clip"} and 0.0 <= _scores(checked["result"])["tiny_clip"] <= 1.0


def _check_candidates(ns, checked):
    scores = _scores(checked["result"])
    assert set(scores) == {"tiny_clip", "colour"}
    assert scores["colour"] == 1.0  # the stand-in adapter encodes each class's colour on both branches


#: what each example's result must show beyond being well-formed
EXPECT = {("scoring.md", 4): _check_retrieval, ("scoring.md", 5): _check_custom_metric,
          ("zero-shot.md", 0): _check_zero_shot, ("zero-shot.md", 1): _check_candidates}


def _run(file: str, index: int, makers, namespace: dict | None = None) -> dict:
    """Run example ``index`` of ``file`` as written, with the stand-ins and earlier examples it needs."""
    code = next(c for f, i, c in EXAMPLES if f == file and i == index)
    namespace = {"__name__": f"spec_example_{index}"} if namespace is None else namespace
    missing = _free_names(code) - set(namespace)
    earlier = {}
    for name in sorted(missing):
        if name in makers:
            namespace[name] = makers[name]()
        else:
            for previous in range(index - 1, -1, -1):
                if previous not in earlier:
                    earlier[previous] = _run(file, previous, makers)
                if name in earlier[previous]:
                    namespace[name] = earlier[previous][name]
                    break
            else:
                raise AssertionError(f"{file} example {index} needs {name!r}: no stand-in and no earlier example defines it")
    exec(compile(code, f"{file}[example {index}]", "exec"), namespace)  # noqa: S102 - the spec's own example
    return namespace


# ---------------------------------------------------------------------------------------------------------
# tests


def test_the_spec_examples_are_found():
    if SPEC is None:
        pytest.skip("the spec folder (../shared/spec or $VERTEBRAE_SPEC_DIR) is not present in this checkout")
    found = {path.name: 0 for path in SPEC.glob("*.md")}
    for file, _, _ in EXAMPLES:
        found[file] += 1
    assert found == EXPECTED


def test_unfenced_examples_stop_at_prose():
    text = ("Intro text:\n\nfrom vertebrae import X\n\nconfig = X(\n    a=1,\n)\n\nKey fields:\n\n  • a: one\n\n"
            "from vertebrae import Y\n\ny = Y()\n\nY always runs and is available.\n")
    assert plain_examples(text) == ["from vertebrae import X\n\nconfig = X(\n    a=1,\n)", "from vertebrae import Y\n\ny = Y()"]
    assert _free_names("from m import f\nx = f(images, labels=labels)\ndef g(a, *, b=None):\n    return a\n") == {"images", "labels"}


def _params():
    return [pytest.param(file, index, id=f"{file}:{index}",
                         marks=[pytest.mark.xfail(strict=True, reason=XFAIL[(file, index)])] if (file, index) in XFAIL else [])
            for file, index, _ in EXAMPLES]


@pytest.mark.parametrize("file,index", _params())
def test_spec_example_runs_as_written(file, index, stand_ins):
    code = next(c for f, i, c in EXAMPLES if f == file and i == index)
    namespace = _run(file, index, stand_ins)
    defined = _defined_names(code)
    assert defined, "an example that defines nothing"
    checked = {name: found for name in defined if (found := _check(name, namespace[name])) is not None}
    assert checked, f"nothing checkable among {defined}"
    if (file, index) in EXPECT:
        EXPECT[(file, index)](namespace, checked)
