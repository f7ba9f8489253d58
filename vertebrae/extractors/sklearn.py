"""SklearnExtractor: a scikit-learn transformer or pipeline, fitted once on the fit endpoint.

Every ``random_state`` parameter left as None is set to the extractor's ``random_state`` before fitting, so
fits are reproducible. A live estimator is reusable across runs only with an explicit ``cache_identity``;
one built from declared steps (``from_steps``, what the workflow config uses) carries its declaration as
its identity. Fitted state persists through skops (never pickle) and loads only with an allow-list of types:
scikit-learn, numpy and scipy types plus the estimator classes that were declared.
"""

from __future__ import annotations

import base64
import importlib
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.errors import ArtifactError, ConfigError, ValidationError
from vertebrae.core.fingerprint import to_json_value
from vertebrae.core.callables import import_object
from vertebrae.extractors.base import Extractor

_TORCH_SHIM = "sklearn.externals.array_api_compat.torch"


def _skops_io() -> Any:
    """``skops.io``, imported without torch.

    skops builds its trusted-type list from ``sklearn.utils.all_estimators()``, whose package walk imports every
    subpackage, including scikit-learn's vendored torch array-API shim, which imports torch (3-4 s per process)
    although no estimator lives there. While skops loads, the shim is marked unimportable (the walk skips
    packages that fail to import); afterwards it imports normally again.
    """
    import sys

    hide = not {"skops.io", "torch", _TORCH_SHIM} & sys.modules.keys()  # nothing to save once any is loaded
    if hide:
        sys.modules[_TORCH_SHIM] = None  # type: ignore[assignment]
    try:
        import skops.io
    finally:
        if hide and sys.modules.get(_TORCH_SHIM, 0) is None:
            del sys.modules[_TORCH_SHIM]
    return skops.io

TRUSTED_MODULE_PREFIXES = ("sklearn.", "numpy.", "scipy.sparse.", "builtins.")


def _class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _trusted_library_type(path: str) -> bool:
    """A class (never a function such as ``builtins.eval`` or ``numpy.load``) of a trusted library."""
    if not path.startswith(TRUSTED_MODULE_PREFIXES):
        return False
    module_name, _, attr = path.rpartition(".")
    try:
        return isinstance(getattr(importlib.import_module(module_name), attr), type)
    except (ImportError, AttributeError, ValueError):
        return False


class SklearnExtractor(Extractor):
    """Embeddings from ``estimator.transform`` after ``estimator.fit`` on the fit endpoint."""

    def __init__(
        self,
        name: str,
        estimator: Any,
        *,
        cache_identity: str | None = None,
        allow_sparse: bool = True,
        already_fitted: bool = False,
        random_state: int = 0,
    ) -> None:
        if not hasattr(estimator, "transform"):
            raise ValidationError(f"extractor {name!r}: {type(estimator).__name__} has no transform method")
        if cache_identity is not None and (not isinstance(cache_identity, str) or not cache_identity):
            raise ValidationError(f"extractor {name!r}: cache_identity must be a non-empty string")
        self.name = name
        self.estimator = estimator
        self.cache_identity = cache_identity
        self.allow_sparse = bool(allow_sparse)
        self.already_fitted = bool(already_fitted)
        self.learns = not already_fitted
        self.random_state = int(random_state)
        self._fitted = estimator if already_fitted else None
        self._session_token = uuid.uuid4().hex
        self._declared_classes: tuple[str, ...] = ()

    @classmethod
    def from_steps(
        cls, name: str, steps: Sequence[Mapping[str, Any]], *, random_state: int = 0, allow_sparse: bool = True, where: str = "extractor"
    ) -> SklearnExtractor:
        """A pipeline declared as ``[{"estimator": "sklearn.decomposition.PCA", "params": {...}}, ...]``."""
        from sklearn.pipeline import make_pipeline

        if not steps:
            raise ConfigError(f"{where}.steps: at least one step is required")
        built, declared = [], []
        for i, step in enumerate(steps):
            if not isinstance(step, Mapping) or not isinstance(step.get("estimator"), str):
                raise ConfigError(f"{where}.steps[{i}].estimator: a step needs an 'estimator' import path, got {step!r}")
            estimator_cls = import_object(step["estimator"], where=f"{where}.steps[{i}].estimator")
            params = dict(step.get("params") or {})
            try:
                built.append(estimator_cls(**params))
            except TypeError as exc:
                raise ConfigError(f"{where}.steps[{i}].params: {exc}") from None
            declared.append({"estimator": step["estimator"], "params": to_json_value(params)})
        identity = {"steps": declared}
        from vertebrae.core.fingerprint import canonical_json

        extractor = cls(name, make_pipeline(*built), cache_identity=canonical_json(identity), allow_sparse=allow_sparse, random_state=random_state)
        extractor._declared_classes = tuple(_class_path(type(step)) for step in built)
        return extractor

    @property
    def reusable(self) -> bool:
        return self.cache_identity is not None

    def recipe(self) -> dict[str, Any]:
        identity = self.cache_identity if self.cache_identity is not None else f"unsafe-session:{self._session_token}"
        return {
            "type": "sklearn",
            "identity": identity,
            "random_state": self.random_state,
            "allow_sparse": self.allow_sparse,
            "already_fitted": self.already_fitted,
        }

    def _prepare(self, inputs: Any) -> Any:
        return inputs.toarray() if sp.issparse(inputs) and not self.allow_sparse else inputs

    def fit(self, inputs: Any) -> None:
        from sklearn.base import clone

        estimator = clone(self.estimator)
        unseeded = {key: self.random_state for key, value in estimator.get_params(deep=True).items()
                    if key.endswith("random_state") and value is None}
        estimator.set_params(**unseeded)
        self._fitted = estimator.fit(self._prepare(inputs))

    def transform(self, inputs: Any, *, branch: str | None = None) -> Any:
        if self._fitted is None:
            raise ValidationError(f"extractor {self.name!r} is not fitted: call fit() or load its fitted state first")
        out = self._fitted.transform(self._prepare(inputs))
        return out if sp.issparse(out) else np.asarray(out)

    def fitted_state(self) -> dict[str, Any]:
        skops_io = _skops_io()
        if self._fitted is None:
            raise ValidationError(f"extractor {self.name!r} has no fitted state to save")
        return {"format": "skops", "data": base64.b64encode(skops_io.dumps(self._fitted)).decode("ascii")}

    def load_fitted(self, state: Mapping[str, Any], *, source: str = "fitted state") -> None:
        skops_io = _skops_io()
        if state.get("format") != "skops":
            raise ArtifactError(f"{source}: unknown fitted-state format {state.get('format')!r}, expected 'skops'")
        data = base64.b64decode(state["data"])
        untrusted = skops_io.get_untrusted_types(data=data)
        allowed = set(self._declared_classes) | {_class_path(type(self.estimator))}
        refused = [t for t in untrusted if t not in allowed and not _trusted_library_type(t)]
        if refused:
            raise ArtifactError(f"{source}: refusing to load untrusted types {refused}")
        self._fitted = skops_io.loads(data, trusted=untrusted)
