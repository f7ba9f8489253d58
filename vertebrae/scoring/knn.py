"""``KNNMetric``: cosine k-nearest-neighbour classification (the DINO-style evaluation) and regression.

Rows are L2-normalised, each first scaled by its own exact power of two (``labelled_common.l2_normalised``: any
positive multiple of an embedding scores the same, subnormal rows included); an all-zero row is refused by id. A
test row's neighbours are the ``k`` train rows of highest cosine similarity ``s`` (ties: the train row first in row
order), found by a blocked exact search (``top_k``): a block of test rows against a block of train rows at a time,
about ``BLOCK_BYTES`` (64 MiB) of working memory per worker thread, never a test x train matrix, the same neighbours
as a brute-force search over the whole matrix. ``memory_config`` (a ``MemoryConfig``; Python only, not in the
recipe) bounds it further: the workers together stay within ``max_resident_bytes`` (``KNNMetric.search`` gives the
per-worker budget and the block shape a fold gets). Test blocks run on as many worker threads (single-threaded BLAS
each) as the BLAS may use; neither the blocks nor the thread count changes a neighbour.
Each neighbour votes for its class with weight 1 (``weighting="uniform"``) or ``exp(s / T)`` (``"temperature"``,
DINO's weighting, ``T`` = ``temperature``, default 0.07); the prediction is the class with the largest vote
total (ties: the class first in catalog order). Train/test rows come from stratified folds (``folds``, default 5,
shuffled with the run's seed; every row is predicted once) or a declared ``split`` of train/val/test rows
(``vertebrae.scoring.labelled_common``): the neighbours are train rows, the predicted rows those ``eval_split``
names (``test``, the default, or ``val``). DINO's ``eval_knn.py`` (train on the train split, report on val) is
``weighting="temperature"``, ``temperature=0.07``, ``k=20`` with ``eval_split="val"``. The kNN chooses no
hyper-parameter, so with ``eval_split="test"`` the val rows take no part.

Scores: ``accuracy`` = mean correctness over predicted rows; ``balanced_accuracy`` = mean over true classes of
the per-class recall; ``score`` is ``primary`` (default accuracy). Per-sample correctness is kept
(``diagnostics["per_sample"]``) for the paired comparison. Regression targets: the prediction is the
vote-weighted mean of the neighbours' targets and the score is R² (``1 - SS_res / SS_tot`` per target column,
averaged over columns) over the predicted rows. Multi-label targets are refused naming the target type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.memory import MemoryConfig
from vertebrae.scoring.labelled_common import (
    BuiltinMetric, check_name, check_policy, choice, classification_scores, eval_split_entry, evaluation_name, flag,
    fold_plan, l2_normalised, parse_eval_split, parse_split, per_sample, positive, positive_float, sample_paired,
    small_classes_entry, split_group_warnings,
)
from vertebrae.scoring.metrics import MetricResult

#: working memory of one search worker: its score block, the selection's copy and mask, and the gathered rows
BLOCK_BYTES = 64 * 2**20
_GALLERY_BLOCK = 2048  # train rows a score block spans (fewer when the budget cannot hold one test row against them)


def _rows(matrix: np.ndarray, index: np.ndarray | None, lo: int, hi: int) -> np.ndarray:
    """Rows ``index[lo:hi]`` of ``matrix`` (``matrix[lo:hi]``, a view, without ``index``)."""
    return matrix[lo:hi] if index is None else matrix[index[lo:hi]]


def _block_top(scores: np.ndarray, k: int, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``k`` best columns of one score block (score descending, ties: the lower column), as
    (``offset`` + column, score), both ``rows x k``, in column order; a block of at most ``k`` columns gives them
    all."""
    rows, cols = scores.shape
    if cols <= k:
        return np.broadcast_to(np.arange(offset, offset + cols), (rows, cols)).copy(), scores.copy()
    kth = np.partition(scores, cols - k, axis=1)[:, cols - k]
    flat = np.flatnonzero(scores >= kth[:, None])  # row-major: each row's candidates in ascending column order
    r, c = np.divmod(flat, cols)
    values = scores.reshape(-1)[flat]
    above = values > kth[r]
    tied = ~above
    room = k - np.bincount(r[above], minlength=rows)  # tied places left in each row
    before = np.cumsum(tied) - tied  # ties earlier in the candidate list
    first = np.concatenate(([0], np.cumsum(np.bincount(r, minlength=rows))[:-1]))  # every row has >= k candidates
    keep = above | (tied & (before - before[first][r] < room[r]))
    return (c[keep] + offset).reshape(rows, k), values[keep].reshape(rows, k)


def _merge(best: tuple[np.ndarray, np.ndarray], block: tuple[np.ndarray, np.ndarray], k: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of two candidate lists per row, sorted: score descending, ties by the lower index."""
    index, score = np.concatenate([best[0], block[0]], axis=1), np.concatenate([best[1], block[1]], axis=1)
    order = np.lexsort((index, -score), axis=-1)[:, :k]
    return np.take_along_axis(index, order, axis=1), np.take_along_axis(score, order, axis=1)


def _admit(best: tuple[np.ndarray, np.ndarray], scores: np.ndarray, offset: int, k: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """``best`` (sorted, ``_merge``) with one more score block of later columns merged in. A later column enters a
    row only by scoring strictly above the row's k-th (a tie loses to the lower index already held), so one
    comparison finds the few that can; a block where many can is first cut to its own best ``k`` a row."""
    rows, cols = scores.shape
    flat = np.flatnonzero(scores > best[1][:, -1:])
    if not flat.size:
        return best
    if flat.size > rows * k:
        return _merge(best, _block_top(scores, k, offset), k)
    r, c = np.divmod(flat, cols)
    hit = np.unique(r)
    every_r = np.concatenate([np.repeat(hit, k), r])
    every_i = np.concatenate([best[0][hit].reshape(-1), c + offset])
    every_s = np.concatenate([best[1][hit].reshape(-1), scores.reshape(-1)[flat]])
    order = np.lexsort((every_i, -every_s, every_r))
    take = order[(np.searchsorted(every_r[order], hit)[:, None] + np.arange(k)).reshape(-1)]
    index, score = best[0].copy(), best[1].copy()
    index[hit], score[hit] = every_i[take].reshape(-1, k), every_s[take].reshape(-1, k)
    return index, score


def search_blocks(n_gallery: int, n_queries: int, width: int, itemsize: int, block_bytes: int | None = None,
                  workers: int = 1) -> tuple[int, int]:
    """(query rows, gallery rows) of one score block of ``top_k``'s search, so that a worker's score block, its
    partitioned copy and mask, and the two row blocks (``width`` columns, gathered as float64 at most) fit
    ``block_bytes`` (default ``BLOCK_BYTES``); never fewer than one row a side."""
    block_bytes = BLOCK_BYTES if block_bytes is None else int(block_bytes)
    per_pair = 2 * itemsize + 1  # score, partitioned copy, mask
    cols = max(1, min(n_gallery, _GALLERY_BLOCK, (block_bytes - width * 8) // (per_pair + width * 8)))
    rows = max(1, min(-(-n_queries // workers), (block_bytes - cols * width * 8) // (cols * per_pair + width * 8)))
    return int(rows), int(cols)


def budget_bytes(memory: MemoryConfig | None, workers: int) -> int:
    """Working memory of one search worker under ``memory``: ``BLOCK_BYTES``, or less where the budget
    (``MemoryConfig.max_resident_bytes``, shared by the ``workers`` threads) is smaller."""
    budget = None if memory is None else memory.max_resident_bytes
    return BLOCK_BYTES if budget is None else max(1, min(BLOCK_BYTES, budget // max(1, workers)))


def top_k(gallery: np.ndarray, queries: np.ndarray, k: int, *, gallery_rows: np.ndarray | None = None,
          query_rows: np.ndarray | None = None, block_bytes: int | None = None, threads: int | None = None
          ) -> tuple[np.ndarray, np.ndarray]:
    """``(index, score)``, each ``n_queries x k``: every query row's ``k`` gallery rows of largest dot product,
    score descending, ties broken by the lower gallery position, ``index`` the positions among the gallery rows.
    ``gallery_rows`` / ``query_rows``: the rows of ``gallery`` / ``queries`` taken (default all), gathered a block
    at a time, so no copy of either set is made.

    Blocked: a block of query rows against one block of gallery rows at a time (one BLAS product), each row's best
    ``k`` of the block kept and merged into its running best, so memory is bounded by ``block_bytes`` per worker
    (default ``BLOCK_BYTES``: the score block, its partitioned copy and mask, the two row blocks; rows tied with a
    row's k-th score add their positions), never queries x gallery. The result is the exact top k of the products:
    the block boundaries change neither the products nor the order. Query blocks run on ``threads`` worker threads
    of single-threaded BLAS (None: as many as the BLAS would use)."""
    from vertebrae.scoring.probe_solver import blas_threads, run_tasks

    n_gallery = gallery.shape[0] if gallery_rows is None else len(gallery_rows)
    n_queries = queries.shape[0] if query_rows is None else len(query_rows)
    workers = blas_threads() if threads is None else max(1, int(threads))
    rows, cols = search_blocks(n_gallery, n_queries, gallery.shape[1], gallery.itemsize, block_bytes, workers)
    index = np.empty((n_queries, k), dtype=np.int64)
    score = np.empty((n_queries, k), dtype=gallery.dtype)

    def block(lo: int) -> None:
        q = _rows(queries, query_rows, lo, lo + rows)
        best = (np.full((len(q), k), n_gallery, dtype=np.int64), np.full((len(q), k), -np.inf, dtype=gallery.dtype))
        for start in range(0, n_gallery, cols):
            scores = q @ _rows(gallery, gallery_rows, start, start + cols).T
            best = _merge(best, _block_top(scores, k, start), k) if start < k or not start else \
                _admit(best, scores, start, k)
        index[lo:lo + rows], score[lo:lo + rows] = best

    run_tasks([lambda lo=lo: block(lo) for lo in range(0, n_queries, rows)], workers)
    return index, score


def neighbour_votes(train: np.ndarray, test: np.ndarray, k: int, weighting: str, temperature: float, *,
                    train_rows: np.ndarray | None = None, test_rows: np.ndarray | None = None,
                    block_bytes: int | None = None, threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(indices, weights)`` ``(n_test, k)``: each test row's k most similar train rows (``top_k``: ties by the
    lower train position) and their vote weights. ``train_rows`` / ``test_rows``: rows of ``train`` / ``test``
    taken (the metric passes the unit rows once, with each fold's rows)."""
    indices, sims = top_k(train, test, k, gallery_rows=train_rows, query_rows=test_rows, block_bytes=block_bytes,
                          threads=threads)
    weights = np.ones(sims.shape) if weighting == "uniform" else np.exp(sims / temperature)
    return indices, weights


def vote(labels: np.ndarray, indices: np.ndarray, weights: np.ndarray, n_classes: int) -> np.ndarray:
    """The class with the largest vote total per row (ties: the lowest class code)."""
    n = indices.shape[0]
    flat = (np.arange(n)[:, None] * n_classes + labels[indices]).ravel()
    totals = np.bincount(flat, weights=weights.ravel(), minlength=n * n_classes).reshape(n, n_classes)
    return totals.argmax(axis=1)


def r2(true: np.ndarray, predicted: np.ndarray) -> float:
    """R² per target column, averaged over columns (scikit-learn's ``r2_score`` uniform average)."""
    true, predicted = true.reshape(len(true), -1), predicted.reshape(len(predicted), -1)
    ss_res = ((true - predicted) ** 2).sum(axis=0)
    ss_tot = ((true - true.mean(axis=0)) ** 2).sum(axis=0)
    if (ss_tot == 0).any():
        raise ValidationError("R² is undefined: a regression target is constant over the test rows")
    return float(np.mean(1.0 - ss_res / ss_tot))


class KNNMetric(BuiltinMetric):
    """Cosine kNN accuracy (see the module docstring)."""

    TARGET_TYPES = ("classification", "regression")

    def __init__(self, k: int = 20, weighting: str = "uniform", temperature: float = 0.07, folds: int = 5,
                 split: Any = None, primary: str = "accuracy", group_folds: bool = True, small_classes: str = "refuse",
                 eval_split: str = "test", *, name: str = "knn", memory_config: MemoryConfig | None = None) -> None:
        owner = "KNNMetric"
        if memory_config is not None and not isinstance(memory_config, MemoryConfig):
            raise ConfigError(f"{owner}: memory_config must be a MemoryConfig or None, got {type(memory_config).__name__}")
        self.memory_config = memory_config  # working memory only: no result depends on it, so not in the recipe
        self.name = check_name(name, owner)
        self.k = positive(k, owner, "k")
        self.weighting = choice(weighting, ("uniform", "temperature"), owner, "weighting")
        self.temperature = positive_float(temperature, owner, "temperature")
        self.folds = positive(folds, owner, "folds", minimum=2)
        self.split = parse_split(split, owner)
        self.eval_split = parse_eval_split(eval_split, self.split, owner)
        self.primary = choice(primary, ("accuracy", "balanced_accuracy"), owner, "primary")
        self.group_folds = flag(group_folds, owner, "group_folds")
        self.small_classes = check_policy(small_classes, owner)

    def recipe(self) -> dict[str, Any]:
        return {"type": "knn", "name": self.name, "k": self.k, "weighting": self.weighting,
                "temperature": self.temperature, "folds": self.folds, "split": self.split, "primary": self.primary,
                "group_folds": self.group_folds, **small_classes_entry(self), **eval_split_entry(self)}

    def needed(self) -> tuple[int, str]:
        """Rows a class needs: ``k + 1`` (a test row and k neighbours of its own class), and with folds at least
        ``folds`` (each fold tests the class)."""
        if self.split is None and self.folds > self.k + 1:
            return self.folds, f"key 'folds' = {self.folds}"
        return self.k + 1, f"key 'k' = {self.k} (a test row and its k neighbours)"

    def _plan(self, targets: Any, keys: Sequence[str], where: str, seed: int, groups: Any = None):
        plan = fold_plan(self, targets, keys, where, seed, groups, self.needed())
        codes, splits, grouped, notes = plan
        smallest = min(len(train) for train, _ in splits)
        if self.k >= smallest:
            raise ValidationError(f"{where}: key 'k' = {self.k} must be below the {smallest} train rows")
        return plan

    def search(self, n_train: int, n_test: int, width: int) -> dict[str, int]:
        """The blocked search's working memory per worker (``block_bytes``, from ``memory_config``), its worker
        threads and the (``query_rows``, ``gallery_rows``) of a score block, for a fold of ``n_train`` x ``n_test``
        float64 rows of ``width`` columns."""
        from vertebrae.scoring.probe_solver import blas_threads

        workers = blas_threads()
        block_bytes = budget_bytes(self.memory_config, workers)
        rows, cols = search_blocks(n_train, n_test, width, 8, block_bytes, workers)
        return {"block_bytes": block_bytes, "workers": workers, "query_rows": rows, "gallery_rows": cols}

    def job_folds(self) -> int:
        """The folds a fanned-out score runs as jobs of their own (``compute_fold``, ``combine_folds``): ``folds``,
        or 1 with a declared split (one train/test split)."""
        return self.folds if self.split is None else 1

    def compute(self, embeddings: Any, targets: Any, *, row_ids: Sequence[str] | None,
                groups: Sequence[Any] | None = None, seed: int = 0, plan: Any = None) -> MetricResult:
        matrix, keys, where, planned = self._planned(embeddings, targets, row_ids, seed, groups, plan)
        x = l2_normalised(matrix, keys, where)
        codes, splits = planned[0], planned[1]
        outputs = [self._fold_output(x, targets, codes, train, test) for train, test in splits]
        return self._combined(targets, keys, where, groups, seed, planned, outputs)

    def compute_fold(self, embeddings: Any, targets: Any, *, row_ids: Sequence[str] | None,
                     groups: Sequence[Any] | None = None, seed: int = 0, fold: int) -> dict[str, Any]:
        """Fold ``fold``'s predictions (JSON: ``{"fold", "n_test", "predicted"}``, a class code or the target
        row per test row, in the fold's test order): ``combine_folds`` of every fold equals ``compute``."""
        matrix, keys, where, (codes, splits, _, _) = self._planned(embeddings, targets, row_ids, seed, groups, None)
        if not 0 <= fold < len(splits):
            raise ValidationError(f"{where}: fold {fold} of {len(splits)}")
        train, test = splits[fold]
        output = self._fold_output(l2_normalised(matrix, keys, where), targets, codes, train, test)
        return {"fold": int(fold), "n_test": int(test.size), "predicted": output.tolist()}

    def combine_folds(self, targets: Any, *, row_ids: Sequence[str] | None, groups: Sequence[Any] | None = None,
                      seed: int = 0, folds: Sequence[dict[str, Any]]) -> MetricResult:
        """The result ``compute`` returns, from ``compute_fold``'s output for every fold (the fold plan is made again
        from the targets: each fold's test rows must be those it predicted)."""
        keys, where, planned = self._target_plan(targets, row_ids, seed, groups)
        splits = planned[1]
        got = sorted(folds, key=lambda entry: entry["fold"])
        if [entry["fold"] for entry in got] != list(range(len(splits))):
            raise ValidationError(f"{where}: folds {[entry['fold'] for entry in got]} given, the plan has "
                                  f"{len(splits)}")
        dtype = np.float64 if targets.target_type == "regression" else np.int64
        outputs = []
        for entry, (_, test) in zip(got, splits):
            output = np.asarray(entry["predicted"], dtype=dtype)
            if entry["n_test"] != test.size or len(output) != test.size:
                raise ValidationError(f"{where}: fold {entry['fold']} predicted {len(output)} rows, its plan tests "
                                      f"{test.size}")
            outputs.append(output)
        return self._combined(targets, keys, where, groups, seed, planned, outputs)

    def _fold_output(self, x: np.ndarray, targets: Any, codes: np.ndarray | None, train: np.ndarray,
                     test: np.ndarray) -> np.ndarray:
        """A fold's predictions: the vote-weighted mean target rows (regression) or the voted class codes."""
        search = self.search(len(train), len(test), x.shape[1])
        indices, weights = neighbour_votes(x, x, self.k, self.weighting, self.temperature, train_rows=train,
                                           test_rows=test, block_bytes=search["block_bytes"],
                                           threads=search["workers"])
        if targets.target_type == "regression":
            values = np.asarray(targets.values, dtype=np.float64).reshape(targets.n_rows, -1)[train]
            return np.einsum("nk,nkd->nd", weights, values[indices]) / weights.sum(axis=1)[:, None]
        return vote(codes[train], indices, weights, len(targets.catalog))

    def _combined(self, targets: Any, keys: Sequence[str], where: str, groups: Any, seed: int, planned: Any,
                  outputs: Sequence[np.ndarray]) -> MetricResult:
        codes, splits, grouped, notes = planned
        test = np.concatenate([test for _, test in splits])
        predicted = np.concatenate(outputs)
        warnings = notes + split_group_warnings(self.split, *splits[0], groups, where, grouped)
        metadata = {**self.recipe(), "n_rows": len(keys), "n_evaluated": int(test.size), "seed": int(seed),
                    "target_type": targets.target_type, "evaluation": evaluation_name(self)}
        if targets.target_type == "regression":
            true = np.asarray(targets.values, dtype=np.float64).reshape(targets.n_rows, -1)[test]
            score = r2(true, predicted)
            return MetricResult(self.name, score, True, {"r2": score}, warnings, metadata)
        scores = classification_scores(codes[test], predicted)
        diagnostics = {**scores, "per_sample": per_sample(keys, test, codes[test], predicted),
                       "paired": sample_paired(self.primary), "statistic": self.primary}
        return MetricResult(self.name, scores[self.primary], True, diagnostics, warnings, metadata)

__all__ = ["BLOCK_BYTES", "KNNMetric", "budget_bytes", "neighbour_votes", "r2", "search_blocks", "top_k", "vote"]
