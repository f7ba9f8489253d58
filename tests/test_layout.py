"""The house rules of vertebrae/, checked on the source: imports flow one way and no module is too long.

Floors, lowest first (docs/development.md, "How the code is laid out"); a module may import its own floor or any lower one,
never a higher one, and the import graph has no circles. Function-level imports and
``importlib.import_module("vertebrae....")`` calls count like top-level ones.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "vertebrae"
MAX_LINES = 600
FLOORS = {
    "core": 0,
    "data": 1, "extractors": 1,
    "scoring": 2, "compression": 2,
    "reports": 3,
    "results": 4,
    "stages": 5,
    "protocols": 6, "planning": 6, "workflow": 6,
    "cli": 7, "__main__": 7, "job_server": 7,
}


def module_files() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ("vertebrae",) + path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def imported_names(module: str, path: Path) -> set[str]:
    """Every ``vertebrae...`` name a module imports, at any depth, relative imports resolved."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            names.add(node.args[0].value)
    return {name for name in names if name == "vertebrae" or name.startswith("vertebrae.")}


def import_graph() -> dict[str, set[str]]:
    """Module -> modules it imports (the package root, which only re-exports lazily, left out)."""
    modules = module_files()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, path in modules.items():
        targets = {resolve(name) for name in imported_names(module, path)}
        graph[module] = {t for t in targets if t and t != module and t != "vertebrae"}
    graph.pop("vertebrae", None)
    return graph


def floor(module: str) -> int:
    top = module.split(".")[1]
    if top not in FLOORS:
        raise AssertionError(f"{module}: its folder {top!r} has no floor; add it to FLOORS and docs/development.md")
    return FLOORS[top]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycle_finder_sees_a_circle_through_three_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_function_level_and_relative_imports_are_seen(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from ..core import errors\n    import vertebrae.stages.plan\n"
                      "    importlib.import_module('vertebrae.cli')\n")
    names = imported_names("vertebrae.scoring.m", source)
    assert {"vertebrae.core", "vertebrae.core.errors", "vertebrae.stages.plan", "vertebrae.cli"} <= names


def test_no_import_circles():
    assert cycles(import_graph()) == []


def test_imports_never_climb_to_a_higher_floor():
    climbs = [f"{module} (floor {floor(module)}) imports {target} (floor {floor(target)})"
              for module, targets in sorted(import_graph().items()) for target in sorted(targets)
              if floor(target) > floor(module)]
    assert climbs == []


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_over_600_lines(path):
    assert len(path.read_text().splitlines()) <= MAX_LINES
