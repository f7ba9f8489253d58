"""The MiniBatchKMeans settings a scoring config may pass (``kmeans_kwargs``), each checked by name, type and range.

The same rules as the config schema's ``$defs/kmeans_kwargs``, for configs built in Python: a bad value is refused
where the config is made, naming the key, never inside scikit-learn in a score job. ``n_clusters`` (the k keys)
and ``random_state`` (the seed) are set by vertebrae and refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from vertebrae.core.errors import ValidationError
from vertebrae.core.records import is_int, is_real

FORBIDDEN_KMEANS_KWARGS = ("n_clusters", "random_state")


def _int_at_least(low: int, *, null: bool = False) -> Callable[[Any], bool]:
    return lambda v: (null and v is None) or (is_int(v) and v >= low)


def _real_at_least_zero(v: Any) -> bool:
    return is_real(v) and v == v and v >= 0 and v != float("inf")


#: key -> (accepts the value, what it must be)
KMEANS_KWARGS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "batch_size": (_int_at_least(1), "an integer >= 1"),
    "compute_labels": (lambda v: isinstance(v, bool), "true or false"),
    "init": (lambda v: v in ("k-means++", "random"), "one of ['k-means++', 'random']"),
    "init_size": (_int_at_least(1, null=True), "an integer >= 1 or null"),
    "max_iter": (_int_at_least(1), "an integer >= 1"),
    "max_no_improvement": (_int_at_least(0, null=True), "an integer >= 0 or null"),
    "n_init": (lambda v: v == "auto" or (is_int(v) and v >= 1), "'auto' or an integer >= 1"),
    "reassignment_ratio": (_real_at_least_zero, "a finite number >= 0"),
    "tol": (_real_at_least_zero, "a finite number >= 0"),
    "verbose": (lambda v: isinstance(v, bool) or (is_int(v) and v >= 0), "true, false or an integer >= 0"),
}


def check_kmeans_kwargs(kwargs: Any, owner: str) -> dict[str, Any]:
    """``kwargs`` as a dict after refusing (ValidationError naming ``owner.kmeans_kwargs.<key>``) a non-mapping,
    an unknown or forbidden key, and a value of the wrong type or range."""
    if not isinstance(kwargs, Mapping):
        raise ValidationError(f"{owner}.kmeans_kwargs must be a mapping, got {type(kwargs).__name__}")
    unknown = sorted(str(key) for key in kwargs if key not in KMEANS_KWARGS and key not in FORBIDDEN_KMEANS_KWARGS)
    if unknown:
        raise ValidationError(f"{owner}.kmeans_kwargs: unknown key(s) {unknown}; MiniBatchKMeans takes "
                              f"{list(KMEANS_KWARGS)}")
    for name in FORBIDDEN_KMEANS_KWARGS:
        if name in kwargs:
            hint = "pass seed= to the scorer" if name == "random_state" else "use k"
            raise ValidationError(f"{owner}.kmeans_kwargs may not set {name!r}; {hint}")
    for key, value in kwargs.items():
        accepts, wanted = KMEANS_KWARGS[key]
        if not accepts(value):
            raise ValidationError(f"{owner}.kmeans_kwargs.{key} must be {wanted}, got {value!r}")
    return dict(kwargs)


__all__ = ["FORBIDDEN_KMEANS_KWARGS", "KMEANS_KWARGS", "check_kmeans_kwargs"]
