"""``vertebrae eval``: evaluate models by name on one data set, in one line, through the workflow.

``vertebrae eval --protocol retrieval --data manifest:texts.csv,text_column=text --model st:FOLDER-OR-ID
--model timm:NAME [--conventions NAME] [--shards N] [--cores N] [--profile P] [--print-config] [--verbose]`` builds the config a
user would have written (one benchmark, one candidate per ``--model``; ``--conventions``: the retrieval benchmark's
``retrieval.conventions``, docs/conventions.md), writes it to ``OUT/eval/NAME.yaml`` (``--out DIR``, default
``results``: the run's one folder) and runs it with
``vertebrae run`` (the same Snakemake workflow, so the same fingerprints and cache as that YAML run by hand); then
prints the report's ranking and its paired comparison (the verdicts). The run shows ``vertebrae run``'s progress
display (``vertebrae.cli.progress``; ``--verbose``: Snakemake's own output). ``--print-config`` prints the YAML and
runs nothing.

A spec is ``PREFIX:VALUE[,key=value...]``: the options are keys of the source or extractor declaration (values
read as YAML scalars: ``query_every=4`` is a number); ``name=`` names a candidate. The prefixes are the two
tables below: a data prefix is a source type (accepted once the schema / the retrieval loaders know it, so a new
source type is one line here), a model prefix an extractor type. An unknown prefix is refused, naming it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError

PROTOCOLS = {"labelled": "benchmarks", "retrieval": "retrieval", "zero-shot": "zero_shot"}
PROMPT_KEYS = ("prompts", "templates", "template_ids", "class_names")  # a zero-shot benchmark's prompt keys
SPLIT_KEYS = ("query_every", "grade")  # retrieval over a labelled source: options of the label_split
_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def _path_source(kind: str) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    return lambda value, opts: {"type": kind, "path": value, **opts}


# data prefix -> (source type it needs, builder(value, options) -> source declaration)
DATA_SPECS: dict[str, tuple[str, Callable[[str, dict[str, Any]], dict[str, Any]]]] = {
    "npz": ("npz", _path_source("npz")),
    "npy": ("npy", _path_source("npy")),
    "sparse_npz": ("sparse_npz", _path_source("sparse_npz")),
    "hdf5": ("hdf5", _path_source("hdf5")),
    "csv": ("csv", _path_source("csv")),
    "manifest": ("manifest", _path_source("manifest")),
    "sklearn": ("sklearn", lambda value, opts: {"type": "sklearn", "name": value, **opts}),
    "npz_pair": ("npz_pair", _path_source("npz_pair")),
    "beir": ("beir", _path_source("beir")),
    "image_folder": ("image_folder", _path_source("image_folder")),
    "hf_dataset": ("hf_dataset", lambda value, opts: {"type": "hf_dataset", "name": value, **opts}),
}


def _model_source(kind: str) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    """``model:`` a folder or hub id, or ``model_path_from:`` an importable ``module:function``."""

    def build(value: str, opts: dict[str, Any]) -> dict[str, Any]:
        if re.fullmatch(r"[\w.]+:[\w.]+", value) and not Path(value).exists():
            return {"type": kind, "model_path_from": value, **opts}
        return {"type": kind, "model": value, **opts}

    return build


def _timm(value: str, opts: dict[str, Any]) -> dict[str, Any]:
    if Path(value).exists():  # a local checkpoint folder or file
        return {"type": "timm", "checkpoint": value, **opts}
    return {"type": "timm", "model": value, "pretrained": True, **opts}


def _open_clip(value: str, opts: dict[str, Any]) -> dict[str, Any]:
    if value.startswith(("local-dir:", "hf-hub:")) or "/" not in value:
        return {"type": "open_clip", "model": value, **opts}
    model, _, pretrained = value.rpartition("/")
    return {"type": "open_clip", "model": model, "pretrained": pretrained, **opts}


# model prefix -> builder(value, options) -> extractor declaration
MODEL_SPECS: dict[str, Callable[[str, dict[str, Any]], dict[str, Any]]] = {
    "timm": _timm,
    "st": _model_source("sentence_transformers"),
    "open_clip": _open_clip,
    "hf_text": _model_source("hf_text"),
    "hf_vision": _model_source("hf_vision"),
    "hf_multimodal": _model_source("hf_multimodal"),
    "precomputed": lambda value, opts: {"type": "precomputed", "path": value, **opts},
}


def parse_spec(spec: str, known: Sequence[str], *, argument: str) -> tuple[str, str, dict[str, Any]]:
    """(prefix, value, options) of ``PREFIX:VALUE[,key=value...]``; an unknown prefix is refused, naming it."""
    prefix, sep, rest = spec.partition(":")
    if not sep or prefix not in known:
        why = f"unknown prefix {prefix!r}" if sep else "no PREFIX:"
        raise ConfigError(f"{argument} {spec!r}: {why}; known prefixes: {', '.join(known)}")
    value, *pairs = re.split(r",(?![^\[]*\])", rest)  # commas inside [...] belong to a list: hidden_layers=[4,8]
    options: dict[str, Any] = {}
    for pair in pairs:
        key, eq, text = pair.partition("=")
        if not eq or not key:
            raise ConfigError(f"{argument} {spec!r}: option {pair!r} is not key=value")
        options[key] = _option_value(text, f"{argument} {spec!r}: option {key}") if text else ""
    if not value:
        raise ConfigError(f"{argument} {spec!r}: nothing after {prefix}:")
    return prefix, value, options


def _option_value(text: str, what: str) -> Any:
    """An option's value read as YAML data (``safe_load``); a tag (``!!python/object:...``, ``!!str``, ``!x``) is
    refused before anything is constructed, as is text that is not YAML, naming the option."""
    import yaml

    try:
        tags = [token for token in yaml.scan(text, Loader=yaml.SafeLoader) if isinstance(token, yaml.TagToken)]
        if not tags:
            return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{what}: {text!r} is not a YAML value ({problem}); quote it to give it as text") from None
    handle, suffix = tags[0].value
    tag = f"!<{suffix}>" if handle is None else handle + suffix
    raise ConfigError(f"{what}: {text!r} holds the YAML tag {tag!r}; an option is "
                      "plain data (a number, text, true/false or a [list]), so tags are refused: quote the value to "
                      "give it as text")


def _known_sources() -> tuple[set[str], set[str]]:
    """(labelled source types in the schema, retrieval source types the loaders know)."""
    from vertebrae.data.declared.retrieval import LOADERS
    from vertebrae.planning.config import config_schema

    labelled = set(config_schema()["$defs"]["source"]["properties"]["type"]["enum"])
    return labelled, set(LOADERS)


def data_source(spec: str, protocol: str) -> tuple[str, dict[str, Any]]:
    """(benchmark name, the dataset declaration) of a ``--data`` spec for ``protocol``."""
    prefix, value, opts = parse_spec(spec, list(DATA_SPECS), argument="--data")
    kind, build = DATA_SPECS[prefix]
    labelled, retrieval = _known_sources()
    name = _NAME.sub("_", Path(value).stem if prefix != "sklearn" else value).strip("_.-") or "data"
    if protocol == "retrieval" and kind in retrieval:
        return name, {"source": build(value, opts)}
    if kind not in labelled:
        known = sorted(p for p, (k, _) in DATA_SPECS.items() if k in labelled or (protocol == "retrieval" and k in retrieval))
        raise ConfigError(f"--data {spec!r}: source type {kind!r} is not available for protocol {protocol} in this "
                          f"version; data prefixes: {', '.join(known)}")
    split = {k: opts.pop(k) for k in SPLIT_KEYS if k in opts}
    source = build(value, opts)
    dataset: dict[str, Any] = {"source": source}
    if kind == "sklearn":  # reads no file: its content is the identity
        dataset["identity"] = {"kind": "content"}
    if protocol == "retrieval":
        dataset = {**dataset, "source": {"type": "label_split", **split, "source": source}}
    elif split:
        raise ConfigError(f"--data {spec!r}: {', '.join(split)} apply to --protocol retrieval only")
    return name, dataset


def _default_name(decl: Mapping[str, Any]) -> str:
    """A candidate's name from what it loads: the model name or the last part of its path."""
    value = str(decl.get("model") or decl.get("checkpoint") or decl.get("model_path_from") or decl.get("path") or "")
    for source in ("local-dir:", "hf-hub:"):
        value = value.removeprefix(source)
    if decl.get("model_path_from"):
        value = value.partition(":")[0]
    return _NAME.sub("_", value.rstrip("/").rpartition("/")[2].removesuffix(".safetensors")).strip("_.-")


def candidates(specs: Sequence[str]) -> dict[str, dict[str, Any]]:
    """{candidate name: extractor declaration} of the ``--model`` specs, in order (names made unique)."""
    out: dict[str, dict[str, Any]] = {}
    for spec in specs:
        prefix, value, opts = parse_spec(spec, list(MODEL_SPECS), argument="--model")
        given = str(opts.pop("name", ""))
        decl = MODEL_SPECS[prefix](value, opts)
        name = given or _default_name(decl) or prefix
        base, n = name, 2
        while name in out:
            name, n = f"{base}-{n}", n + 1
        out[name] = decl
    return out


def metric_entry(spec: str) -> dict[str, Any]:
    """A ``--metric TYPE[,key=value...]`` as the YAML's ``metrics:`` entry ``{type: TYPE, key: value...}``, checked
    as the YAML's entries are (the schema, then the metric's own validation); an error names the flag."""
    from vertebrae.planning.config import config_schema

    types = config_schema()["$defs"]["metric"]["properties"]["type"]["enum"]
    kind, sep, rest = spec.partition(",")
    if kind not in types:
        raise ConfigError(f"--metric {spec!r}: unknown metric {kind!r}; metrics: {', '.join(types)} "
                          "(TYPE[,key=value...], the keys of the YAML's metrics: entries)")
    options: dict[str, Any] = {}
    for pair in re.split(r",(?![^\[]*\])", rest) if sep else []:  # as --model's options: [lists] keep their commas
        key, eq, text = pair.partition("=")
        if not eq or not key:
            raise ConfigError(f"--metric {spec!r}: option {pair!r} is not key=value")
        options[key] = _option_value(text, f"--metric {spec!r}: option {key}") if text else ""
    return {"type": kind, **options}


def _check_metric(spec: str, entry: Mapping[str, Any], dataset: Mapping[str, Any]) -> None:
    from vertebrae.planning.config import validate_config
    from vertebrae.scoring.metric_registry import metric_from_config

    try:  # the metric's own keys first (their names per type), then the schema's value checks
        metric_from_config(dict(entry))
        validate_config({"benchmarks": {"b": {"dataset": dataset, "extractors": {"x": {"type": "precomputed"}},
                                              "metrics": [dict(entry)]}}})
    except (ConfigError, ValueError, TypeError) as exc:
        text = re.sub(r"config key benchmarks\.b\.metrics\.0\.?", "key ", str(exc)).replace("key :", "")
        raise ConfigError(f"--metric {spec!r}: {text}") from None


def _check_primary(protocol: str, bench: Mapping[str, Any], primary: str) -> None:
    """``--primary`` is one of the metrics the benchmark reports (as the plan checks it), or an error naming it."""
    if protocol == "labelled":
        from vertebrae.scoring.metric_registry import metric_from_config

        names = ["overlap"]
        for entry in bench.get("metrics", []):
            metric = metric_from_config(entry)
            names += list(getattr(metric, "metric_names", lambda: [metric.name])())
        if primary not in names:
            raise ConfigError(f"--primary {primary!r}: not one of the benchmark's metrics {names} (add one with "
                              "--metric TYPE[,key=value...])")
    elif protocol == "retrieval":
        from vertebrae.scoring.retrieval.config import RetrievalConfig

        try:
            RetrievalConfig.from_dict(dict(bench["retrieval"]))
        except (ConfigError, ValueError) as exc:
            raise ConfigError(f"--primary {primary!r}: {exc}") from None


def read_prompts(path: str) -> dict[str, Any]:
    """The zero-shot prompt keys of ``--prompts FILE``: a YAML or JSON mapping of the zero-shot benchmark's keys
    (``prompts``, ``templates``, ``template_ids``, ``class_names``), or a text file of templates, one a line."""
    import yaml

    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--prompts {path}: cannot read it ({exc})") from None
    if file.suffix.lower() == ".txt":
        templates = [line.strip() for line in text.splitlines() if line.strip()]
        if not templates:
            raise ConfigError(f"--prompts {path}: no template in it (one a line, with {{label}})")
        return {"templates": templates}
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"--prompts {path}: not YAML or JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, Mapping) or not data or set(map(str, data)) - set(PROMPT_KEYS):
        found = sorted(map(str, data)) if isinstance(data, Mapping) else type(data).__name__
        raise ConfigError(f"--prompts {path}: expected a mapping of {', '.join(PROMPT_KEYS)} (a zero-shot benchmark's "
                          f"prompt keys), got {found}")
    return dict(data)


def _asks(protocol: str, bench: dict[str, Any], metrics: Sequence[str], primary: str | None,
          prompts: str | None) -> None:
    """``--metric``, ``--primary`` and ``--prompts`` into the benchmark declaration, where the YAML holds them."""
    if metrics and protocol != "labelled":
        raise ConfigError(f"--metric {metrics[0]!r}: applies to --protocol labelled only (retrieval: --primary "
                          "METRIC picks among its metrics; zero-shot: --primary accuracy | macro_f1 | "
                          "balanced_accuracy)")
    entries = [metric_entry(spec) for spec in metrics]
    for spec, entry in zip(metrics, entries):
        _check_metric(spec, entry, bench["dataset"])
    if entries:
        bench["metrics"] = entries
    if primary is not None:
        key = {"labelled": None, "retrieval": "retrieval", "zero-shot": "zero_shot"}[protocol]
        if key is None:
            bench["primary_metric"] = primary
        else:
            bench[key] = {**bench.get(key, {}), "primary_metric": primary}
        _check_primary(protocol, bench, primary)
    if protocol == "zero-shot":
        if prompts is None:
            raise ConfigError("--protocol zero-shot needs --prompts FILE (templates, or prompts per class)")
        bench.update(read_prompts(prompts))
    elif prompts is not None:
        raise ConfigError(f"--prompts {prompts}: applies to --protocol zero-shot only")


def _primary_error(exc: Exception, protocol: str, primary: str | None) -> Exception:
    """A schema or plan error of ``--primary``, naming the flag."""
    text = str(exc)
    if primary is not None and "primary_metric" in text:
        return ConfigError(f"--primary {primary!r}: {text}")
    return exc


def build_config(protocol: str, data: str, models: Sequence[str], shards: int | None = None,
                 conventions: str | None = None, *, metrics: Sequence[str] = (), primary: str | None = None,
                 prompts: str | None = None, name: str | None = None) -> tuple[str, dict[str, Any]]:
    """(benchmark name, the config a user would have written), validated by the schema. ``conventions``: the
    retrieval benchmark's ``retrieval.conventions`` (an unknown name is refused naming the known ones); ``metrics``
    (``--metric TYPE[,key=value...]``, labelled: the YAML's ``metrics:`` entries), ``primary`` (the benchmark's
    primary metric), ``prompts`` (zero-shot: ``read_prompts``), ``name`` (the benchmark's name; default: the
    data's)."""
    from vertebrae.planning.config import validate_config

    if protocol not in PROTOCOLS:
        raise ConfigError(f"--protocol {protocol!r}: one of {', '.join(PROTOCOLS)}")
    if not models:
        raise ConfigError("--model: give at least one model (e.g. st:FOLDER, timm:NAME)")
    if conventions is not None:
        from vertebrae.scoring.retrieval.conventions import conventions as known_conventions

        if protocol != "retrieval":
            raise ConfigError(f"--conventions {conventions!r}: applies to --protocol retrieval only")
        known_conventions(conventions, owner="--conventions")
    default, dataset = data_source(data, protocol)
    if name is not None and not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", name):
        raise ConfigError(f"--name {name!r}: letters, digits, '_', '-' and '.', starting with a letter, digit or '_' "
                          "(one safe path component)")
    name = name or default
    config: dict[str, Any] = {"embedding": {"shards": shards}} if shards is not None else {}
    bench: dict[str, Any] = {"dataset": dataset, "extractors": candidates(models)}
    if conventions is not None:
        bench["retrieval"] = {"conventions": conventions}
    _asks(protocol, bench, metrics, primary, prompts)
    config[PROTOCOLS[protocol]] = {name: bench}
    try:
        validate_config(config)
    except ConfigError as exc:
        raise _primary_error(exc, protocol, primary) from None
    return name, config


def _section(markdown: str, title: str) -> list[str]:
    lines, inside = [], False
    for line in markdown.splitlines():
        if line.startswith("## "):
            if inside:
                break
            inside = line.strip() == f"## {title}"
        if inside:
            lines.append(line)
    return lines


def run_eval(protocol: str, data: str, models: Sequence[str], shards: int | None = None, cores: int | None = None,
             profile: str | None = None, print_config: bool = False, conventions: str | None = None,
             verbose: bool = False, out: str | None = None, metrics: Sequence[str] | None = None, primary: str | None = None,
             prompts: str | None = None, name: str | None = None) -> int:
    """``vertebrae eval``: Snakemake's exit status (0 after printing the ranking and the verdicts). The run is shown
    by ``vertebrae run``'s progress display (``verbose``: Snakemake's output instead); an interrupted run is resumed
    by the same ``vertebrae eval`` command."""
    import shlex

    import yaml

    from vertebrae.reports.comparison import TITLE
    from vertebrae.reports.text import terminal_text
    from vertebrae.planning import plan
    from vertebrae.cli.commands import run_workflow
    from vertebrae.core.out_folder import check_out_folder, normal_out
    from vertebrae.planning.paths import report_paths

    metrics = list(metrics or ())
    asked = name
    name, config = build_config(protocol, data, models, shards, conventions, metrics=metrics, primary=primary,
                                prompts=prompts, name=name)
    text = yaml.safe_dump(config, sort_keys=False)
    if print_config:
        print(text, end="")
        return 0
    folder = normal_out(out)  # --out DIR, else results/: the run's one folder (vertebrae.core.out_folder)
    check_out_folder(folder, where="--out")
    plan({**config, "out": folder})  # every plan-time check (the out folder, models, layers, prompts) before any job
    path = Path(folder) / "eval" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    args = ["--profile", profile] if profile else []
    if cores is not None or not profile:
        args += ["--cores", str(cores or 1)]
    again = ["vertebrae", "eval", "--protocol", protocol, "--data", data, *(a for m in models for a in ("--model", m)),
             *(["--conventions", conventions] if conventions else []), *(["--shards", str(shards)] if shards else []),
             *(["--cores", str(cores)] if cores else []), *(["--profile", profile] if profile else []),
             *(a for m in metrics for a in ("--metric", m)), *(["--primary", primary] if primary else []),
             *(["--prompts", prompts] if prompts else []), *(["--name", asked] if asked else [])]
    again += ["--out", out] if out is not None else []
    status = run_workflow(path, args, verbose=verbose, resume=shlex.join(again), out=out)
    if status:
        return status
    report = report_paths(name, folder)["markdown"]
    markdown = Path(report).read_text(encoding="utf-8")
    print(f"\n{name} ({protocol}; config {path}, report {report})")
    lines = _section(markdown, "Ranking") + [""] + _section(markdown, TITLE)
    print("\n".join(terminal_text(line) for line in lines).rstrip())
    return 0


__all__ = ["DATA_SPECS", "MODEL_SPECS", "PROTOCOLS", "build_config", "candidates", "data_source", "parse_spec",
           "run_eval"]
