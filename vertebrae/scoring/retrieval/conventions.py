"""Named retrieval conventions: the choices that make a number equal to the one a named tool prints.

``CONVENTIONS`` holds one frozen ``Conventions`` per name; the metric kernels (``metrics``), the kernel's tie rule
(``tie_order``, read by ``kernel``), ``finalize`` and the reports (``describe``) read it and nothing else. The
choices, per convention (docs/conventions.md has the same table):

================  ===============  ===========  =======  ==============  ======================  =====================
name              ties             NDCG gain    MRR      MAP             MAP denominator          default ks
================  ===============  ===========  =======  ==============  ======================  =====================
vertebrae         gallery row      2^g - 1      no cut   all positives   R                        1 5 10
trec_eval         id descending    g            no cut   all positives   R                        1 5 10 100 1000
beir              id descending    g            @k       @k              R                        1 3 5 10 100 1000
mteb              id descending    g            @k       @k              R                        1 3 5 10 20 100 1000
sentence_trans.   id ascending     1 (binary)   @k       @k              min(k, R)                1 3 5 10 100
================  ===============  ===========  =======  ==============  ======================  =====================

Ids. trec_eval sorts a query's results by score, then by docno descending (``strcmp``); sentence-transformers by
score, then corpus id ascending (Python ``str`` order). Both compare the id *text* code point by code point (for
UTF-8, ``strcmp``'s byte order is the code point order). Our row ids are semantic keys (``core.labels``): a string
id's text is the string itself, an integer id's its decimal digits (so ``"10"`` comes before ``"9"``, as a run file
holding those docnos sorts). Rows declared without ids are numbered from 0 and compare as the text of that number.
Two rows whose texts are equal (``5`` and ``"5"``) fall back to gallery row order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vertebrae.core.errors import ConfigError

__all__ = ["CONVENTIONS", "Conventions", "DEFAULT", "IdTies", "conventions", "describe", "id_text", "tie_order"]

TIES = ("gallery_row", "id_descending", "id_ascending")
GAINS = ("exponential", "linear", "binary")
DENOMINATORS = ("R", "min(k, R)")

_TIE_TEXT = {
    "gallery_row": "gallery row order (equal scores: the earlier gallery row ranks first)",
    "id_descending": "descending gallery id (equal scores: the larger id text ranks first, compared code point by "
                     "code point as trec_eval's strcmp compares docnos; a row without an id is its 0-based row "
                     "number in decimal; equal texts: gallery row order)",
    "id_ascending": "ascending gallery id (equal scores: the smaller id text ranks first, compared code point by "
                    "code point as Python sorts str ids; a row without an id is its 0-based row number in decimal; "
                    "equal texts: gallery row order)",
}
_RANK_TEXT = {
    "gallery_row": "1 + eligible gallery items scoring strictly higher, or equal and earlier in gallery row order",
    "id_descending": "1 + eligible gallery items scoring strictly higher, or equal with a larger id text",
    "id_ascending": "1 + eligible gallery items scoring strictly higher, or equal with a smaller id text",
}
_GAIN_TEXT = {"exponential": "2^grade - 1 (stable log-domain ratios)", "linear": "grade (linear, as trec_eval)",
              "binary": "1 for every relevant item (binary, whatever its grade)"}


@dataclass(frozen=True)
class Conventions:
    """The choices behind one named convention.

    ``ties``: how equal scores are ordered (``gallery_row``, ``id_descending``, ``id_ascending``: module
    docstring); ``gain``: NDCG's gain of a grade g (``exponential`` 2^g - 1, ``linear`` g, ``binary`` 1);
    ``mrr_at_k`` / ``map_at_k``: MRR / MAP reported at each k (``mrr@k``: 1 / r_1 when r_1 <= k, else 0;
    ``map@k``: the precisions at the positives ranked <= k, summed, over ``map_denominator``) instead of once over
    the whole ranking (``mrr``, ``map``); ``map_denominator``: ``R`` (all the query's positives) or ``min(k, R)``;
    ``ks``: the cutoffs used when a config gives none; ``matches``: the tool whose numbers these are; ``unmatched``:
    what that tool does that we do not (docs/conventions.md).
    """

    name: str
    matches: str
    ties: str
    gain: str
    mrr_at_k: bool
    map_at_k: bool
    map_denominator: str
    ks: tuple[int, ...]
    unmatched: str = ""

    def __post_init__(self) -> None:
        if self.ties not in TIES or self.gain not in GAINS or self.map_denominator not in DENOMINATORS:
            raise ConfigError(f"Conventions {self.name!r}: ties in {TIES}, gain in {GAINS}, map_denominator in "
                              f"{DENOMINATORS}")
        if self.map_denominator != "R" and not self.map_at_k:
            raise ConfigError(f"Conventions {self.name!r}: a min(k, R) denominator needs map_at_k")

    @property
    def tie_rule(self) -> str:
        return _TIE_TEXT[self.ties]

    @property
    def rank_rule(self) -> str:
        return _RANK_TEXT[self.ties]

    def metadata(self) -> dict[str, Any]:
        """What a result records of its conventions (``RetrievalResult.metadata``)."""
        return {
            "conventions": self.name,
            "conventions_match": self.matches,
            "rank": self.rank_rule,
            "tie_rule": self.tie_rule,
            "ndcg_gain": _GAIN_TEXT[self.gain],
            "map_denominator": "all eligible positives R" if self.map_denominator == "R" else "min(k, R)",
            "map_cutoff": "each k" if self.map_at_k else None,
            "mrr_cutoff": "each k" if self.mrr_at_k else None,
        }


DEFAULT = "vertebrae"

CONVENTIONS: dict[str, Conventions] = {c.name: c for c in (
    Conventions("vertebrae", "vertebrae's own definitions (docs/protocols/retrieval.md)", "gallery_row",
                "exponential", False, False, "R", (1, 5, 10)),
    Conventions("trec_eval", "trec_eval 9 / pytrec_eval: ndcg_cut.k, P.k, recall.k, success.k, map, recip_rank",
                "id_descending", "linear", False, False, "R", (1, 5, 10, 100, 1000),
                "trec_eval reads whole-number grades and counts grade >= 1 as relevant; we count grade > 0 (the same "
                "for whole grades; a fractional grade has no trec_eval counterpart)"),
    Conventions("beir", "BEIR's EvaluateRetrieval: pytrec_eval's ndcg_cut.k, map_cut.k, recall.k, P.k and its "
                "MRR@k", "id_descending", "linear", True, True, "R", (1, 3, 5, 10, 100, 1000),
                "BEIR rounds to 5 decimals; its MRR@k orders tied results by the search's output order, not by id "
                "(we order them as its pytrec_eval metrics do); its ignore_identical_ids=True is exclude_same_id: "
                "true (declared on the dataset); its top-k accuracy sorts by the ids' second character (a bug), "
                "our hit_rate@k is trec_eval's success.k"),
    Conventions("mteb", "MTEB's RetrievalEvaluator: pytrec_eval's ndcg_cut.k, map_cut.k, recall.k, P.k, success.k "
                "and its MRR@k", "id_descending", "linear", True, True, "R", (1, 3, 5, 10, 20, 100, 1000),
                "MTEB rounds all but MRR to 5 decimals; its MRR@k orders tied results by the search's output order "
                "(we order them as its pytrec_eval metrics do); ignore_identical_ids (default False) is "
                "exclude_same_id"),
    Conventions("sentence_transformers", "sentence-transformers' InformationRetrievalEvaluator: accuracy@k, "
                "precision@k, recall@k, ndcg@k, mrr@k, map@k", "id_ascending", "binary", True, True, "min(k, R)",
                (1, 3, 5, 10, 100),
                "its relevant_docs are sets, so NDCG is binary whatever the grades; it scores in the model's dtype "
                "(float32: more exact ties than our float64 scores); its defaults print MRR@10, NDCG@10, MAP@100 "
                "only, we print every family at every k"),
)}


def conventions(name: Any, *, owner: str = "RetrievalConfig.conventions") -> Conventions:
    """The ``Conventions`` named ``name``; a ConfigError naming the known ones otherwise."""
    if isinstance(name, Conventions):
        return name
    if not isinstance(name, str) or name not in CONVENTIONS:
        raise ConfigError(f"{owner} must be one of {', '.join(CONVENTIONS)}; got {name!r}")
    return CONVENTIONS[name]


def describe(name: Any) -> str:
    """One sentence for a report: the convention, the tool it matches, and its choices."""
    c = CONVENTIONS.get(name, CONVENTIONS[DEFAULT]) if isinstance(name, str) or name is None else conventions(name)
    gain = {"exponential": "gain 2^grade - 1", "linear": "gain = grade", "binary": "binary gain"}[c.gain]
    mrr = "MRR is cut at each k" if c.mrr_at_k else "MRR has no cutoff"
    if c.map_at_k:
        mean_ap = f"MAP is cut at each k over {'all relevant items R' if c.map_denominator == 'R' else 'min(k, R)'}"
    else:
        mean_ap = "mAP averages over all relevant items"
    ties = {"gallery_row": "gallery row order", "id_descending": "descending id (trec_eval's docno order)",
            "id_ascending": "ascending id"}[c.ties]
    where = "our own" if c.name == DEFAULT else f"as {c.matches.split(':')[0]} computes them"
    return (f"Conventions: {c.name} ({where}): NDCG uses {gain}; {mrr}; {mean_ap}; ties are broken by {ties}.")


def id_text(key: str) -> str:
    """The text a row id compares by: a string id itself, an integer id its decimal digits (``@int:12`` -> ``12``,
    ``@str:@x`` -> ``@x``); any other key as written."""
    if key.startswith("@"):
        kind, sep, rest = key[1:].partition(":")
        if sep and kind in ("int", "str"):
            return rest
    return key


class IdTies:
    """Equal scores ordered by gallery id text (``descending`` or ascending), then by gallery row.

    ``ids(rows)``: the semantic keys of global gallery rows (None: every row's id is its row number). Only rows
    that meet in a tie are looked up: ``rank`` orders a set of rows, ``before`` compares pairs. ``universe``: the
    ascending gallery rows it may be asked about (an int n: rows 0..n-1), if known: a call with many rows (data
    full of ties) then reads one order of the whole universe, built once, instead of sorting its own rows."""

    _FEW = 1 << 16  # rows a call sorts on its own; more: the universe's order

    def __init__(self, ids: Callable[[np.ndarray], Sequence[str]] | None, descending: bool,
                 universe: int | np.ndarray | None = None) -> None:
        self._ids = ids
        self.descending = bool(descending)
        self._universe = universe if universe is None or isinstance(universe, int) else \
            np.unique(np.asarray(universe, dtype=np.int64))
        self._order: np.ndarray | None = None
        self._lock = threading.Lock()

    def _texts(self, rows: np.ndarray) -> list[str]:
        if self._ids is None:
            return [str(int(r)) for r in rows]
        return [id_text(str(key)) for key in self._ids(rows)]

    def _positions(self, unique: np.ndarray) -> np.ndarray:
        """Position of each of the ascending distinct ``unique`` rows in the tie order among them."""
        texts = self._texts(unique)
        # a stable sort of the ascending rows: equal texts keep gallery row order (reverse=True keeps it too)
        order = sorted(range(unique.size), key=texts.__getitem__, reverse=self.descending)
        position = np.empty(unique.size, dtype=np.int64)
        position[np.asarray(order, dtype=np.int64)] = np.arange(unique.size)
        return position

    def _universe_positions(self, rows: np.ndarray) -> np.ndarray:
        with self._lock:
            if self._order is None:
                universe = self._universe
                self._order = self._positions(np.arange(universe) if isinstance(universe, int) else universe)
        if isinstance(self._universe, int):
            return self._order[rows]
        return self._order[np.searchsorted(self._universe, rows)]

    def rank(self, rows: np.ndarray) -> np.ndarray:
        """Per entry of ``rows`` (global gallery rows, repeats allowed) a key that orders them in the tie order
        (equal for equal rows)."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        if self._universe is not None and rows.size > self._FEW:
            return self._universe_positions(rows)
        unique, inverse = np.unique(rows, return_inverse=True)
        return self._positions(unique)[inverse.reshape(-1)]

    def before(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Whether gallery row a[i] ranks before b[i] when their scores are equal."""
        a = np.asarray(a, dtype=np.int64)
        rank = self.rank(np.concatenate([a, np.asarray(b, dtype=np.int64)]))
        return rank[:a.size] < rank[a.size:]


def tie_order(name: Any, gallery_ids: Any = None, rows: np.ndarray | None = None) -> IdTies | None:
    """The tie order of a convention over a gallery: None for gallery row order (the kernel's own, fast path),
    else an ``IdTies``. ``gallery_ids``: a sequence of the gallery's semantic keys (every row), a callable
    returning the keys of given global rows (``rows``: the rows it knows, if given), or None (row numbers)."""
    c = conventions(name)
    if c.ties == "gallery_row":
        return None
    ids, universe = gallery_ids, rows
    if ids is not None and not callable(ids):
        keys = ids
        ids = lambda rows: [keys[int(r)] for r in rows]  # noqa: E731
        universe = len(keys)
    return IdTies(ids, descending=c.ties == "id_descending", universe=universe)
