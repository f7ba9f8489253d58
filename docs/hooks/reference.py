"""mkdocs hook: the configuration, CLI and Python API references, generated from the code at every build.

Nothing here is written by hand, so the references cannot drift: the config reference walks
``workflow/schemas/config.schema.yaml`` (every key, its type, default and description), the CLI reference walks the
argparse parser of ``vertebrae/cli/__init__.py`` (every subcommand and argument), and the API page lists the public names of
``vertebrae.__all__`` for mkdocstrings to render from their docstrings. The pages exist only in the built site
(``mkdocs build``); ``tests/test_docs.py`` calls the same functions.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
PAGES = {"reference/config.md": "config", "reference/cli.md": "cli", "reference/api.md": "api"}


# ---------------------------------------------------------------------------------------------------- config
def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _type(node: dict[str, Any]) -> str:
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name})"
    if "const" in node:
        return f"`{node['const']!r}`"
    if "enum" in node:
        return " \\| ".join(f"`{'null' if v is None else v}`" for v in node["enum"])
    for key in ("oneOf", "anyOf"):
        if key in node:
            return " or ".join(_type(sub) for sub in node[key])
    kind = node.get("type", "any")
    kinds = kind if isinstance(kind, list) else [kind]
    text = " or ".join(kinds)
    if "items" in node and isinstance(node["items"], dict):
        text += f" of {_type(node['items'])}"
    if isinstance(node.get("additionalProperties"), dict) and "object" in kinds:
        text = f"mapping of name to {_type(node['additionalProperties'])}"
    return text


def _default(node: dict[str, Any]) -> str:
    if "default" in node:
        return f"`{yaml.safe_dump(node['default'], default_flow_style=True).strip().removesuffix('...').strip()}`"
    found = re.search(r"Default: ([^.]*(?:\.\d[^.]*)*)\.?\s*$", str(node.get("description", "")))
    return _cell(found.group(1)) if found else ""


def config_keys(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """Every key of the schema as ``(section, dotted key, its schema)``: the top level, then each ``$defs`` entry
    (a section of its own, linked from where it is used); keys of nested objects, of mapping values and of array
    items are listed under their parent's dotted name (``<name>`` for a mapping key, ``[]`` for an item)."""
    rows: list[tuple[str, str, dict[str, Any]]] = []

    def walk(section: str, node: dict[str, Any], prefix: str) -> None:
        for key in ("oneOf", "anyOf", "allOf"):
            for sub in node.get(key, []):
                if isinstance(sub, dict) and "$ref" not in sub:
                    walk(section, sub, prefix)
        for key, sub in node.get("properties", {}).items():
            rows.append((section, prefix + key, sub))
            if isinstance(sub, dict) and "$ref" not in sub:
                walk(section, sub, prefix + key + ".")
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and "$ref" not in extra:
            walk(section, extra, prefix.removesuffix(".") + ".<name>." if prefix else "<name>.")
        items = node.get("items")
        if isinstance(items, dict) and "$ref" not in items:
            walk(section, items, prefix.removesuffix(".") + "[].")

    walk("top level", schema, "")
    for name, node in schema.get("$defs", {}).items():
        walk(name, node, "")
    return rows


def _referenced(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """The ``$defs`` entry a ``$ref`` node (or a mapping of them) points to; empty for any other node."""
    extra = node.get("additionalProperties")
    ref = node.get("$ref") or (extra.get("$ref") if isinstance(extra, dict) else None)
    return schema.get("$defs", {}).get(ref.rsplit("/", 1)[-1], {}) if ref else {}


def config_reference(schema: dict[str, Any] | None = None) -> str:
    schema = schema if schema is not None else yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))
    out = ["# Configuration reference", "",
           "Generated from `workflow/schemas/config.schema.yaml` at every docs build: every key of a workflow "
           "config, its type, its default and what it means. An unknown key is an error naming it. Sections below "
           "the top level are shapes used in several places (a link in the type column points to one).", "",
           _cell(schema.get("description", "")), ""]
    section = None
    for where, key, node in config_keys(schema):
        if where != section:
            section = where
            described = schema.get("$defs", {}).get(where, {}).get("description", "")
            out += ["", f"## {where}", "", *([_cell(described), ""] if described and where != "top level" else []),
                    "| key | type | default | description |", "|---|---|---|---|"]
        described = node.get("description") or _referenced(schema, node).get("description", "")
        out.append(f"| `{key}` | {_type(node)} | {_default(node)} | {_cell(described)} |")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------------- CLI
def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def cli_reference(parser: argparse.ArgumentParser | None = None) -> str:
    if parser is None:
        from vertebrae.cli import USER_COMMANDS, _parser
        parser = _parser()
    else:
        USER_COMMANDS = ()
    commands = subcommands(parser)
    user = [name for name in commands if name in USER_COMMANDS]
    out = ["# Command-line reference", "",
           "Generated from the argument parser of `vertebrae/cli/__init__.py` at every docs build. The first commands are "
           "the ones a user types; the job subcommands after them are what the workflow's rules run (each "
           "`vertebrae JOB --help` prints the same).", ""]
    for heading, names in (("Commands", user), ("Job subcommands", [n for n in commands if n not in user])):
        if not names:
            continue
        out += [f"## {heading}", ""]
        for name in names:
            sub = commands[name]
            usage = " ".join(sub.format_usage().split()).removeprefix("usage: ")
            out += [f"### {name}", "", _cell(sub.description or ""), "", "```text", usage, "```", ""]
            rows = [a for a in sub._actions if not isinstance(a, argparse._HelpAction)]
            if rows:
                out += ["| argument | required | default | description |", "|---|---|---|---|"]
                for a in rows:
                    flags = ", ".join(a.option_strings) or a.metavar or a.dest
                    choices = f" (one of {', '.join(map(str, a.choices))})" if a.choices else ""
                    default = "" if a.default in (None, argparse.SUPPRESS, False, []) else f"`{a.default}`"
                    required = "yes" if a.required or not a.option_strings and a.nargs not in ("?", "*") else ""
                    out.append(f"| `{flags}` | {required} | {default} | {_cell((a.help or '') + choices)} |")
                out.append("")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------------- API
def public_names() -> dict[str, str]:
    """``vertebrae.__all__``, each name with the module that defines it."""
    import vertebrae
    return {name: vertebrae._MODULE_OF[name] for name in vertebrae.__all__}


def api_reference() -> str:
    out = ["# Python API reference", "",
           "Generated at every docs build from the docstrings of the public names (`vertebrae.__all__`); each is "
           "importable as `from vertebrae import NAME`.", ""]
    for name, module in sorted(public_names().items()):
        out += [f"## {name}", "", f"`from vertebrae import {name}` (defined in `{module}`)", "",
                f"::: {module}.{name}", "    options:", "      show_root_heading: false", ""]
    return "\n".join(out) + "\n"


def page(kind: str) -> str:
    return {"config": config_reference, "cli": cli_reference, "api": api_reference}[kind]()


def on_files(files, config):  # mkdocs hook: add the generated pages to the site
    from mkdocs.structure.files import File

    for src_uri, kind in PAGES.items():
        files.append(File.generated(config, src_uri, content=page(kind)))
    return files
