"""Which vertebrae wrote a report: its version and, when it runs from a git checkout, the commit.

``software()`` is ``{"vertebrae": <version>}`` for an installed wheel and adds ``"git_revision"`` (the full commit
hash) and ``"git_dirty"`` (tracked files differ from that commit) when the package's parent folder is a git checkout
and ``git`` answers there. It is computed once per process (two short ``git`` calls) and never raises: no git, or a
checkout git refuses (another user's), leaves the git keys out. ``software_line`` is its one-line form for Markdown.
"""

from __future__ import annotations

import functools
import subprocess
from importlib.metadata import version
from pathlib import Path
from typing import Any

from vertebrae import __version__


def _git(root: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


@functools.lru_cache(maxsize=None)
def installed_version(distribution: str) -> str:
    """The installed version of ``distribution``, read once per process: reading a package's metadata costs
    ~1.5 ms, and the recipes of a plan and the fits of a score job ask for the same few versions hundreds or
    thousands of times (a 1,000-candidate plan: twice per candidate)."""
    return version(distribution)


@functools.lru_cache(maxsize=1)
def _software() -> tuple[tuple[str, Any], ...]:
    info: dict[str, Any] = {"vertebrae": __version__}
    root = Path(__file__).resolve().parents[2]  # vertebrae/core/provenance.py -> the folder holding vertebrae/
    if (root / ".git").exists() and (root / "pyproject.toml").is_file():
        revision = _git(root, "rev-parse", "HEAD")
        if revision:
            status = _git(root, "status", "--porcelain", "--untracked-files=no")
            info["git_revision"] = revision
            info["git_dirty"] = bool(status)
    return tuple(info.items())


def software() -> dict[str, Any]:
    """``{"vertebrae": version[, "git_revision": commit, "git_dirty": bool]}`` of the running vertebrae."""
    return dict(_software())


def software_line(info: dict[str, Any] | None = None) -> str:
    """``Written by vertebrae 0.1.0 (git 0123abcd4567, uncommitted changes).`` (the git part only from a checkout)."""
    info = software() if info is None else info
    git = ""
    if info.get("git_revision"):
        git = f" (git {info['git_revision'][:12]}{', uncommitted changes' if info.get('git_dirty') else ''})"
    return f"Written by vertebrae {info['vertebrae']}{git}."


__all__ = ["software", "software_line"]
