"""Text from data in a report: one escaping helper per format, used by every renderer.

``markdown_text`` makes any user-provided string (a label, candidate, identity or benchmark name, an id, a prompt,
a warning) plain text in Markdown: no raw HTML (``&``, and ``<`` before a letter, ``/``, ``!`` or ``?``, become entities), no emphasis, code span or strike-through
(``\\ ` * ~`` and a ``_`` not inside a word are backslash-escaped), no table cell break (``|``), no link or image
(``](``/``][`` are broken, ``<`` is an entity, and ``://``, ``www.`` and ``name@host.tld`` are broken so that
no autolink forms), no line break (every line or paragraph separator and control character, C1 ones too, becomes a
space) and no reordering (a bidirectional override, embedding, isolate or mark is written as its escape, ``\\u202e``).
``markdown_plain`` undoes exactly that, for the HTML pages cut from report.md; ``html_text`` is ``html.escape``.
``terminal_text`` is text for a terminal (``vertebrae show``, ``eval``, error lines): every character that is not
printable (an escape sequence's ESC, a bell, a carriage return, C1 controls, bidirectional overrides) is written as its
Python escape (``\\x1b``, ``\\u202e``), so data can neither drive the terminal nor hide or reorder text.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import Any

_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_BIDI = re.compile(r"[\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]")
# "&" always (no entity from data), "<" where a tag, comment or autolink could start; ">" opens nothing and never
# starts a line (a quote)
_ENTITIES = re.compile(r"&|<(?=[A-Za-z/!?])")
_ESCAPED = "\\`*~|"
_LINKS = re.compile(r"\]([(\[])|(?<=:)//|(?<=\b[wW]{3})\.|@(?=[\w-]+\.)")
_PLAIN = re.compile(r"\\([!-/:-@\[-`{-~])|&(amp|lt|gt|#64);")


def _underscore(match: re.Match) -> str:
    """A ``_`` between two word characters stays (it never opens emphasis); any other is escaped."""
    text, i = match.string, match.start()
    inside = 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum()
    return "_" if inside else "\\_"


def _link(match: re.Match) -> str:
    token = match.group(0)
    if token.startswith("]"):
        return "]\\" + match.group(1)
    if token == "//":
        return "\\/\\/"
    return "\\." if token == "." else "&#64;"


def markdown_text(value: object) -> str:
    """``value`` as Markdown that renders as exactly its text (see the module docstring), on one line."""
    text = _BREAKS.sub(" ", str(value))
    text = _BIDI.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)
    text = "".join(f"\\{c}" if c in _ESCAPED else c for c in text)
    text = _ENTITIES.sub(lambda m: "&amp;" if m.group(0) == "&" else "&lt;", text)
    text = re.sub("_", _underscore, text)
    return _LINKS.sub(_link, text)


def markdown_plain(text: str) -> str:
    """The text a line of report Markdown shows: backslash escapes and the entities ``markdown_text`` writes undone."""
    def plain(match: re.Match) -> str:
        if match.group(1) is not None:
            return match.group(1)
        return {"amp": "&", "lt": "<", "gt": ">", "#64": "@"}[match.group(2)]

    return _PLAIN.sub(plain, text)


def html_text(value: object) -> str:
    """``value`` as HTML text (quotes too): nothing in it becomes markup."""
    return html.escape(str(value), quote=True)


_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(char: str) -> str:
    code = ord(char)
    if char in _SHORT:
        return _SHORT[char]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def terminal_text(value: object, *, lines: bool = False) -> str:
    """``value`` for a terminal: every non-printable character as its Python escape (see the module docstring); with
    ``lines``, line feeds stay (a message of several lines)."""
    return "".join(c if c.isprintable() or (lines and c == "\n") else _escape(c) for c in str(value))


#: The paragraph after a report's introduction that gives the dataset's identity key (the Markdown report writes it,
#: the HTML page folds it into a details element).
IDENTITY_LINE = "Dataset identity: "


def dataset_label(summary: Mapping[str, Any]) -> str:
    """The dataset as a person knows it: the summary's ``name`` (a config's declared name or source path), else
    the name in a declared (``name@revision``) or manifest identity, else the identity key itself."""
    name, key = summary.get("name"), str(summary.get("identity"))
    if isinstance(name, str) and name:
        return name
    kind, _, rest = key.partition(":")
    if kind == "declared" and rest:
        return rest
    if kind == "manifest" and rest:
        return rest.rsplit(":", 1)[0]
    return key


__all__ = ["IDENTITY_LINE", "dataset_label", "html_text", "markdown_plain", "markdown_text", "terminal_text"]
