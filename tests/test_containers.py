"""The job image (issue 47, part 3): envs/Containerfile and envs/vertebrae.def parse and install this version's wheel,
and the workflow's `container:` (config `container`, default the image of this version) is what a
`--software-deployment-method apptainer` dry run names.

No image is built here (no container builder on the test machines; building is a documented step, docs/cloud.md):
the definitions are read by small parsers of their formats' rules, and the dry run finds `apptainer` as a stub that
records its calls (Snakemake asks it for its version; nothing may be pulled or run).
"""

from __future__ import annotations

import os
import re
import shlex
import tomllib
from pathlib import Path

import pytest

import vertebrae
from workflow_support import REPO, snakemake, three_files_config, write_config

CONTAINERFILE = REPO / "envs" / "Containerfile"
APPTAINER_DEF = REPO / "envs" / "vertebrae.def"
VERSION = vertebrae.__version__
# the wheel `python -m pip wheel --no-deps -w dist .` writes (the project name's wheel form, a pure-Python wheel)
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
WHEEL = f"{re.sub(r'[-_.]+', '_', PROJECT['name']).lower()}-{VERSION}-py3-none-any.whl"
DEFAULT_IMAGE = f"docker://ghcr.io/vertebrae/vertebrae:{VERSION}"

# https://docs.docker.com/reference/dockerfile/ (MAINTAINER is deprecated: not accepted here)
DOCKERFILE_KEYWORDS = {"ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK", "LABEL",
                       "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR"}
# https://apptainer.org/docs/user/main/definition_files.html
APPTAINER_SECTIONS = {"arguments", "setup", "files", "environment", "post", "runscript", "startscript", "test",
                      "labels", "help", "app"}
APPTAINER_HEADER_KEYS = {"Bootstrap", "From", "Stage", "Fingerprints", "IncludeCmd", "MirrorURL", "OSVersion",
                         "Include", "Library", "Registry", "Namespace"}


def containerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) of each instruction, after the Dockerfile rules: parser directives and comments are
    whole lines starting with #, a line ending in a backslash continues on the next, keywords are case-insensitive."""
    out, pending = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue  # a comment (or a directive: only before the first instruction, where it is a comment too)
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        instruction, pending = pending + stripped, ""
        keyword, _, args = instruction.partition(" ")
        out.append((keyword.upper(), args.strip()))
    assert not pending, "the Containerfile ends inside a continued line"
    return out


def apptainer_definition(text: str) -> tuple[dict[str, str], dict[str, list[str]]]:
    """(header keys, section name -> its lines) of an Apptainer definition file."""
    header, sections, current = {}, {}, None
    for line in text.splitlines():
        if line.strip().startswith("#") or not line.strip():
            continue
        if match := re.match(r"^%(\w+)\b(.*)$", line):
            current = match.group(1)
            assert current not in sections, f"section %{current} given twice"
            sections[current] = []
        elif current is None:
            key, sep, value = line.partition(":")
            assert sep and key.strip() in APPTAINER_HEADER_KEYS, f"not a header line: {line!r}"
            header[key.strip()] = value.strip()
        else:
            sections[current].append(line.strip())
    return header, sections


def _args(instructions, keyword) -> list[str]:
    return [args for kw, args in instructions if kw == keyword]


def _substitute(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\{\{\s*(\w+)\s*\}\}", lambda m: values[m.group(1) or m.group(2)], text)


def test_the_containerfile_is_made_of_dockerfile_instructions_and_installs_this_versions_wheel():
    instructions = containerfile_instructions(CONTAINERFILE.read_text(encoding="utf-8"))
    assert {kw for kw, _ in instructions} <= DOCKERFILE_KEYWORDS, [kw for kw, _ in instructions]
    first = next(kw for kw, _ in instructions if kw != "ARG")
    assert first == "FROM" and len(_args(instructions, "FROM")) == 1  # one stage, ARGs only before it
    args = dict(arg.split("=", 1) for arg in _args(instructions, "ARG"))
    assert args["VERTEBRAE_VERSION"] == VERSION, "envs/Containerfile: set ARG VERTEBRAE_VERSION to the new version"
    extras = args["EXTRAS"].split(",")
    assert "workflow" in extras and set(extras) <= set(PROJECT["optional-dependencies"]), extras
    (copy,) = _args(instructions, "COPY")
    source, target = shlex.split(_substitute(copy, args))
    assert source == WHEEL  # the build context is dist/, the wheel's folder
    (run,) = _args(instructions, "RUN")
    assert f'pip install --no-cache-dir "{target}{WHEEL}[{args["EXTRAS"]}]"' in _substitute(run, args)
    labels = shlex.split(" ".join(_args(instructions, "LABEL")))
    assert f"org.opencontainers.image.version={VERSION}" in [_substitute(label, args) for label in labels]
    # the build command it documents tags the workflow's default image
    assert f"-t {DEFAULT_IMAGE.removeprefix('docker://')} dist" in CONTAINERFILE.read_text(encoding="utf-8")


def test_the_apptainer_definition_has_its_header_and_sections_and_installs_the_same_wheel():
    header, sections = apptainer_definition(APPTAINER_DEF.read_text(encoding="utf-8"))
    assert header.get("Bootstrap") == "docker" and "From" in header
    assert {name for name in sections} <= APPTAINER_SECTIONS and {"files", "post", "arguments"} <= set(sections)
    arguments = dict(line.split("=", 1) for line in sections["arguments"])
    assert arguments["VERTEBRAE_VERSION"] == VERSION, "envs/vertebrae.def: set VERTEBRAE_VERSION to the new version"
    text = APPTAINER_DEF.read_text(encoding="utf-8")
    assert set(re.findall(r"\{\{\s*(\w+)\s*\}\}", text)) <= set(arguments)  # every template variable has a default
    (files,) = sections["files"]
    source, target = _substitute(files, arguments).split()
    assert source == f"dist/{WHEEL}"
    assert f'pip install --no-cache-dir "{target}[{arguments["EXTRAS"]}]"' in _substitute(
        " ".join(sections["post"]), arguments)
    # the same image as the Containerfile: its base and its extras
    instructions = containerfile_instructions(CONTAINERFILE.read_text(encoding="utf-8"))
    containerfile_args = dict(arg.split("=", 1) for arg in _args(instructions, "ARG"))
    assert header["From"] == _substitute(_args(instructions, "FROM")[0], containerfile_args)
    assert arguments["EXTRAS"] == containerfile_args["EXTRAS"]
    assert f"org.opencontainers.image.version {VERSION}" in [_substitute(x, arguments) for x in sections["labels"]]


def test_the_containerfile_parser_finds_an_unknown_keyword_and_an_unfinished_line():
    assert ("RUNN", "echo") in containerfile_instructions("FROM python:3.11\nRUNN echo\n")
    with pytest.raises(AssertionError, match="continued line"):
        containerfile_instructions("FROM python:3.11\nRUN echo \\\n")


def test_the_apptainer_parser_refuses_a_header_line_that_is_not_one():
    with pytest.raises(AssertionError, match="not a header line"):
        apptainer_definition("Bootstrap: docker\nFrom: python:3.11\nRUN echo\n%post\n    echo\n")


# --- the `container:` directive ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_run(tmp_path_factory) -> tuple[Path, dict]:
    """A working folder holding issue 18's three-files config (precomputed embeddings: planned in a blink)."""
    root = tmp_path_factory.mktemp("three-files")
    config = three_files_config(root)
    write_config(root, config)
    return root, config


@pytest.fixture(scope="module")
def apptainer_stub(tmp_path_factory):
    """A folder whose `apptainer` answers `--version` as Apptainer does and records every call."""
    stubs = tmp_path_factory.mktemp("stubs")
    calls = stubs / "calls.log"
    stub = stubs / "apptainer"
    stub.write_text(f'#!/bin/sh\necho "$*" >> "{calls}"\n'
                    '[ "$1" = "--version" ] && { echo "apptainer version 1.3.4"; exit 0; }\nexit 1\n')
    stub.chmod(0o755)
    return stubs, calls


def test_an_apptainer_dry_run_names_this_versions_image_and_pulls_nothing(small_run, apptainer_stub, monkeypatch):
    """Without `container` in the config, the image of the installed version (a configured one is used as given:
    `snakemake --config container=...`, checked by hand; one dry run here keeps the suite's time)."""
    root, _ = small_run
    stubs, calls = apptainer_stub
    monkeypatch.setenv("PATH", f"{stubs}{os.pathsep}{os.environ['PATH']}")
    proc = snakemake(root, "-n", "--software-deployment-method", "apptainer", "--quiet", "rules")
    assert f"Singularity image {DEFAULT_IMAGE} will be pulled." in proc.stdout + proc.stderr
    assert calls.read_text().split("\n") == ["--version", ""]  # asked for its version, nothing pulled or run


def test_the_container_key_is_validated_and_part_of_no_fingerprint(small_run, monkeypatch):
    from vertebrae.core.errors import ConfigError
    from vertebrae.planning import plan
    from vertebrae.planning.config import validate_config

    root, config = small_run
    with pytest.raises(ConfigError, match=r"config key container: 'my image\.sif' does not match"):
        validate_config({**config, "container": "my image.sif"})
    monkeypatch.chdir(root)  # the config's paths are relative to its folder
    plain, boxed = plan(config), plan({**config, "container": "/images/vertebrae-custom.sif"})
    assert plain.planned() == boxed.planned() and len(plain.planned()) > 10
    assert [plain.spec_json(fp) for fp in plain.planned()] == [boxed.spec_json(fp) for fp in boxed.planned()]


# --- docs/cloud.md: the layout and cost of a 1M x 10M retrieval benchmark ------------------------------------------

def test_the_cloud_cost_script_runs_as_written_and_computes_as_the_workflow_does():
    """The page's script runs; its memory requests and shard count are the workflow's own (the library's functions,
    not the page's copies); its measured inputs are the ones docs/workflow.md reports; its table is what it prints."""
    import contextlib
    import dataclasses
    import io

    from docs_support import block
    from vertebrae.planning.resources import AUTO_MAX_SHARDS, auto_shards, partial_mem_mb
    from vertebrae.scoring.retrieval.config import RetrievalConfig

    page = "docs/cloud.md"
    text = block(page, "A 1,000,000 x 10,000,000 retrieval benchmark on a cluster", "python")
    namespace, printed = {}, io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(text, page, "exec"), namespace)
    ns = type("Script", (), namespace)
    for max_dense_bytes in (2_000_000_000, 20_000_000_000):
        config = dataclasses.asdict(RetrievalConfig(max_dense_bytes=max_dense_bytes))
        for q_rows, g_rows in ((10_000, 100_000), (100_000, 1_000_000), (7, 13)):
            assert ns.partial_mem_mb(q_rows, g_rows, max_dense_bytes) == partial_mem_mb(config, q_rows, g_rows)

    class AModel:  # what auto_shards asks of an extractor: a model has weight files
        def weight_files(self):
            return []

    assert ns.EMBED_SHARDS == auto_shards(AModel(), ns.QUERIES) == auto_shards(AModel(), ns.GALLERY) == AUTO_MAX_SHARDS
    workflow_md = (REPO / "docs" / "workflow.md").read_text(encoding="utf-8")
    assert "about 1.6e10 per second in the float32 scan" in workflow_md and ns.SCAN_MACS_PER_CORE_S == 1.6e10 / 2
    assert "a job start costs 3-9 s here" in workflow_md and ns.JOB_START_S == 9
    assert "the protocol JSON is 96 MB" in workflow_md and "50 relevant items each" in (
        REPO / "bench" / "retrieval_scale.py").read_text(encoding="utf-8")
    # the page's table is the script's output, row by row
    rows = [ns.fan_out(100, 100), ns.fan_out(10, 10, max_dense_bytes=2e10)]
    assert [str(row) for row in rows] == printed.getvalue().splitlines()[1:]
    doc = (REPO / page).read_text(encoding="utf-8")
    for row in rows:
        cells = [f"{row['partial jobs']:,}", "{:,} + {:,}".format(*row["rows per job"]), f"{row['mem_mb']:,}",
                 f"{row['GB read per job']}", f"{row['seconds per job']:,}", f"{row['pods per node']}",
                 f"{row['CPU node-hours']}", f"{row['TB read']}", f"{row['merge job reads GB']} GB",
                 f"{row['TB read on a shared disk']}"]
        assert re.search(r"^\| " + re.escape(row["split"]) + r"[^|]* \| " + r" \| ".join(map(re.escape, cells)) + " |$",
                         doc, re.M), (row, cells)
