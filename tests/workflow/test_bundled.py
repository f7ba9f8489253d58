"""Issue 34: the workflow travels in the wheel. A wheel is built (from its sdist, as ``python -m build`` does) and
installed into a fresh virtual environment; from an empty folder outside the checkout its ``vertebrae run`` gives the
same report as the checkout's, the user commands work there, and ``--profile slurm`` finds the packaged profile
unless the user has one. A host workflow imports the workflow as a Snakemake module.

Speed: the fresh environment gets the wheel alone (``--no-deps``, nothing downloaded: offline) and reaches its
dependencies through a ``.pth`` line naming the test environment's site-packages folder. A path line adds that folder
only: its ``.pth`` files, among them the editable install's link to this checkout, are not processed, and the wheel's
own folder comes first; ``test_the_installed_vertebrae_is_the_wheel`` checks that no path of the checkout is
importable there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

from vertebrae.workflow.bundled import packaged_profile, profile_args, snakefile, workflow_dir
from workflow_support import BIN, REPO, USER_CONFIG, comparable, unactivated_env, written_report

CONFIG = {**USER_CONFIG, "embedding": {"batch_size": 150}}  # one shard: the fewest jobs that hold every stage
REPORT = "results/reports/my_iris/report.json"
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "Snakefile", "workflow", "envs", "profiles", "vertebrae")
HOST_SNAKEFILE = """\
from vertebrae.workflow.bundled import snakefile

module vertebrae:
    snakefile: snakefile()
    config: config

use rule * from vertebrae as vertebrae_*
"""


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if check:
        logs = "".join(f"{log}: {log.read_text()[-1000:]}" for log in sorted(cwd.glob("results/logs/*/*.log")))
        assert proc.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}{logs}"
    return proc


def user_folder(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "my.yaml").write_text(yaml.safe_dump(CONFIG, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from the sdist of a copy of the checkout's sources (no build isolation: offline)."""
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    src.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(REPO / name, src / name)
    hook = "from setuptools import build_meta; import sys; print(getattr(build_meta, sys.argv[1])(sys.argv[2]))"
    sdist = root / "sdist" / run([sys.executable, "-c", hook, "build_sdist", str(root / "sdist")], src).stdout.split()[-1]
    with tarfile.open(sdist) as archive:
        archive.extractall(root / "unpacked", filter="data")
    (unpacked,) = (root / "unpacked").iterdir()
    name = run([sys.executable, "-c", hook, "build_wheel", str(root / "dist")], unpacked).stdout.split()[-1]
    return root / "dist" / name


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh virtual environment holding the wheel; returns its bin folder."""
    venv = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], venv)
    python = venv / "bin" / "python"
    purelib = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], venv).stdout.strip()
    Path(purelib, "test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "--no-index",
         str(wheel)], venv)
    return venv / "bin"


def installed_env(bin_dir: Path) -> dict[str, str]:
    """A shell's environment with the fresh environment's bin folder alone on PATH (not the test's)."""
    env = unactivated_env()
    env.pop("PYTHONPATH", None)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    return env


@pytest.fixture(scope="module")
def checkout_run(tmp_path_factory) -> Path:
    """``vertebrae run my.yaml`` of the checkout's editable install, in an empty folder, up to the report (the
    figures, HTML tables and summary left out: the installed run makes them)."""
    folder = user_folder(tmp_path_factory.mktemp("checkout") / "user")
    run([str(BIN / "vertebrae"), "run", "my.yaml", "--cores", "2", REPORT], folder)
    return folder


@pytest.fixture(scope="module")
def installed_run(installed, tmp_path_factory) -> Path:
    """``vertebrae run my.yaml`` of the installed wheel, in an empty folder outside the checkout."""
    folder = user_folder(tmp_path_factory.mktemp("installed") / "user")
    assert not folder.resolve().is_relative_to(REPO.resolve())
    run([str(installed / "vertebrae"), "run", "my.yaml", "--cores", "2"], folder, installed_env(installed))
    return folder


def test_the_wheel_carries_the_repository_workflow_files(wheel):
    with zipfile.ZipFile(wheel) as archive:
        carried = {name.removeprefix("vertebrae/_workflow/"): archive.read(name) for name in archive.namelist()
                   if name.startswith("vertebrae/_workflow/")}
    expected = ["Snakefile", *(str(p.relative_to(REPO)) for folder in ("workflow", "envs", "profiles")
                               for p in sorted((REPO / folder).rglob("*")) if p.is_file())]
    assert sorted(carried) == sorted(expected)
    assert {"workflow/rules/common.smk", "workflow/report/workflow.rst", "workflow/schemas/config.schema.yaml",
            "envs/vertebrae.yaml", "profiles/default/config.yaml", "profiles/slurm/config.yaml"} <= set(carried)
    for name, data in carried.items():  # the repository's own files, byte for byte: one source of truth
        assert data == (REPO / name).read_bytes(), name


def test_from_a_checkout_the_bundled_workflow_is_the_repository_own():
    assert snakefile() == REPO / "Snakefile" and workflow_dir() == REPO
    assert packaged_profile("slurm") == REPO / "profiles" / "slurm" and packaged_profile("nope") is None
    assert packaged_profile("kubernetes") == REPO / "profiles" / "kubernetes"  # config.v8+.yaml only


def test_profile_args_use_a_packaged_profile_only_where_the_user_has_none(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config-home"))
    slurm = str(REPO / "profiles" / "slurm")
    assert profile_args(["-n", "--profile", "slurm", "--cores", "2"]) == ["-n", "--profile", slurm, "--cores", "2"]
    assert profile_args(["--profile=slurm", "--profile", "mine"]) == ["--profile", slurm, "--profile", "mine"]
    (tmp_path / "config-home" / "snakemake" / "slurm").mkdir(parents=True)  # the user's global profile wins
    assert profile_args(["--profile", "slurm"]) == ["--profile", "slurm"]


def test_the_installed_vertebrae_is_the_wheel(installed, tmp_path):
    probe = ("import json, sys, vertebrae, vertebrae.workflow.bundled as b; "
             "print(json.dumps([vertebrae.__file__, str(b.snakefile()), sys.path]))")
    module, workflow, path = json.loads(run([str(installed / "python"), "-c", probe], tmp_path,
                                            installed_env(installed)).stdout)
    venv = installed.parent.resolve()
    assert Path(module).resolve().is_relative_to(venv) and Path(workflow).is_relative_to(venv)
    # the one vertebrae on the path is the wheel's (the test dependencies' folder, .venv/, may lie in the checkout)
    holders = [entry for entry in path if (Path(entry or tmp_path) / "vertebrae").exists()]
    assert [Path(entry).resolve() for entry in holders] == [Path(module).resolve().parents[1]], path
    version = run([str(installed / "vertebrae"), "--version"], tmp_path, installed_env(installed)).stdout
    assert version.strip() == f"vertebrae {__import__('vertebrae').__version__}"


def test_the_installed_run_gives_the_checkout_report_and_the_user_commands_work(installed, installed_run,
                                                                               checkout_run):
    installed_report, checkout_report = written_report(installed_run, "my_iris"), written_report(checkout_run, "my_iris")
    assert comparable(installed_report) == comparable(checkout_report)
    version = __import__("vertebrae").__version__
    assert installed_report["metadata"]["software"] == {"vertebrae": version}  # a wheel: no git revision
    assert checkout_report["metadata"]["software"]["vertebrae"] == version
    assert len(checkout_report["metadata"]["software"]["git_revision"]) == 40
    assert f"Written by vertebrae {version}." in (installed_run / "results/reports/my_iris/report.md").read_text()
    assert (installed_run / "results/summary/summary.csv").is_file() and (installed_run / "results" / "logs").is_dir()

    env, vertebrae = installed_env(installed), str(installed / "vertebrae")
    assert "jobs to run now: 0" in run([vertebrae, "validate", "my.yaml"], installed_run, env).stdout
    assert "0 to run (everything is up to date)" in run([vertebrae, "status", "my.yaml"], installed_run, env).stdout
    assert "| 1 | raw |" in run([vertebrae, "show", "my.yaml"], installed_run, env).stdout
    assert "every artifact verifies" in run([vertebrae, "verify"], installed_run, env).stdout
    assert "| raw |" in run([vertebrae, "leaderboard"], installed_run, env).stdout

    packaged = installed.parent.resolve()
    dry = run([vertebrae, "run", "my.yaml", "-n", "--profile", "slurm"], installed_run, env)
    assert f"Using profiles {packaged}" in dry.stderr and "_workflow/profiles/slurm and workflow specific" in dry.stderr
    own = installed_run / "slurm"
    own.mkdir()
    (own / "config.yaml").write_text("cores: 1\n", encoding="utf-8")  # the user's own profile folder wins
    assert "Using profiles slurm and workflow" in run([vertebrae, "run", "my.yaml", "-n", "--profile", "slurm"],
                                                      installed_run, env).stderr


def test_a_host_workflow_uses_the_workflow_as_a_module(checkout_run, tmp_path):
    docs = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    assert any(HOST_SNAKEFILE in path.read_text(encoding="utf-8") for path in docs if path.is_file())  # as documented
    folder = user_folder(tmp_path / "host")
    (folder / "Snakefile").write_text(HOST_SNAKEFILE, encoding="utf-8")
    proc = run([sys.executable, "-m", "snakemake", REPORT, "--cores", "2", "--configfile", "my.yaml"], folder,
               dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"))
    assert "rule vertebrae_score:" in proc.stdout + proc.stderr
    assert comparable(written_report(folder, "my_iris")) == comparable(written_report(checkout_run, "my_iris"))


def test_the_extras_install_what_the_adapters_and_sources_import():
    """Every library vertebrae/extractors/ and vertebrae/data/ import (at any depth) is a dependency, or comes with
    ``vertebrae[models]`` or ``vertebrae[formats]`` (import names mapped to distributions by the installed
    environment's own metadata)."""
    import ast
    import re
    import tomllib
    from importlib.metadata import packages_distributions

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]

    def names(requirements: list[str]) -> set[str]:
        return {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}

    declared = names(project["dependencies"]) | names(extras["models"]) | names(extras["formats"])
    imported = set()
    for folder in ("extractors", "data"):
        for path in (REPO / "vertebrae" / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    imported.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"vertebrae", "pandas"}  # pandas: the user's DataFrame
    distributions = packages_distributions()
    missing = {name: distributions.get(name) for name in third_party
               if not {d.lower().replace("_", "-") for d in distributions.get(name, [])} & declared}
    assert not missing, missing
    assert {"torch", "open_clip", "transformers", "timm", "sentence_transformers", "PIL", "pyarrow"} <= third_party
