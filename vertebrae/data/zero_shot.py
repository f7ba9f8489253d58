"""ZeroShotDataset: a single-label source dataset with fixed text prompts per class (spec/zero-shot.md).

Contract:

- The source is a ``BenchmarkDataset`` with single-label (classification) targets; its classes, in label-catalog
  order, are the declared classes (the first one wins a tie). Every class has at least one non-empty prompt.
- Prompts are kept in declaration order (class by class); a prompt text may appear only once in the protocol.
- ``from_templates``: each template is parsed with ``string.Formatter``, must reference ``{label}`` and only it
  (no positional, attribute/index, conversion or format-spec fields); each template id is a non-empty string,
  ids are unique, and every class is rendered by every template exactly once (exact class x template coverage,
  re-checked whenever a protocol is read back).
- Class labels keep their semantic values; unsupported label objects are refused at construction.

``protocol_recipe()`` is the complete strict-JSON declaration (schema, source dataset identity, typed sample ids and
sample labels in row order, class order, prompts with their labels and template ids, metadata, the label
catalog); ``protocol_fingerprint()`` hashes all of it. ``ZeroShotProtocol.from_payload`` reads it back, validated.
"""

from __future__ import annotations

import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError, LabelError, ValidationError
from vertebrae.core.fingerprint import fingerprint, to_json_value
from vertebrae.core.inputs import RawInputs
from vertebrae.core.labels import LabelCatalog, _parse_key, describe_key, semantic_key
from vertebrae.data.labelled import BenchmarkDataset

PROTOCOL_SCHEMA = "vertebrae.zero-shot-protocol/v1"
PAYLOAD_KEYS = ("schema", "source_dataset_identity_key", "sample_ids", "sample_labels", "class_keys", "prompts",
                "metadata", "label_catalog")
_PROMPT_KEYS = ("label", "text", "template_id")


def _short(text: Any, limit: int = 80) -> str:
    text = repr(text)
    return text if len(text) <= limit else text[:limit] + "...'"


def check_template(template: Any, index: int) -> None:
    """Refuse a template that is not a string, lacks the ``{label}`` field or uses any other field."""
    if not isinstance(template, str):
        raise ValidationError(f"template {index} must be a string, got {type(template).__name__}: {_short(template)}")
    if not template.strip():
        raise ValidationError(f"template {index} is empty")
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValidationError(f"template {index} {_short(template)} is not a valid format string: {exc}") from None
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if name == "" or name.isdigit():
            raise ValidationError(f"template {index} {_short(template)}: positional field {{{name}}} is not allowed; "
                                  "use {label}")
        if name != "label":
            raise ValidationError(f"template {index} {_short(template)}: unknown field {{{name}}}; only {{label}} is allowed")
        if conversion is not None:
            raise ValidationError(f"template {index} {_short(template)}: conversion !{conversion} is not allowed in {{label}}")
        if spec:
            raise ValidationError(f"template {index} {_short(template)}: format spec :{spec} is not allowed in {{label}}")
    if not any(name == "label" for _, name, _, _ in parsed):
        raise ValidationError(f"template {index} {_short(template)} has no {{label}} field, so it would render the same "
                              "prompt for every class; write {label} where the class name goes")


@dataclass(frozen=True)
class PromptRow:
    """One prompt: its class (semantic key), text and template id (None for rendered prompts)."""

    label: str
    text: str
    template_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "text": self.text, "template_id": self.template_id}


@dataclass(frozen=True, eq=False)
class ZeroShotProtocol:
    """What a zero-shot score is computed against: sample labels, class order, prompts, catalog, metadata.

    Construction validates every rule of the module docstring; ``to_payload``/``from_payload`` round-trip it as
    strict JSON and ``fingerprint()`` hashes the payload (the complete ordered declaration).
    """

    source_identity_key: str
    sample_ids: tuple[str, ...]
    sample_labels: tuple[str, ...]
    class_keys: tuple[str, ...]
    prompts: tuple[PromptRow, ...]
    catalog: LabelCatalog
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.source_identity_key, str) or not self.source_identity_key:
            raise ValidationError("zero-shot protocol: source_identity_key must be a non-empty string")
        if not isinstance(self.catalog, LabelCatalog):
            raise ValidationError("zero-shot protocol: catalog must be a LabelCatalog")
        if tuple(self.class_keys) != tuple(self.catalog.keys):
            raise ValidationError("zero-shot protocol: class_keys must list the label catalog's classes in catalog order")
        if len(self.class_keys) < 2:
            raise ValidationError(f"zero-shot needs at least 2 classes, got {[self.catalog.display(k) for k in self.class_keys]}")
        if len(self.sample_ids) != len(self.sample_labels) or not self.sample_ids:
            raise ValidationError(f"zero-shot protocol: {len(self.sample_ids)} sample ids for {len(self.sample_labels)} labels")
        if len(set(self.sample_ids)) != len(self.sample_ids):
            dup = next(k for k, n in Counter(self.sample_ids).items() if n > 1)
            raise ValidationError(f"zero-shot protocol: duplicate sample id {describe_key(dup)}")
        for i, key in enumerate(self.sample_labels):
            if key not in self.catalog:
                raise ValidationError(f"zero-shot protocol: sample {describe_key(self.sample_ids[i])} (index {i}) has "
                                      f"label key {key!r}, which is not a declared class")
        observed = set(self.sample_labels)
        unobserved = [self.catalog.display(k) for k in self.class_keys if k not in observed]
        if unobserved:
            raise ValidationError(f"zero-shot protocol: declared class(es) {unobserved} have no samples; the declared "
                                  "classes must equal the observed labels")
        self._check_prompts()
        try:
            metadata = to_json_value(dict(self.metadata), "metadata")
        except (ValidationError, TypeError) as exc:
            raise ValidationError(f"zero-shot protocol metadata must be strict JSON: {exc}") from None
        object.__setattr__(self, "metadata", metadata)
        object.__setattr__(self, "sample_ids", tuple(self.sample_ids))
        object.__setattr__(self, "sample_labels", tuple(self.sample_labels))
        object.__setattr__(self, "class_keys", tuple(self.class_keys))
        object.__setattr__(self, "prompts", tuple(self.prompts))

    def _check_prompts(self) -> None:
        if not self.prompts:
            raise ValidationError("zero-shot protocol has no prompts")
        seen: dict[str, str] = {}
        per_class: dict[str, list[PromptRow]] = {k: [] for k in self.class_keys}
        for i, row in enumerate(self.prompts):
            if not isinstance(row, PromptRow):
                raise ValidationError(f"prompt {i} must be a PromptRow, got {type(row).__name__}")
            if row.label not in per_class:
                raise ValidationError(f"prompt {i} {_short(row.text)} is for label key {row.label!r}, which is not a "
                                      f"declared class")
            display = self.catalog.display(row.label)
            if not isinstance(row.text, str) or not row.text.strip():
                raise ValidationError(f"class {display!r}: prompt {i} is empty; every prompt must be a non-empty string")
            if row.text in seen:
                raise ValidationError(f"duplicate prompt {_short(row.text)}: declared for class {seen[row.text]!r} and "
                                      f"again for class {display!r}")
            seen[row.text] = display
            if row.template_id is not None and (not isinstance(row.template_id, str) or not row.template_id.strip()):
                raise ValidationError(f"class {display!r}: prompt {_short(row.text)} has template id {row.template_id!r}; "
                                      "template ids must be non-empty strings")
            per_class[row.label].append(row)
        empty = [self.catalog.display(k) for k, rows in per_class.items() if not rows]
        if empty:
            raise ValidationError(f"class(es) {empty} have no prompt; every class needs at least one non-empty prompt")
        # prompts are grouped class by class, in class order
        order = [self.class_keys.index(row.label) for row in self.prompts]
        if order != sorted(order):
            raise ValidationError("zero-shot prompts must be grouped class by class in declared class order")
        with_ids = [row.template_id is not None for row in self.prompts]
        if any(with_ids) and not all(with_ids):
            row = self.prompts[with_ids.index(False)]
            raise ValidationError(f"class {self.catalog.display(row.label)!r}: prompt {_short(row.text)} has no "
                                  "template id while others do; give every prompt a template id or none")
        if all(with_ids):
            templates = list(dict.fromkeys(row.template_id for row in self.prompts))
            for key, rows in per_class.items():
                ids = [row.template_id for row in rows]
                counts = Counter(ids)
                doubled = sorted(t for t, n in counts.items() if n > 1)
                missing = [t for t in templates if t not in counts]
                if doubled or missing:
                    problem = (f"template id(s) {doubled} render it more than once" if doubled
                               else f"template id(s) {missing} do not render it")
                    raise ValidationError(f"class {self.catalog.display(key)!r}: {problem}; every template must "
                                          "cover every class exactly once")
                if ids != templates:
                    raise ValidationError(f"class {self.catalog.display(key)!r}: its prompts follow template order "
                                          f"{ids}, expected {templates}")

    # --- views --------------------------------------------------------------------------------------

    @property
    def n_samples(self) -> int:
        return len(self.sample_ids)

    @property
    def n_classes(self) -> int:
        return len(self.class_keys)

    @property
    def prompt_texts(self) -> tuple[str, ...]:
        return tuple(row.text for row in self.prompts)

    @property
    def prompt_labels(self) -> tuple[str, ...]:
        return tuple(row.label for row in self.prompts)

    @property
    def template_ids(self) -> tuple[str, ...] | None:
        ids = tuple(row.template_id for row in self.prompts)
        return None if ids[0] is None else ids

    def prompt_ids(self) -> tuple[str, ...]:
        """Row ids of the prompt endpoint: the prompt positions (semantic keys of 0, 1, ...)."""
        return tuple(semantic_key(i) for i in range(len(self.prompts)))

    def prompt_inputs(self) -> RawInputs:
        """The prompt texts as raw text rows (ids: prompt positions)."""
        return RawInputs.texts(self.prompt_texts)

    def prompt_counts(self) -> dict[str, int]:
        counts = Counter(row.label for row in self.prompts)
        return {key: counts[key] for key in self.class_keys}

    def to_payload(self) -> dict[str, Any]:
        return {
            "schema": PROTOCOL_SCHEMA,
            "source_dataset_identity_key": self.source_identity_key,
            "sample_ids": list(self.sample_ids),
            "sample_labels": list(self.sample_labels),
            "class_keys": list(self.class_keys),
            "prompts": [row.to_dict() for row in self.prompts],
            "metadata": self.metadata,
            "label_catalog": self.catalog.to_dict(),
        }

    def fingerprint(self) -> str:
        return fingerprint("protocol", {"zero_shot": self.to_payload()})

    def summary(self) -> dict[str, Any]:
        counts = Counter(self.sample_labels)
        return {
            "identity": self.source_identity_key,
            "n_samples": self.n_samples,
            "n_classes": self.n_classes,
            "n_prompts": len(self.prompts),
            "class_counts": {k: counts[k] for k in self.class_keys},
            "prompt_counts": self.prompt_counts(),
            "labels": {k: self.catalog.display(k) for k in self.class_keys},
            "template_ids": None if self.template_ids is None else list(dict.fromkeys(self.template_ids)),
        }

    @classmethod
    def from_payload(cls, payload: Any) -> ZeroShotProtocol:
        """Validated protocol from ``to_payload`` output; ValidationError naming the field otherwise."""
        if not isinstance(payload, Mapping):
            raise ValidationError(f"zero-shot protocol must be a JSON object, got {type(payload).__name__}")
        if payload.get("schema") != PROTOCOL_SCHEMA:
            raise ValidationError(f"zero-shot protocol schema {payload.get('schema')!r} is not supported; expected "
                                  f"{PROTOCOL_SCHEMA!r}")
        if set(payload) != set(PAYLOAD_KEYS):
            missing, extra = sorted(set(PAYLOAD_KEYS) - set(payload)), sorted(set(payload) - set(PAYLOAD_KEYS))
            raise ValidationError(f"zero-shot protocol fields: missing {missing}, unknown {extra}")
        catalog_doc = payload["label_catalog"]
        if not isinstance(catalog_doc, Mapping) or "schema" not in catalog_doc:
            raise ValidationError("zero-shot protocol label_catalog has no label-encoding schema")
        catalog = LabelCatalog.from_dict(catalog_doc)
        for name in ("sample_ids", "sample_labels", "class_keys", "prompts"):
            if not isinstance(payload[name], list):
                raise ValidationError(f"zero-shot protocol field {name} must be a list")
        for i, key in enumerate(payload["sample_ids"]):
            try:
                _parse_key(key)
            except LabelError as exc:
                raise ValidationError(f"zero-shot protocol sample_ids[{i}]: {exc}") from None
        prompts = []
        for i, item in enumerate(payload["prompts"]):
            if not isinstance(item, Mapping) or set(item) != set(_PROMPT_KEYS):
                raise ValidationError(f"zero-shot protocol prompts[{i}] must have exactly {list(_PROMPT_KEYS)}")
            prompts.append(PromptRow(item["label"], item["text"], item["template_id"]))
        if not isinstance(payload["metadata"], Mapping):
            raise ValidationError("zero-shot protocol field metadata must be an object")
        return cls(payload["source_dataset_identity_key"], tuple(payload["sample_ids"]), tuple(payload["sample_labels"]),
                   tuple(payload["class_keys"]), tuple(prompts), catalog, dict(payload["metadata"]))


def _typed(key: str) -> str:
    """``'0' (str)``, ``0 (int)``: a label key with its type, for messages where types are the difference."""
    return f"{describe_key(key)} ({_parse_key(key)[0]})"


def _class_key_of(value: Any, catalog: LabelCatalog, what: str) -> str:
    """The catalog key of ``value``; unknown classes are refused with their type and the classes' types (labels
    are typed: ``"0"`` is not ``0``)."""
    try:
        key = semantic_key(value)
    except LabelError as exc:
        raise LabelError(f"{what}: {exc}") from None
    if key not in catalog:
        known = ", ".join(_typed(k) for k in catalog.keys[:10]) + (", ..." if len(catalog.keys) > 10 else "")
        same_text = [k for k in catalog.keys if str(_parse_key(k)[1]) == str(_parse_key(key)[1])]
        hint = (f"; labels are typed: {_typed(same_text[0])} is a class, {_typed(key)} is not" if same_text else "")
        raise ValidationError(f"{what}: class {_typed(key)} is not a label of the source dataset "
                              f"(classes: {known}){hint}")
    return key


def _prompt_list(value: Any, display: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (bytes, Mapping)) or not isinstance(value, Iterable):
        raise ValidationError(f"class {display!r}: prompts must be a string or a sequence of strings, got "
                              f"{type(value).__name__}")
    out = list(value)
    if not out:
        raise ValidationError(f"class {display!r} has no prompt; every class needs at least one non-empty prompt")
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise ValidationError(f"class {display!r}: prompt {i} must be a string, got {type(text).__name__}")
    return out


def _check_source(dataset: Any) -> BenchmarkDataset:
    if not isinstance(dataset, BenchmarkDataset):
        raise ValidationError(f"ZeroShotDataset needs a BenchmarkDataset source, got {type(dataset).__name__}")
    if dataset.target_type != "classification":
        raise ValidationError(f"zero-shot needs single-label targets; the source dataset has target_type "
                              f"{dataset.target_type!r}")
    return dataset


@dataclass(frozen=True, eq=False)
class ZeroShotDataset:
    """A source dataset (the samples) and its zero-shot protocol (the prompts). Build it with ``from_dataset``
    or ``from_templates``."""

    dataset: BenchmarkDataset
    protocol: ZeroShotProtocol

    def __post_init__(self) -> None:
        _check_source(self.dataset)
        p = self.protocol
        if (p.source_identity_key != self.dataset.identity_key() or p.sample_ids != self.dataset.row_ids
                or p.sample_labels != tuple(self.dataset.label_keys) or p.catalog != self.dataset.catalog):
            raise ValidationError("ZeroShotDataset: the protocol was not built from this source dataset")

    @classmethod
    def from_dataset(cls, dataset: BenchmarkDataset, prompts: Mapping[Any, Any], *,
                     metadata: Mapping[str, Any] | None = None) -> ZeroShotDataset:
        """Rendered prompts per class: ``{label: "prompt" | ["prompt", ...]}`` covering every class exactly."""
        dataset = _check_source(dataset)
        catalog = dataset.catalog
        if not isinstance(prompts, Mapping):
            raise ValidationError(f"prompts must be a mapping {{label: prompt(s)}}, got {type(prompts).__name__}")
        by_key: dict[str, list[str]] = {}
        for label, value in prompts.items():
            key = _class_key_of(label, catalog, "prompts")
            if key in by_key:
                raise ValidationError(f"prompts: class {catalog.display(key)!r} is given twice")
            by_key[key] = _prompt_list(value, catalog.display(key))
        missing = [catalog.display(k) for k in catalog.keys if k not in by_key]
        if missing:
            raise ValidationError(f"class(es) {missing} have no prompt; every class needs at least one non-empty prompt")
        rows = tuple(PromptRow(key, text) for key in catalog.keys for text in by_key[key])
        return cls._build(dataset, rows, metadata)

    @classmethod
    def from_templates(cls, dataset: BenchmarkDataset, templates: Sequence[str], *,
                       template_ids: Sequence[str] | None = None, class_names: Mapping[Any, str] | None = None,
                       metadata: Mapping[str, Any] | None = None) -> ZeroShotDataset:
        """Each template rendered for every class with ``{label}`` = the class name (``class_names[label]``, else
        the catalog display). Template ids default to ``template_0``, ``template_1``, ..."""
        dataset = _check_source(dataset)
        catalog = dataset.catalog
        if isinstance(templates, (str, bytes)) or not isinstance(templates, Sequence) or not templates:
            raise ValidationError("templates must be a non-empty sequence of template strings")
        for i, template in enumerate(templates):
            check_template(template, i)
        if template_ids is None:
            template_ids = [f"template_{i}" for i in range(len(templates))]
        if isinstance(template_ids, (str, bytes)) or len(template_ids) != len(templates):
            raise ValidationError(f"template_ids must give one id per template ({len(templates)}), got {template_ids!r}")
        for i, tid in enumerate(template_ids):
            if not isinstance(tid, str) or not tid.strip():
                raise ValidationError(f"template_ids[{i}] must be a non-empty string, got {tid!r}")
        doubled = sorted(t for t, n in Counter(template_ids).items() if n > 1)
        if doubled:
            raise ValidationError(f"template_ids must be unique; repeated: {doubled}")
        names = {}
        for label, name in (class_names or {}).items():
            key = _class_key_of(label, catalog, "class_names")
            if not isinstance(name, str) or not name.strip():
                raise ValidationError(f"class_names: class {catalog.display(key)!r} has name {name!r}; names must be "
                                      "non-empty strings")
            names[key] = name
        rows = tuple(PromptRow(key, template.format(label=names.get(key, catalog.display(key))), tid)
                     for key in catalog.keys for template, tid in zip(templates, template_ids))
        return cls._build(dataset, rows, metadata)

    @classmethod
    def _build(cls, dataset: BenchmarkDataset, rows: tuple[PromptRow, ...], metadata) -> ZeroShotDataset:
        if metadata is not None and not isinstance(metadata, Mapping):
            raise ValidationError(f"metadata must be a mapping, got {type(metadata).__name__}")
        protocol = ZeroShotProtocol(dataset.identity_key(), dataset.row_ids, tuple(dataset.label_keys),
                                    dataset.catalog.keys, rows, dataset.catalog, dict(metadata or {}))
        return cls(dataset, protocol)

    # --- views --------------------------------------------------------------------------------------

    def identity_key(self) -> str:
        """The source dataset's identity: sample embeddings are keyed by it alone."""
        return self.dataset.identity_key()

    def prompt_rows(self) -> list[dict[str, Any]]:
        """``[{"label": key, "display": ..., "text": ..., "template_id": ...}, ...]`` in protocol order."""
        catalog = self.protocol.catalog
        return [{**row.to_dict(), "display": catalog.display(row.label)} for row in self.protocol.prompts]

    def prompt_inputs(self) -> RawInputs:
        """The prompt endpoint's raw rows: the prompt texts in protocol order."""
        return self.protocol.prompt_inputs()

    def protocol_recipe(self) -> dict[str, Any]:
        return self.protocol.to_payload()

    def protocol_fingerprint(self) -> str:
        return self.protocol.fingerprint()

    def summary(self) -> dict[str, Any]:
        return self.protocol.summary()


def build_zero_shot_dataset(dataset_decl: Mapping[str, Any], declaration: Mapping[str, Any], *, base_dir: Path, where: str):
    """The ZeroShotDataset a declaration describes; ConfigError naming the key for any invalid part."""
    from vertebrae.data.declared.labelled import load_declared_dataset

    dataset = load_declared_dataset(dataset_decl, base_dir=base_dir, where=f"{where}.dataset")
    prompts, templates = declaration.get("prompts"), declaration.get("templates")
    if (prompts is None) == (templates is None):
        raise ConfigError(f"{where}: declare exactly one of prompts (rendered, per class) or templates")
    metadata = declaration.get("metadata") or {}
    try:
        if templates is not None:
            names = declaration.get("class_names")
            class_names = None if names is None else [(entry["label"], entry["name"]) for entry in names]
            if class_names is not None and len({repr(label) for label, _ in class_names}) != len(class_names):
                raise ConfigError(f"{where}.class_names: a label is named twice")
            return ZeroShotDataset.from_templates(dataset, list(templates), template_ids=declaration.get("template_ids"),
                                                  class_names=None if class_names is None else dict(class_names),
                                                  metadata=metadata)
        if declaration.get("template_ids") is not None or declaration.get("class_names") is not None:
            raise ConfigError(f"{where}: template_ids and class_names go with templates, not with rendered prompts")
        mapping: dict[Any, Any] = {}
        for i, entry in enumerate(prompts):
            label = entry["label"]
            if any(type(k) is type(label) and k == label for k in mapping):
                raise ConfigError(f"{where}.prompts[{i}]: class {label!r} is declared twice")
            mapping[label] = entry["texts"]
        return ZeroShotDataset.from_dataset(dataset, mapping, metadata=metadata)
    except ConfigError:
        raise
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
