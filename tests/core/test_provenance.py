"""The vertebrae version and git revision a report names (issue 34, item 4)."""

from __future__ import annotations

import subprocess

import vertebrae
from vertebrae.core.provenance import software, software_line
from workflow_support import REPO


def test_from_a_checkout_the_software_names_the_version_and_the_commit():
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    info = software()
    assert info["vertebrae"] == vertebrae.__version__ and info["git_revision"] == head
    assert isinstance(info["git_dirty"], bool)


def test_the_software_line():
    assert software_line({"vertebrae": "1.2.3"}) == "Written by vertebrae 1.2.3."
    assert software_line({"vertebrae": "1.2.3", "git_revision": "a" * 40, "git_dirty": False}) == (
        "Written by vertebrae 1.2.3 (git aaaaaaaaaaaa).")
