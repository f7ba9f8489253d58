"""The code blocks of README.md and docs/: found by page, heading and language, and the small stand-ins they run on.

A block is addressed as ``(page, heading, language, n)``: the n-th block of that language under the nearest
heading above it, so a test reads the snippet a user reads (never a retyped copy) and keeps finding it when text
around it moves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workflow_support import REPO

PAGES = [REPO / "README.md", *sorted(p for p in (REPO / "docs").rglob("*.md"))]


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository root
    line: int  # of the opening fence, 1-based
    heading: str  # the nearest heading above it, without its #s
    lang: str
    n: int  # its position among the blocks of this language under this heading
    text: str

    @property
    def key(self) -> tuple[str, str, str, int]:
        return self.page, self.heading, self.lang, self.n

    def __str__(self) -> str:
        return f"{self.page}:{self.line} ({self.lang} block {self.n} under {self.heading!r})"


def blocks(page: Path | None = None) -> list[Block]:
    """Every fenced block of ``page`` (default: README.md and every page of docs/)."""
    found: list[Block] = []
    for path in [page] if page else PAGES:
        heading, counts, open_at, lang, body = "", {}, None, "", []
        rel = str(path.relative_to(REPO))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if open_at is None:
                if line.startswith("```"):
                    open_at, lang, body = number, line[3:].strip(), []
                elif match := re.match(r"#+ (.*)", line):
                    heading, counts = match.group(1).strip(), {}
            elif line.startswith("```"):
                n = counts.get(lang, 0)
                counts[lang] = n + 1
                found.append(Block(rel, open_at, heading, lang, n, "\n".join(body) + "\n"))
                open_at = None
            else:
                body.append(line)
    return found


def block(page: str, heading: str, lang: str, n: int = 0) -> str:
    """The text of one block; a clear failure naming what is missing when the page no longer has it."""
    for b in blocks(REPO / page):
        if b.key == (page, heading, lang, n):
            return b.text
    raise AssertionError(f"{page}: no {lang} block {n} under the heading {heading!r}")


# ------------------------------------------------------------------------------------------- stand-ins
def separated(rows_per_class: int = 30, classes: int = 3, dims: int = 6, seed: int = 0):
    """Well separated Gaussian classes: (embeddings, labels, ids)."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.array(["a", "b", "c", "d", "e"][:classes]), rows_per_class)
    centres = 4.0 * rng.normal(size=(classes, dims))
    embeddings = centres[np.repeat(np.arange(classes), rows_per_class)] + rng.normal(size=(len(labels), dims))
    ids = np.array([f"row-{i:03d}" for i in range(len(labels))])
    return embeddings, labels, ids


def letter_counts(rows) -> np.ndarray:
    """A text (or text-as-image) encoder for branch stand-ins: counts of each letter a-z, plus one."""
    out = np.ones((len(rows), 26))
    for i, text in enumerate(rows):
        for char in str(text).lower():
            if "a" <= char <= "z":
                out[i, ord(char) - 97] += 1.0
    return out


def my_metric(embeddings, labels, *, target_metadata=None, groups=None, seed=None) -> float:
    """A custom metric as the labelled guide declares one: the spread of the embedding, a float."""
    return float(np.asarray(embeddings).std())
