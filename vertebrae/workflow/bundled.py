"""The Snakemake workflow vertebrae carries: its Snakefile, rules, report captions, schemas, profiles and env files.

They are package data under ``vertebrae/_workflow/`` (``Snakefile``, ``workflow/``, ``envs/``, ``profiles/``), found
through ``importlib.resources``. In a checkout those four entries are symlinks to the repository's own top-level
files, so an editable install runs the repository's ``Snakefile`` itself (one source of truth); a wheel carries
copies of their files. ``workflow_dir()`` is the folder that holds the ``Snakefile`` (links resolved);
``snakefile()`` is the file a ``vertebrae run`` or a host workflow's ``module`` names:

    from vertebrae.workflow.bundled import snakefile

    module vertebrae:
        snakefile: snakefile()
        config: config

    use rule * from vertebrae as vertebrae_*

``profile_args`` resolves the ``--profile NAME`` arguments of ``vertebrae run``: a profile the user has (a path, or a
folder NAME in the current directory or in Snakemake's user or site config folders, where Snakemake itself looks)
wins; otherwise the packaged ``profiles/NAME`` (``slurm``) is used by its path.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from importlib.resources import files
from pathlib import Path

from vertebrae.core.errors import VertebraeError

RESOURCE = "_workflow"


def workflow_dir() -> Path:
    """The folder holding the workflow's ``Snakefile`` (beside it: ``workflow/``, ``envs/``, ``profiles/``)."""
    root = files("vertebrae") / RESOURCE
    path = (Path(str(root)) / "Snakefile").resolve()  # in a checkout: the repository's own
    if not isinstance(root, Path) or not path.is_file():
        raise VertebraeError(f"the workflow's Snakefile is not at {root}/Snakefile: vertebrae is installed without its "
                             "workflow files (reinstall it from a wheel or a checkout: pip install vertebrae)")
    return path.parent


def snakefile() -> Path:
    """The workflow's ``Snakefile`` (in a checkout: the repository's own)."""
    return workflow_dir() / "Snakefile"


def packaged_profile(name: str) -> Path | None:
    """The packaged profile folder ``profiles/NAME`` (``default``, ``slurm``, ``kubernetes``), or None when there is
    none: a folder holding ``config.yaml`` or a versioned ``config.vX+.yaml``, the files Snakemake reads."""
    path = workflow_dir() / "profiles" / name
    if not name or "/" in name or not path.is_dir():
        return None
    return path if (path / "config.yaml").is_file() or any(path.glob("config.v*+.yaml")) else None


def profile_folders() -> tuple[Path, ...]:
    """Snakemake's user and site config folders, where it looks for a profile by name (``platformdirs``, as
    Snakemake's ``get_appdirs``); none where platformdirs is missing."""
    try:
        from platformdirs import AppDirs  # a Snakemake dependency, installed wherever Snakemake is
    except ImportError:  # pragma: no cover - Snakemake itself would fail first
        return ()
    dirs = AppDirs("snakemake", "snakemake")
    return Path(dirs.user_config_dir), Path(dirs.site_config_dir)


def user_profile_exists(name: str) -> bool:
    """Whether Snakemake finds a profile ``name`` of the user's: a path, or a folder of that name in the current
    directory or in Snakemake's user or site config folders (``profile_folders``)."""
    return os.path.exists(name) or any((folder / name).exists() for folder in profile_folders())


def profile_args(args: Sequence[str]) -> list[str]:
    """Snakemake arguments with each ``--profile NAME`` the user has no profile of, but vertebrae carries one of,
    replaced by that packaged profile's path."""
    out, it = [], iter(args)
    for arg in it:
        if arg == "--":
            out += [arg, *it]
            break
        if arg == "--profile" or arg.startswith("--profile="):
            value = arg.partition("=")[2] if "=" in arg else next(it, None)
            if value is None:
                out.append(arg)
                break
            packaged = None if user_profile_exists(value) else packaged_profile(value)
            out += ["--profile", str(packaged) if packaged else value]
        else:
            out.append(arg)
    return out


__all__ = ["packaged_profile", "profile_args", "profile_folders", "snakefile", "user_profile_exists", "workflow_dir"]
