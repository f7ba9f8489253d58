"""Target views: several named targets over the same rows of one labelled dataset, and label hierarchies.

A labelled benchmark may declare ``targets:`` — named views, each ``{column | key | file, type, role}``:

- ``column``: another column of the dataset's table (``csv``, ``manifest``, ``hf_dataset`` sources);
- ``key``: another array of its file (``labels_key`` of an ``npz``, ``labels_dataset`` of an ``hdf5`` source);
- ``file``: a CSV table ``id,label`` (``id_column`` / ``label_column`` to rename them) aligned with the rows by id
  (every dataset row once, no other id);
- ``type``: classification (default), multilabel or regression; ``label_dtype``: str or int (a column or file);
- ``role``: ``task`` (default; higher separation is better) or ``nuisance`` (a target the embedding should NOT
  encode — acquisition site, scanner, source corpus: lower separation is better).

Without ``targets:`` the one view is the dataset's own target (``DEFAULT_VIEW``, role task). A ``hierarchy:``
adds one generated view per level (``Hierarchy``): a path column (``family/genus/species`` with a declared
``separator``) or a parent table (a ``child,parent`` CSV over the dataset's own labels). Labels keep their typed
identity (``vertebrae.core.labels``): a parent table's leaves are the dataset's own label values (ints stay ints).

Each view's targets are built by the dataset's own machinery (``vertebrae.data.targets``), so a view is scored
exactly as a dataset with that target would be. Refused, naming the key and the value: a missing column or key,
a file whose ids do not align with the rows, a class with two parents, a cycle, levels of unequal depth, two views
with the same name, and a view (a nuisance above all) that partitions the rows exactly as another view does.
"""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.fingerprint import canonical_json, sha256_hex
from vertebrae.core.labels import semantic_key
from vertebrae.data.labelled import BenchmarkDataset
from vertebrae.data.targets import TARGET_TYPES, Targets, build_targets

ROLES = ("task", "nuisance")
DEFAULT_VIEW = "target"
LABEL_DTYPES = ("str", "int")
# which key of a source declaration names its label column (``column``) or label array (``key``)
_COLUMN_KEYS = {"csv": "label_column", "manifest": "label_column", "hf_dataset": "label_column"}
_ARRAY_KEYS = {"npz": "labels_key", "hdf5": "labels_dataset"}


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value or "@" in value or "/" in value:
        raise ConfigError(f"{where}: a view name must be a non-empty string without '@' or '/', got {value!r}")
    return value


@dataclass(frozen=True)
class Hierarchy:
    """A label hierarchy: ``column`` (a path per row, parts joined by ``separator``, root first) or ``file`` (a
    ``child,parent`` CSV over the dataset's own labels; in process, ``parents``: a child -> parent mapping);
    ``levels``: the level names, root first (default ``level_1`` .. ``level_d``); ``label_dtype`` of the parents
    read from a file (str, or int)."""

    column: str | None = None
    separator: str = "/"
    file: str | None = None
    parents: Mapping[Any, Any] | None = None
    child_column: str = "child"
    parent_column: str = "parent"
    levels: tuple[str, ...] | None = None
    label_dtype: str = "str"

    def __post_init__(self) -> None:
        given = [k for k in ("column", "file", "parents") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ConfigError(f"hierarchy: give exactly one of column, file or parents, got {given or 'none'}")
        if not isinstance(self.separator, str) or not self.separator:
            raise ConfigError(f"hierarchy.separator: a non-empty string, got {self.separator!r}")
        if self.label_dtype not in LABEL_DTYPES:
            raise ConfigError(f"hierarchy.label_dtype: one of {LABEL_DTYPES}, got {self.label_dtype!r}")
        if self.levels is not None:
            levels = tuple(_name(level, "hierarchy.levels") for level in self.levels)
            if len(set(levels)) != len(levels) or len(levels) < 2:
                raise ConfigError(f"hierarchy.levels: at least 2 distinct names, got {list(levels)}")
            object.__setattr__(self, "levels", levels)

    @classmethod
    def from_dict(cls, decl: Mapping[str, Any], *, where: str) -> Hierarchy:
        known = {"column", "separator", "file", "child_column", "parent_column", "levels", "label_dtype"}
        unknown = sorted(set(decl) - known)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {unknown}; expected some of {sorted(known)}")
        try:
            return cls(**{**decl, **({"levels": tuple(decl["levels"])} if decl.get("levels") is not None else {})})
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None

    def recipe(self, base_dir: Path) -> dict[str, Any]:
        out: dict[str, Any] = {"levels": None if self.levels is None else list(self.levels)}
        if self.column is not None:
            return {**out, "column": self.column, "separator": self.separator}
        if self.file is not None:
            return {**out, "file": _digest(base_dir / self.file), "child_column": self.child_column,
                    "parent_column": self.parent_column, "label_dtype": self.label_dtype}
        return {**out, "parents": sorted([semantic_key(c), semantic_key(p)] for c, p in self.parents.items())}


@dataclass(frozen=True)
class TargetView:
    """One named view over the dataset's rows (module docstring). In process, ``values`` (one label per row, as
    ``BenchmarkDataset`` takes them) replaces column / key / file. A hierarchy level is a generated view
    (``hierarchy`` and ``level``, 0 = the root)."""

    name: str
    column: str | None = None
    key: str | None = None
    file: str | None = None
    values: Any = field(default=None, compare=False)
    type: str = "classification"
    role: str = "task"
    label_dtype: str | None = None
    id_column: str = "id"
    label_column: str = "label"
    hierarchy: Hierarchy | None = None
    level: int | None = None

    def __post_init__(self) -> None:
        _name(self.name, "targets")
        given = [k for k in ("column", "key", "file", "values") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ConfigError(f"targets.{self.name}: give one of column, key, file or values, got {given}")
        if self.type not in TARGET_TYPES:
            raise ConfigError(f"targets.{self.name}.type: one of {TARGET_TYPES}, got {self.type!r}")
        if self.role not in ROLES:
            raise ConfigError(f"targets.{self.name}.role: one of {ROLES}, got {self.role!r}")
        if self.label_dtype is not None and self.label_dtype not in LABEL_DTYPES:
            raise ConfigError(f"targets.{self.name}.label_dtype: one of {LABEL_DTYPES}, got {self.label_dtype!r}")

    @property
    def is_default(self) -> bool:
        """The dataset's own target (nothing else declared)."""
        return not any(getattr(self, k) is not None for k in ("column", "key", "file", "values", "hierarchy"))

    @classmethod
    def from_dict(cls, name: str, decl: Mapping[str, Any], *, where: str) -> TargetView:
        known = {"column", "key", "file", "type", "role", "label_dtype", "id_column", "label_column"}
        unknown = sorted(set(decl) - known)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {unknown}; expected some of {sorted(known)}")
        try:
            return cls(name=_name(name, where), **decl)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None

    def recipe(self, base_dir: Path, targets: Targets | None = None) -> dict[str, Any] | None:
        """What determines this view's targets (None: the dataset's own target, whose recipe is the dataset's):
        not its name nor its role, which only the report reads. In process (``values``), the digest of ``targets``."""
        if self.is_default:
            return None
        out: dict[str, Any] = {"type": self.type, "label_dtype": self.label_dtype}
        if self.column is not None:
            out["column"] = self.column
        elif self.key is not None:
            out["key"] = self.key
        elif self.file is not None:
            out.update(file=_digest(base_dir / self.file), id_column=self.id_column, label_column=self.label_column)
        elif self.values is not None:
            if targets is None:
                raise ValidationError(f"targets.{self.name}: the recipe of in-process values needs their targets")
            out["values"] = sha256_hex(canonical_json(targets.to_payload()))
        if self.hierarchy is not None:
            out.update(hierarchy=self.hierarchy.recipe(base_dir), level=self.level)
        return out


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise ConfigError(f"file {path}: {exc.strerror or exc}") from None


def views_from_decl(bench: Mapping[str, Any], *, where: str) -> tuple[list[TargetView], str]:
    """The views of a labelled benchmark's declaration (``targets``, then the ``hierarchy`` levels, whose count is
    known once the labels are read: ``resolve_views``) and the name of its primary view."""
    decls = bench.get("targets")
    if decls:
        views = [TargetView.from_dict(n, d, where=f"{where}.targets.{n}") for n, d in decls.items()]
    else:
        views = [TargetView(DEFAULT_VIEW)]
    primary = bench.get("primary_view")
    tasks = [v.name for v in views if v.role == "task"]
    if primary is None:
        if not tasks:
            raise ConfigError(f"{where}.targets: every view is a nuisance; declare a task view to rank by")
        primary = tasks[0]
    elif primary not in tasks:
        raise ConfigError(f"{where}.primary_view: {primary!r} is not a task view; task views: {tasks}")
    return views, primary


# ---- loading a view's targets --------------------------------------------------------------------------------------
def _view_source(source: Mapping[str, Any], view: TargetView, base_dir: Path, where: str) -> dict[str, Any]:
    kind = source.get("type")
    keys, what = (_COLUMN_KEYS, "column") if view.column is not None else (_ARRAY_KEYS, "key")
    if kind not in keys:
        raise ConfigError(f"{where}.{what}: a {source.get('type')!r} source has no {what}s; use "
                          f"{'key' if what == 'column' else 'column'} or file (sources with {what}s: {sorted(keys)})")
    out = {**source, keys[kind]: getattr(view, what)}
    if view.label_dtype is not None and kind != "hf_dataset":
        out["label_dtype"] = view.label_dtype
    if kind == "csv" and source.get("feature_columns") is None:  # the dataset's own features, whatever its label
        with open(base_dir / source["path"], newline="", encoding="utf-8-sig") as fh:
            header = next(csv.reader(fh), [])
        reserved = {source.get("label_column", "label"), source.get("id_column"), source.get("groups_column"),
                    view.column}
        out["feature_columns"] = [c for c in header if c not in reserved]
    return out


def _csv_columns(path: Path, columns: tuple[str, str], where: str) -> list[tuple[str, str, int]]:
    """``(first column, second column, line number)`` of each row of CSV file ``path`` (``where``.file: a missing
    column, named with the file's columns, or an unreadable file refused)."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            for column in columns:
                if column not in (reader.fieldnames or []):
                    raise ConfigError(f"{where}.file: column {column!r} not found in {path}; "
                                      f"columns: {reader.fieldnames}")
            return [(r[columns[0]], r[columns[1]], reader.line_num) for r in reader]
    except OSError as exc:
        raise ConfigError(f"{where}.file: {path}: {exc.strerror or exc}") from None


def _file_labels(view: TargetView, row_ids: Sequence[str], base_dir: Path, where: str) -> list:
    path = base_dir / view.file
    records = _csv_columns(path, (view.id_column, view.label_column), where)
    position = {key: i for i, key in enumerate(row_ids)}
    labels: list = [None] * len(row_ids)
    for raw_id, value, line in records:
        index = position.get(semantic_key(raw_id))
        if index is None and raw_id.lstrip("-").isdigit():
            index = position.get(semantic_key(int(raw_id)))
        if index is None:
            raise ConfigError(f"{where}.file: {path}, line {line}: id {raw_id!r} is not a row of the dataset")
        if labels[index] is not None:
            raise ConfigError(f"{where}.file: {path}, line {line}: id {raw_id!r} is listed twice")
        labels[index] = _typed(value, view.label_dtype or "str", f"{where}.file: {path}, line {line}")
    missing = [row_ids[i] for i, label in enumerate(labels) if label is None]
    if missing:
        raise ConfigError(f"{where}.file: {path} has no row for id(s) {missing[:5]} of the dataset; rows do not align")
    return labels


def _typed(value: str, dtype: str, where: str) -> Any:
    if dtype == "str":
        return value
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{where}: {value!r} is not an int (label_dtype: int)") from None


def _decoded(targets: Targets) -> list:
    return [targets.catalog.value(key) for key in targets.values.tolist()]


def view_dataset(dataset: BenchmarkDataset, view: TargetView, targets: Targets, recipe: Any) -> BenchmarkDataset:
    """``dataset`` with the targets of ``view``: same rows, identity and groups (so the same embeddings), its own
    target declaration (so its own protocol fingerprint)."""
    if recipe is None:
        return dataset
    declaration = {"target_type": targets.target_type, "label_names": None, "target_names": None, "view": recipe}
    return replace(dataset, targets=targets, target_declaration=declaration)


def load_view(decl: Mapping[str, Any], view: TargetView, base: BenchmarkDataset, *, base_dir: Path,
              where: str) -> Targets:
    """The targets of a declared (not generated) view of config dataset ``decl`` (``base``: the loaded dataset)."""
    from vertebrae.data.declared.labelled import load_declared_dataset

    where = f"{where}.targets.{view.name}"
    if view.is_default:
        return base.targets
    if view.file is not None:
        labels = _file_labels(view, base.row_ids, base_dir, where)
        try:
            return build_targets(labels, view.type)
        except ValidationError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    source = _view_source(decl["source"], view, base_dir, where)
    changed = {**decl, "source": source, "target_type": view.type, "label_names": None, "target_names": None}
    try:
        loaded = load_declared_dataset(changed, base_dir=base_dir, where=where)
    except ValidationError as exc:
        what = "column" if view.column is not None else "key"
        raise ConfigError(f"{where}.{what} ({getattr(view, what)!r}): {exc}") from None
    if loaded.row_ids != base.row_ids:
        raise ConfigError(f"{where}: the rows of this view do not align with the dataset's rows by id")
    return loaded.targets


# ---- hierarchies ---------------------------------------------------------------------------------------------------
def hierarchy_levels(hierarchy: Hierarchy, leaves: list | None, paths: list | None, *, base_dir: Path,
                     where: str) -> list[list]:
    """One label per row for each level, root first: from ``paths`` (a path column's values) or from ``leaves``
    (the dataset's own label values) and the parent table. Refuses a class with two parents, a cycle and levels of
    unequal depth, naming the class."""
    if paths is not None:
        split = [str(p).split(hierarchy.separator) for p in paths]
        depth = len(split[0])
        for i, parts in enumerate(split):
            if len(parts) != depth or any(part == "" for part in parts):
                raise ConfigError(f"{where}.column ({hierarchy.column!r}): row {i} holds {paths[i]!r}, not "
                                  f"{depth} non-empty levels joined by {hierarchy.separator!r} as row 0")
        if depth < 2:
            raise ConfigError(f"{where}.column ({hierarchy.column!r}): row 0 holds {paths[0]!r}, one level; a "
                              f"hierarchy needs at least 2 joined by separator {hierarchy.separator!r}")
        _check_single_parents(split, where)
        return [[parts[level] for parts in split] for level in range(depth)]
    parents = _parent_table(hierarchy, base_dir, where)
    chains = {}
    for leaf in dict.fromkeys(leaves):
        chain, seen = [leaf], {semantic_key(leaf)}
        while True:
            parent = _lookup(parents, chain[-1])
            if parent is None:
                break
            if semantic_key(parent) in seen:
                shown = " -> ".join(repr(c) for c in [*chain, parent])
                raise ConfigError(f"{where}: the parent table has a cycle: {shown}")
            seen.add(semantic_key(parent))
            chain.append(parent)
        chains[semantic_key(leaf)] = chain[::-1]
    depths = {len(c) for c in chains.values()}
    if len(depths) != 1:
        first = next(iter(chains.values()))
        other = next(c for c in chains.values() if len(c) != len(first))
        raise ConfigError(f"{where}: classes sit at unequal depths: {' -> '.join(map(repr, first))} but "
                          f"{' -> '.join(map(repr, other))} (every class needs the same number of ancestors)")
    depth = depths.pop()
    if depth < 2:
        raise ConfigError(f"{where}: no class of the dataset has a parent in the table")
    return [[chains[semantic_key(leaf)][level] for leaf in leaves] for level in range(depth)]


def _lookup(parents: Mapping[str, Any], value: Any) -> Any:
    """The parent of ``value``: by its typed key, else (a table read from text) by its text."""
    found = parents.get(semantic_key(value))
    if found is None and not isinstance(value, str):
        found = parents.get(semantic_key(str(value)))
    return found


def _check_single_parents(split: list[list], where: str) -> None:
    for level in range(1, len(split[0])):
        parent_of: dict[str, Any] = {}
        for parts in split:
            known = parent_of.setdefault(parts[level], parts[level - 1])
            if known != parts[level - 1]:
                raise ConfigError(f"{where}: class {parts[level]!r} has two parents, {known!r} and "
                                  f"{parts[level - 1]!r}")


def _parent_table(hierarchy: Hierarchy, base_dir: Path, where: str) -> dict[str, Any]:
    """child key -> parent value (a child is matched by its text: a leaf by its value's text, ints included)."""
    if hierarchy.parents is not None:
        pairs = [(c, p, f"parents[{c!r}]") for c, p in hierarchy.parents.items()]
    else:
        path = base_dir / hierarchy.file
        pairs = [(child, _typed(parent, hierarchy.label_dtype, f"{where}.file: {path}, line {line}"),
                  f"{path}, line {line}")
                 for child, parent, line in _csv_columns(path, (hierarchy.child_column, hierarchy.parent_column), where)]
    parents: dict[str, Any] = {}
    for child, parent, line in pairs:
        key = semantic_key(child)
        if key in parents and semantic_key(parents[key]) != semantic_key(parent):
            raise ConfigError(f"{where}: class {child!r} has two parents, {parents[key]!r} and {parent!r} ({line})")
        parents[key] = parent
    return parents


def level_views(hierarchy: Hierarchy, depth: int, *, where: str) -> list[TargetView]:
    """The generated views of a hierarchy of ``depth`` levels, root first."""
    names = hierarchy.levels or tuple(f"level_{i + 1}" for i in range(depth))
    if len(names) != depth:
        raise ConfigError(f"{where}.levels: {len(names)} names {list(names)} for a hierarchy of {depth} levels")
    return [TargetView(name, hierarchy=hierarchy, level=i) for i, name in enumerate(names)]


def same_partition(a: Targets, b: Targets) -> bool:
    """The two targets group the rows identically (classification: up to renaming the classes; else equal)."""
    if a.target_type != b.target_type or a.values.shape != b.values.shape:
        return False
    if a.target_type == "classification":
        ka, kb = np.asarray(a.values.tolist()), np.asarray(b.values.tolist())
        pairs = set(zip(ka.tolist(), kb.tolist()))
        return len(pairs) == len(set(ka.tolist())) == len(set(kb.tolist()))
    if a.target_type == "multilabel":
        return (a.values != b.values).nnz == 0 and a.catalog == b.catalog
    return bool(np.array_equal(a.values, b.values))


@dataclass(frozen=True, eq=False)
class ResolvedView:
    """A view with its targets, its recipe (None: the dataset's own) and, for a hierarchy level equal to another
    view, that view's name (``alias``: its scores are that view's, no job of its own)."""

    view: TargetView
    targets: Targets
    recipe: Any
    alias: str | None = None


def resolve_views(views: Sequence[TargetView], hierarchy: Hierarchy | None, base: BenchmarkDataset, load, *,
                  base_dir: Path, where: str) -> list[ResolvedView]:
    """Every view's targets (``load(view)`` for a declared view), then the hierarchy's levels; refuses duplicate
    names and a view grouping the rows exactly as another (a nuisance as a task above all, naming both)."""
    resolved: list[ResolvedView] = []
    for view in views:
        targets = load(view)
        own = targets.to_payload() == base.targets.to_payload()  # the dataset's own target, however named
        resolved.append(ResolvedView(view, targets, None if own else view.recipe(base_dir, targets)))
    if hierarchy is not None:
        hwhere = f"{where}.hierarchy"
        if hierarchy.column is not None:
            try:
                paths = _decoded(load(TargetView("_paths", column=hierarchy.column, label_dtype="str")))
            except ConfigError as exc:  # named as the hierarchy's key, not as a view's
                raise ConfigError(str(exc).replace(f"{where}.targets._paths.", f"{hwhere}.", 1)) from None
            levels = hierarchy_levels(hierarchy, None, paths, base_dir=base_dir, where=hwhere)
        else:
            if base.targets.target_type != "classification":
                raise ConfigError(f"{hwhere}: a parent table needs single-label classes, the dataset's target is "
                                  f"{base.targets.target_type}")
            levels = hierarchy_levels(hierarchy, _decoded(base.targets), None, base_dir=base_dir, where=hwhere)
        for view, labels in zip(level_views(hierarchy, len(levels), where=hwhere), levels):
            try:
                targets = build_targets(labels, "classification")
            except ValidationError as exc:
                raise ConfigError(f"{hwhere}: level {view.name!r}: {exc}") from None
            alias = next((r.view.name for r in resolved if r.view.role == "task" and r.alias is None
                          and same_partition(r.targets, targets)), None)
            resolved.append(ResolvedView(view, targets, view.recipe(base_dir), alias))
    names = [r.view.name for r in resolved]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"{where}.targets: view name(s) {duplicates} given twice (a hierarchy level names a view)")
    for i, item in enumerate(resolved):
        for other in resolved[:i]:
            if item.alias is None and other.alias is None and same_partition(item.targets, other.targets):
                what = "nuisance view" if "nuisance" in (item.view.role, other.view.role) else "view"
                raise ConfigError(f"{where}.targets.{item.view.name}: this {what} groups the rows exactly as view "
                                  f"{other.view.name!r} ({other.view.role}); a view must differ from every other")
    return resolved


def declared_view_dataset(decl: Mapping[str, Any], entry: Mapping[str, Any], *, base_dir: Path,
                          where: str) -> BenchmarkDataset:
    """The dataset of config dataset ``decl`` with the targets of one planned view (``entry``: ``name`` and
    ``decl``, or ``hierarchy`` and ``level``), as a protocol job rebuilds it; ``where``: the benchmark's key."""
    from vertebrae.data.declared.labelled import load_declared_dataset

    base = load_declared_dataset(decl, base_dir=base_dir, where=f"{where}.dataset")
    if entry.get("hierarchy") is not None:
        hierarchy = Hierarchy.from_dict(entry["hierarchy"], where=f"{where}.hierarchy")
        resolved = resolve_views([], hierarchy, base,
                                 lambda view: load_view(decl, view, base, base_dir=base_dir, where=where),
                                 base_dir=base_dir, where=where)
        item = next(r for r in resolved if r.view.level == entry["level"])
    else:
        view = TargetView.from_dict(entry["name"], entry["decl"], where=f"{where}.targets.{entry['name']}")
        item = ResolvedView(view, load_view(decl, view, base, base_dir=base_dir, where=where), view.recipe(base_dir))
    return view_dataset(base, item.view, item.targets, item.recipe)


__all__ = ["declared_view_dataset", "DEFAULT_VIEW", "Hierarchy", "ROLES", "ResolvedView", "TargetView", "hierarchy_levels", "level_views",
           "load_view", "resolve_views", "same_partition", "view_dataset", "views_from_decl"]
