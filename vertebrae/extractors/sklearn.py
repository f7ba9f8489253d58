"""SklearnExtractor: a scikit-learn transformer or pipeline, fitted once on the fit endpoint.

Every ``random_state`` parameter left as None is set to the extractor's ``random_state`` before fitting, so
fits are reproducible. A live estimator is reusable across runs only with an explicit ``cache_identity``;
one built from declared steps (``from_steps``, what the workflow config uses) carries its declaration as
its identity.

A declared step may name only a scikit-learn estimator class, or a class from a module listed in the
extractor's ``trusted_modules`` (listing a module *runs its code*: it is imported and the class instantiated
during planning). Anything else is refused, naming the config key, before it is imported.

Fitted state persists through skops (never pickle), byte-reproducibly (fixed zip timestamps, object ids
renumbered in order). It loads only with skops' own default trust plus exactly the types the declared steps
produce (the step classes and the internal types listed in ``STATE_TYPES``); the loaded estimator must then
match the declared steps, class and parameters. Anything else is an ArtifactError naming the file.
"""
from __future__ import annotations

import base64
import io
import json
import math
import uuid
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ArtifactError, ConfigError, ValidationError
from vertebrae.core.fingerprint import canonical_json, to_json_value
from vertebrae.core.numpy_types import numpy_types
from vertebrae.core.callables import import_object, within_modules
from vertebrae.core import check_records
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

_TREES = ("sklearn.neighbors._kd_tree.KDTree", "sklearn.neighbors._ball_tree.BallTree", "sklearn.metrics._dist_metrics.")
STATE_TYPES: dict[str, tuple[str, ...]] = {
    # fitted-state types skops does not trust by default, per declared class (a trailing "." admits a module)
    "sklearn.ensemble._forest.RandomTreesEmbedding": ("sklearn.tree._tree.Tree",),
    "sklearn.random_projection.SparseRandomProjection": ("scipy.sparse._csr.csr_matrix",),
    "sklearn.neighbors._graph.KNeighborsTransformer": _TREES,
    "sklearn.neighbors._graph.RadiusNeighborsTransformer": _TREES,
    "sklearn.manifold._isomap.Isomap": _TREES,
    "sklearn.manifold._locally_linear.LocallyLinearEmbedding": _TREES,
    "sklearn.cluster._bisect_k_means.BisectingKMeans": (
        "sklearn.cluster._bisect_k_means._BisectingTree", "sklearn.cluster._kmeans._kmeans_single_lloyd",
        "sklearn.cluster._kmeans._kmeans_single_elkan"),
    "sklearn.cluster._agglomerative.FeatureAgglomeration": ("numpy.mean",),
    "sklearn.preprocessing._polynomial.SplineTransformer": (
        "scipy.interpolate._bsplines.BSpline", "scipy._lib.array_api_compat.numpy._aliases.asarray"),
}
_ALWAYS_TRUSTED = ("numpy.dtype",)
_STEPS_CHECK = "sklearn-steps"  # check_records: a declaration of steps passed ``_built_steps``
_DECIDING = ("scikit-learn", "skops", "numpy", "scipy")  # the packages whose versions decide that check
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def _class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _admits(patterns: Sequence[str], name: str) -> bool:
    return any(name == p or (p.endswith(".") and name.startswith(p)) for p in patterns)


def _declared_unsupported() -> tuple[str, ...] | None:
    """The class paths skops's ``UNSUPPORTED_TYPES`` names, read from the source of ``skops.io._sklearn`` without
    importing skops (3 s: its trusted-type list walks every scikit-learn module), where that module assigns the set
    literally from names it imports from scikit-learn; None otherwise (then skops is imported)."""
    import ast
    import importlib.util

    try:
        spec = importlib.util.find_spec("skops")
        locations = list(spec.submodule_search_locations or ()) if spec else []
        tree = ast.parse(Path(locations[0], "io", "_sklearn.py").read_text(encoding="utf-8"))
    except (ImportError, IndexError, OSError, SyntaxError, ValueError):
        return None
    imported = {alias.asname or alias.name: f"{node.module}.{alias.name}" for node in tree.body
                if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("sklearn")
                for alias in node.names}
    sets = [node.value for node in tree.body if isinstance(node, ast.Assign) and isinstance(node.value, ast.Set)
            and [getattr(t, "id", None) for t in node.targets] == ["UNSUPPORTED_TYPES"]]
    if len(sets) != 1 or not all(isinstance(e, ast.Name) and e.id in imported for e in sets[0].elts):
        return None
    return tuple(imported[e.id] for e in sets[0].elts)


def _skops_unsupported() -> tuple[type, ...]:
    """The estimator classes skops refuses to save (its ``UNSUPPORTED_TYPES``; none when skops does not list them)."""
    import sys

    declared = _declared_unsupported()
    if declared is not None:
        return tuple(import_object(path, where="skops.io._sklearn.UNSUPPORTED_TYPES", trusted_modules=("sklearn",))
                     for path in declared)
    _skops_io()
    return tuple(getattr(sys.modules.get("skops.io._sklearn"), "UNSUPPORTED_TYPES", ()))


def _step_class(path: str, trusted_modules: Sequence[str], where: str) -> type:
    """The class a step names: a scikit-learn estimator, or a class of a trusted module; checked before import."""
    from sklearn.base import BaseEstimator

    cls = import_object(path, where=where, trusted_modules=("sklearn", *trusted_modules))
    if not isinstance(cls, type):
        raise ConfigError(f"{where}: {path!r} names a {type(cls).__name__}, not an estimator class")
    home = cls.__module__
    if within_modules(home, ("sklearn",)) and not issubclass(cls, BaseEstimator):
        raise ConfigError(f"{where}: {path!r} is not a scikit-learn estimator")
    if not within_modules(home, ("sklearn", *trusted_modules)):
        raise ConfigError(f"{where}: {path!r} resolves to {_class_path(cls)}, outside the trusted modules")
    if not hasattr(cls, "transform"):
        raise ConfigError(f"{where}: {_class_path(cls)} has no transform method")
    if issubclass(cls, _skops_unsupported()):  # e.g. Birch: its fit would succeed and its save fail
        raise ConfigError(f"{where}: {_class_path(cls)} cannot be saved once fitted (skops does not support it), so "
                          "it cannot be a step; pick another estimator")
    return cls


def _built_steps(steps: Sequence[Mapping[str, Any]], trusted: Sequence[str], where: str) -> list[Any]:
    """The estimators of declared ``steps``, each class checked (``_step_class``) and its parameters validated."""
    built = []
    for i, step in enumerate(steps):
        estimator_cls = _step_class(step["estimator"], trusted, f"{where}.steps[{i}].estimator")
        params = dict(step.get("params") or {})
        try:
            estimator = estimator_cls(**params)
        except TypeError as exc:
            raise ConfigError(f"{where}.steps[{i}].params: {exc}") from None
        validate = getattr(estimator, "_validate_params", None)
        if callable(validate) and isinstance(getattr(estimator, "_parameter_constraints", None), dict):
            try:
                validate()
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"{where}.steps[{i}].params ({estimator_cls.__name__}): {exc}") from None
        built.append(estimator)
    return built


def _pipeline(built: Sequence[Any]) -> Any:
    from sklearn.pipeline import make_pipeline

    return make_pipeline(*built)


class _Unbuilt:
    """A declared pipeline a record says passed its checks (``check_records``), built when the extractor first needs it."""

    def __init__(self, build: Any) -> None:
        self.build = build


def _canonical_zip(data: bytes, *, rewrite: Any = None) -> bytes:
    """The zip ``data`` rewritten with fixed timestamps; ``rewrite(name, content) -> (name, content)`` per entry."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            name, content = info.filename, zin.read(info)
            if rewrite is not None:
                name, content = rewrite(name, content)
            entry = zipfile.ZipInfo(name, date_time=_ZIP_EPOCH)
            entry.compress_type, entry.external_attr = info.compress_type, 0o600 << 16
            zout.writestr(entry, content)
    return out.getvalue()


def _deterministic_skops(data: bytes) -> bytes:
    """skops bytes made reproducible: ``__id__`` values (memory addresses) and the data files named after them
    (or after uuids) renumbered in schema order, fixed zip timestamps, nested ``.npz`` files likewise."""
    with zipfile.ZipFile(io.BytesIO(data)) as zin:
        schema = json.loads(zin.read("schema.json"))
    ids: dict[int, int] = {}
    files: dict[str, str] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("__id__"), int):
                node["__id__"] = ids.setdefault(node["__id__"], len(ids))
            if isinstance(node.get("file"), str):
                old = node["file"]
                node["file"] = files.setdefault(old, f"data{len(files)}{old[old.rfind('.'):] if '.' in old else ''}")
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)

    def rewrite(name: str, content: bytes) -> tuple[str, bytes]:
        if name == "schema.json":
            return name, json.dumps(schema, indent=2).encode()
        if name.endswith(".npz"):
            content = _canonical_zip(content)
        return files.get(name, name), content

    return _canonical_zip(data, rewrite=rewrite)


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    np = numpy_types()
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - incomparable values are different
        return False


def _mismatch(loaded: Any, expected: Any, at: str) -> str | None:
    """Where a loaded estimator differs from the expected one (class or constructor parameter), else None."""
    from sklearn.base import BaseEstimator

    if type(loaded) is not type(expected):
        return f"{at} is a {_class_path(type(loaded))}, declared {_class_path(type(expected))}"
    if not isinstance(expected, BaseEstimator):
        return None if _same_value(loaded, expected) else f"{at} is {loaded!r}, declared {expected!r}"
    mine, theirs = expected.get_params(deep=False), loaded.get_params(deep=False)
    if sorted(mine) != sorted(theirs):
        return f"{at} has parameters {sorted(theirs)}, declared {sorted(mine)}"
    for key, value in mine.items():
        other = theirs[key]
        if key == "steps" and isinstance(value, list):
            if not isinstance(other, list) or [n for n, _ in other] != [n for n, _ in value]:
                found = [_class_path(type(v)) for _, v in other] if isinstance(other, list) else other
                return f"{at} has steps {found}, declared {[_class_path(type(v)) for _, v in value]}"
            for i, ((_, a), (_, b)) in enumerate(zip(other, value)):
                problem = _mismatch(a, b, f"{at}.steps[{i}]")
                if problem:
                    return problem
        elif isinstance(value, BaseEstimator):
            problem = _mismatch(other, value, f"{at}.{key}")
            if problem:
                return problem
        elif not _same_value(other, value):
            return f"{at} ({type(expected).__name__}) has {key}={other!r}, declared {value!r}"
    return None


def _estimator_classes(estimator: Any) -> set[str]:
    """Class paths of an estimator and of every estimator among its (nested) parameters."""
    from sklearn.base import BaseEstimator

    found = {_class_path(type(estimator))}
    if isinstance(estimator, BaseEstimator):
        for value in estimator.get_params(deep=False).values():
            items = [v for _, v in value] if isinstance(value, list) and all(isinstance(v, tuple) and len(v) == 2 for v in value) else [value]
            for item in items:
                if isinstance(item, BaseEstimator):
                    found |= _estimator_classes(item)
    return found


class SklearnExtractor(Extractor):
    """Embeddings from ``estimator.transform`` after ``estimator.fit`` on the fit endpoint.

    ``already_fitted=True``: the estimator (any object with ``transform``, scikit-learn or not) is used as given;
    ``fit`` does nothing and the extractor does not learn (``learns`` is False).
    """

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
        if not isinstance(estimator, _Unbuilt) and not hasattr(estimator, "transform"):
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
        self._where: str | None = None

    @classmethod
    def from_steps(
        cls, name: str, steps: Sequence[Mapping[str, Any]], *, random_state: int = 0, allow_sparse: bool = True,
        where: str = "extractor", trusted_modules: Sequence[str] | None = None,
    ) -> SklearnExtractor:
        """A pipeline declared as ``[{"estimator": "sklearn.decomposition.PCA", "params": {...}}, ...]``.

        Each step must name a scikit-learn estimator class or a class of one of ``trusted_modules`` (config key
        ``trusted_modules``: it runs code), checked before anything is imported; parameters are validated
        against the estimator's declared constraints here, so a bad value fails at plan time. Whether e.g.
        ``n_components`` fits the data's width is only known at fit, which names the extractor and the step.
        Where a record says the same declaration of scikit-learn steps passed under the same versions
        (``vertebrae.core.check_records``: the workflow's planning), nothing is imported here and the pipeline is
        built, and checked again, when first used.
        """
        trusted = cls._trusted_modules_of(trusted_modules, where)
        if not steps:
            raise ConfigError(f"{where}.steps: at least one step is required")
        declared = []
        for i, step in enumerate(steps):
            if not isinstance(step, Mapping) or not isinstance(step.get("estimator"), str):
                raise ConfigError(f"{where}.steps[{i}].estimator: a step needs an 'estimator' import path, got {step!r}")
            declared.append({"estimator": step["estimator"], "params": to_json_value(dict(step.get("params") or {}))})
        # only steps naming scikit-learn classes are remembered: a trusted module can change under one version
        remembered = all(step["estimator"].startswith("sklearn.") for step in declared)
        classes = check_records.recalled(_STEPS_CHECK, declared, _DECIDING) if remembered else None
        if not (isinstance(classes, list) and len(classes) == len(declared) and all(isinstance(c, str) for c in classes)):
            built = _built_steps(steps, trusted, where)
            classes = [_class_path(type(step)) for step in built]
            if remembered:
                check_records.remember(_STEPS_CHECK, declared, _DECIDING, classes)
            estimator: Any = _pipeline(built)
        else:
            estimator = _Unbuilt(lambda: _pipeline(_built_steps(steps, trusted, where)))
        extractor = cls(name, estimator, cache_identity=canonical_json({"steps": declared}), allow_sparse=allow_sparse,
                        random_state=random_state)
        extractor._declared_classes = tuple(classes)
        extractor._where = where
        return extractor

    @property
    def estimator(self) -> Any:
        """The estimator (a declared pipeline recalled as checked is built here, on first use)."""
        if isinstance(self._estimator, _Unbuilt):
            self._estimator = self._estimator.build()
        return self._estimator

    @estimator.setter
    def estimator(self, value: Any) -> None:
        self._estimator = value

    @staticmethod
    def _trusted_modules_of(value: Any, where: str) -> tuple[str, ...]:
        if value is None:
            return ()
        if isinstance(value, str) or not isinstance(value, Sequence) or not all(
            isinstance(m, str) and m and all(part.isidentifier() for part in m.split(".")) for m in value
        ):
            raise ConfigError(f"{where}.trusted_modules: a list of module names (e.g. [mypackage.transforms]), got {value!r}")
        return tuple(value)

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
        import scipy.sparse as sp  # here, not at import: planning builds extractors without numpy or scipy

        return inputs.toarray() if sp.issparse(inputs) and not self.allow_sparse else inputs

    def _seeded(self) -> Any:
        """A fresh clone of the estimator with every unset ``random_state`` set to the extractor's."""
        from sklearn.base import clone

        estimator = clone(self.estimator)
        unseeded = {key: self.random_state for key, value in estimator.get_params(deep=True).items()
                    if key.endswith("random_state") and value is None}
        estimator.set_params(**unseeded)
        return estimator

    def fit(self, inputs: Any) -> None:
        """Fit a seeded clone; a failure of the estimator (ValueError, TypeError) becomes a ConfigError (declared
        steps: naming the extractor and the failing step's config key) or a ValidationError (live estimator).

        With ``already_fitted=True`` this is a no-op: the estimator is used exactly as given (never cloned or
        refitted), so any object with a ``transform`` method works, scikit-learn or not."""
        if self.already_fitted:
            return
        estimator = self._seeded()
        rows = self._prepare(inputs)
        try:
            self._fitted = estimator.fit(rows)
        except (TypeError, ValueError) as exc:
            shape = "x".join(str(n) for n in getattr(rows, "shape", ()))
            if self._where is None:
                raise ValidationError(
                    f"extractor {self.name!r}: fitting {type(estimator).__name__} on {shape} rows failed: {exc}"
                ) from exc
            raise ConfigError(
                f"extractor {self.name!r}: fitting {self._failed_step(estimator, exc)} on the fit endpoint's {shape} rows "
                f"failed: {exc}"
            ) from exc

    def _failed_step(self, pipeline: Any, exc: BaseException) -> str:
        """The config key and class of the step whose code raised ``exc`` during a pipeline fit."""
        steps = [step for _, step in pipeline.steps]
        blamed, tb = None, exc.__traceback__
        while tb is not None:
            owner = tb.tb_frame.f_locals.get("self")
            blamed = next((i for i, step in enumerate(steps) if step is owner), blamed)
            tb = tb.tb_next
        if blamed is None:
            return f"{self._where}.steps"
        return f"{self._where}.steps[{blamed}] ({type(steps[blamed]).__name__})"

    def transform(self, inputs: Any, *, branch: str | None = None) -> Any:
        if self._fitted is None:
            raise ValidationError(f"extractor {self.name!r} is not fitted: call fit() or load its fitted state first")
        import numpy as np
        import scipy.sparse as sp

        out = self._fitted.transform(self._prepare(inputs))
        return out if sp.issparse(out) else np.asarray(out)

    def fitted_state(self) -> dict[str, Any]:
        """The fitted estimator as skops bytes (base64); equal fits give identical bytes."""
        skops_io = _skops_io()
        if self._fitted is None:
            raise ValidationError(f"extractor {self.name!r} has no fitted state to save")
        data = _deterministic_skops(skops_io.dumps(self._fitted))
        return {"format": "skops", "data": base64.b64encode(data).decode("ascii")}

    def _allowed_types(self) -> set[str]:
        declared = set(self._declared_classes) | _estimator_classes(self.estimator)
        return declared | {t for cls in declared for t in STATE_TYPES.get(cls, ())} | set(_ALWAYS_TRUSTED)

    def load_fitted(self, state: Mapping[str, Any], *, source: str = "fitted state") -> None:
        """Load a fitted state saved by ``fitted_state`` of the same declaration; ArtifactError naming ``source``
        for an unreadable file, a type beyond skops' defaults and the declared ones, or an estimator whose
        classes or parameters differ from the declared steps."""
        skops_io = _skops_io()
        if not isinstance(state, Mapping) or state.get("format") != "skops":
            found = state.get("format") if isinstance(state, Mapping) else state
            raise ArtifactError(f"{source}: unknown fitted-state format {found!r}, expected 'skops'")
        try:
            data = base64.b64decode(state["data"], validate=True)
            untrusted = skops_io.get_untrusted_types(data=data)
        except Exception as exc:  # noqa: BLE001 - any failure to read the bytes is a corrupt artifact
            raise ArtifactError(f"{source}: not a readable skops fitted state ({type(exc).__name__}: {exc})") from None
        allowed = self._allowed_types()
        refused = [t for t in untrusted if not _admits(tuple(allowed), t)]
        if refused:
            raise ArtifactError(
                f"{source}: refusing to load untrusted types {refused} (extractor {self.name!r} declares "
                f"{sorted(set(self._declared_classes) | _estimator_classes(self.estimator))})"
            )
        try:
            loaded = skops_io.loads(data, trusted=untrusted)
        except Exception as exc:  # noqa: BLE001
            raise ArtifactError(f"{source}: cannot load the skops fitted state ({type(exc).__name__}: {exc})") from None
        problem = _mismatch(loaded, self._seeded(), "the fitted estimator")
        if problem:
            raise ArtifactError(f"{source}: does not match extractor {self.name!r}: {problem}")
        self._fitted = loaded
