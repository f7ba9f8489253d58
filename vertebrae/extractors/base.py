"""The extractor contract.

An extractor has a ``name`` (how reports call it), a JSON ``recipe()`` that determines its output bytes
together with the dataset identity, and ``transform(rows)`` mapping a block of input rows to a block of
embedding rows (dense float or CSR), one output row per input row, in order. An extractor that learns
(``learns = True``) is fitted once on its fit endpoint with ``fit(inputs)``, and its fitted state is saved
with ``save_fitted`` / restored with ``load_fitted`` so that every shard only transforms.

An extractor with named ``branches`` (e.g. ``("query", "gallery")`` or ``("image", "text")``) encodes each
endpoint through the branch the protocol names: ``transform(rows, branch="query")``. Extractors without
branches apply one transform to every endpoint (same-modality); they are called as ``transform(rows)`` when
the protocol names no branch, so a user's subclass may omit the keyword.

``reusable`` says whether the recipe pins the output across processes; results of an extractor that is not
reusable are never read back from a cache or shared by a later run.
"""

from __future__ import annotations

from typing import Any


class Extractor:
    """Base class; subclasses set ``name`` and implement ``recipe`` and ``transform``."""

    name: str
    learns: bool = False
    branches: tuple[str, ...] = ()

    def recipe(self) -> dict[str, Any]:
        raise NotImplementedError

    def branch_recipe(self, branch: str) -> dict[str, Any]:
        """What determines ``branch``'s outputs, as a recipe: the whole ``recipe()`` unless a subclass holds
        settings that only other branches read (a retrieval query prompt never changes the gallery's bytes)."""
        return self.recipe()

    def branch_decl(self, decl: dict[str, Any], branch: str) -> dict[str, Any]:
        """The declaration a job that embeds ``branch`` only needs: ``decl`` unless a subclass holds settings of
        other branches; an extractor built from it gives the same ``branch_recipe(branch)``."""
        return decl

    @property
    def reusable(self) -> bool:
        return True

    def fit(self, inputs: Any) -> None:
        """Fit on the full fit endpoint (only called when ``learns``)."""

    def transform(self, inputs: Any, *, branch: str | None = None) -> Any:
        raise NotImplementedError

    def check_branch(self, branch: str | None) -> None:
        """Refuse a branch this extractor does not declare (a branch-less extractor accepts any)."""
        from vertebrae.core.errors import ValidationError

        if self.branches and branch not in self.branches:
            raise ValidationError(f"extractor {self.name!r} encodes through branches {list(self.branches)}, got {branch!r}")

    def fitted_state(self) -> dict[str, Any]:
        """JSON-safe fitted state for ``load_fitted`` (only for extractors that learn)."""
        raise NotImplementedError

    def load_fitted(self, state: dict[str, Any]) -> None:
        raise NotImplementedError
