"""Every labelled metric type by its config name: the custom ones of ``scoring.metrics`` and the built-in
``knn``, ``linear_probe``, ``few_shot`` and ``clustering`` (one module each under ``vertebrae.scoring``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from vertebrae.core.errors import ConfigError
from vertebrae.scoring import metrics as _custom
from vertebrae.scoring.clustering import ClusteringMetric
from vertebrae.scoring.few_shot import FewShotMetric
from vertebrae.scoring.knn import KNNMetric
from vertebrae.scoring.linear_probe import LinearProbeMetric
from vertebrae.scoring.metrics import Metric

_LISTS = ("Cs", "shots")


def _builder(cls: type, keys: tuple[str, ...]) -> tuple[Callable[[Mapping[str, Any]], Metric], tuple[str, ...]]:
    def build(entry: Mapping[str, Any]) -> Metric:
        kwargs = {key: entry[key] for key in keys if key in entry}
        for key in _LISTS:
            if isinstance(kwargs.get(key), list):
                kwargs[key] = tuple(kwargs[key])
        return cls(**kwargs)
    return build, keys


#: built-in type -> (builder, keys allowed beside "type"); the same keys as the class's recipe()
BUILTIN_TYPES = {
    "knn": _builder(KNNMetric, ("name", "k", "weighting", "temperature", "folds", "split", "primary", "group_folds",
                                "small_classes", "eval_split")),
    "linear_probe": _builder(LinearProbeMetric, ("name", "Cs", "folds", "inner_folds", "split", "primary", "max_iter",
                                                 "group_folds", "small_classes", "solver", "recipe", "lr", "epochs",
                                                 "batch_size", "val_proportion", "n_experiments",
                                                 "samples_per_label", "device", "eval_split")),
    "few_shot": _builder(FewShotMetric, ("name", "shots", "episodes", "split", "primary_shots", "group_episodes",
                                         "small_classes")),
    "clustering": _builder(ClusteringMetric, ("name", "n_init", "repeats", "split", "primary", "algorithm", "batch_size",
                                              "normalize")),
}


def metric_from_config(entry: Mapping[str, Any]) -> Metric:
    """A Metric from its JSON form (``recipe()``): a built-in type here, any other through
    ``scoring.metrics.metric_from_config``; ConfigError naming the offending key."""
    kind = entry.get("type") if isinstance(entry, Mapping) else None
    if kind not in BUILTIN_TYPES:
        if isinstance(entry, Mapping) and kind not in _custom.METRIC_TYPES:
            raise ConfigError(f"metric config key 'type' must be one of "
                              f"{sorted([*_custom.METRIC_TYPES, *BUILTIN_TYPES])}, got {kind!r}")
        return _custom.metric_from_config(entry)
    builder, allowed = BUILTIN_TYPES[kind]
    unknown = sorted(str(key) for key in entry if key != "type" and key not in allowed)
    if unknown:
        raise ConfigError(f"metric config of type {kind!r} has unknown key(s) {unknown}; allowed: {list(allowed)}")
    return builder(entry)


__all__ = ["BUILTIN_TYPES", "metric_from_config"]
