"""The linear probe's own solvers (``solver: vertebrae``): a multinomial logistic regression along a C path, and a
ridge path over alphas. ``LinearProbeMetric`` calls them once for all its outer splits.

**Logistic** (``logistic_probe``). The objective is scikit-learn's (``LogisticRegression(C)``, multinomial):
``mean_i(logsumexp(z_i) - z_i[y_i]) + ||W||^2 / (2 C n)``, ``z_i = W x_i + b``, the intercept ``b`` not
penalised. With two classes scikit-learn fits one binary model, whose optimum is this multinomial model's at
``C / 2``: the multinomial model runs at ``C / 2`` there. The choice of C is scikit-learn's too (the mean held-out
accuracy over the inner folds; the first of the largest, in the order ``Cs`` is given), and so is the refit's start
(the inner folds' mean weights at the chosen C; moved along their path, below, where the path's starts are). What
differs is how each fit gets there:

* **float32, one model.** The standardised rows (``StandardScaler`` on the outer split's train rows, a column of
  ones appended) are made once per outer split, in float32, for its inner folds and its refit. Each evaluation is
  two BLAS products (``X W^T``, then the softmax residual's transpose times ``X``) with the logits laid out row by
  class, each row taken relative to its own class's logit (``_Objective``: the loss ``log1p`` of the other classes'
  sum, the row sums a third, thin product), the loss summed in float64. scipy's L-BFGS-B moves the float64
  weights, as in scikit-learn's lbfgs, so the path follows scikit-learn's.
* **The path, strong to weak C, warm-started.** Each inner fold fits C after C from the previous C's weights, the
  first from zero (as scikit-learn's path does). The evaluation where one C ended is where the next starts, so it
  is not repeated, and a C whose start already meets the gradient tolerance costs no pass over the rows (its
  held-out predictions are the previous C's). Where every inner fold has at least ``1 / STABLE_SHARE`` (500)
  held-out rows, three starts go further:

  - the first fold's first C is fitted once, from zero (``_first_fit``, a task of its own), and the other folds'
    first Cs start from its weights (the folds share most of their rows), the first fold's path from its end;
  - a C after two fitted ones starts further along the path: at ``w + PATH_STEP (w - w')`` (``w``, ``w'``: the
    last two Cs' weights, ``PATH_STEP`` 0.8, the path bending as C grows) where that start's penalised loss is
    below ``w``'s (one evaluation, which the fit then starts from; else it starts from ``w``, whose evaluation is
    kept);
  - the refit starts from the inner folds' mean weights moved along their mean path toward ``C n / n'``, where an
    inner fold's ``n'`` rows would weigh against the penalty as the refit's ``n`` do (``_refit_split``).

  At the bench size (30,000 x 256, 50 classes) the three cut the evaluations from 409 to 306 (the second most:
  C = 0.1 took 85 evaluations, then 15; C = 1, 40, then none past its start; the refits 20, then 15). With fewer
  held-out rows one row is more than ``STABLE_SHARE`` of the accuracy, and where a fit ends within the gradient
  tolerance (which its start moves) can move a row's prediction and so the choice of C: there each fold's path,
  and the refit's start, are scikit-learn's.
* **The stopping rule is tied to what is measured.** Every ``check_every`` (5) iterations a fit takes the
  predictions of the rows it is judged on (an inner fold's held-out rows; at the refit, the outer split's test rows,
  from their features alone: no label is read) and stops once at most ``STABLE_SHARE`` (0.2%) of them have changed
  prediction since the previous check, ``patience`` (3) checks in a row: the accuracy, and so the choice of C, then
  moves by at most that much a check (with fewer than 500 judged rows: not at all). The predictions of a check are
  made only once ``patience + 1`` checks exist (until then no run of stable checks can end the fit), so a fit that
  ends sooner predicts its rows once, at its end. scikit-learn's own gradient tolerance (``gtol``, its ``tol`` 1e-4
  on the largest gradient entry of the mean loss) also ends a fit, as it ends scikit-learn's: neither rule asks for
  precision far below what changes a prediction. A fit that reaches neither within ``max_iter`` iterations is
  reported (``LogisticPath.unfinished``: inner fold or ``"refit"``, and C), and the metric warns.
* **Threads set explicitly.** Each outer split's standardisation, its first fit (after it, where there is one),
  its inner folds' paths (after that) and its refit (after them) are tasks of one graph (``run_graph``) on
  ``threads`` worker threads, each with single-threaded BLAS and OpenMP held to one thread (``thread_limits``), so
  no pool of threads spins beside another and a busy core slows one fit, not every product. A free worker takes
  the first ready task in split order (a split's standardisation and first fit listed before the previous split's
  inner folds, so that its inner folds are ready when a worker frees up): no barrier between the inner folds and
  the refits leaves a core idle, and a split's rows are let go after its refit. Every fit runs single-threaded
  whatever ``threads`` is, and what each fit starts from depends on the graph alone, so the result does not
  depend on the thread count.
* **Device.** ``device`` "torch:cpu", "cuda" or "cuda:N" runs the same evaluations with torch's products (IEEE
  float32, no TF32; on the CPU one torch thread per fit; on a GPU the fits run one after another); the rows move to
  the device once per fit. The L-BFGS steps stay on the CPU in float64.

**Ridge** (``ridge_probe``): ``RidgeCV(alphas, cv=inner, scoring="neg_mean_squared_error")`` with an intercept,
from one eigendecomposition of the centred ``X^T X`` (an SVD of the centred rows where there are fewer rows than
columns) per inner fold, reused for every alpha; the refit decomposes the whole train split once more. Float64;
the outer splits run on worker threads of single-threaded BLAS, as the logistic fits do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vertebrae.scoring.probe_objective import (  # noqa: F401
    _FAR,
    _Objective,
    _objective,
    _predict,
    _TorchObjective,
)

#: this many stable checks in a row end a fit
PATIENCE = 3
#: iterations between two checks of the predictions
CHECK_EVERY = 5
#: scikit-learn's LogisticRegressionCV ``tol``: a largest gradient entry at or below it ends a fit too
GTOL = 1e-4
#: a check counts as stable when at most this share of the judged rows changed prediction since the last check
STABLE_SHARE = 0.002
#: the path's extrapolated start goes this share of the last step between Cs beyond the last C's weights
PATH_STEP = 0.8
_BLOCK_ROWS = 1024  # rows standardised at a time (a float64 temporary that stays in cache)


@contextlib.contextmanager
def thread_limits(blas: int | None, openmp: int = 1) -> Iterator[None]:
    """BLAS on ``blas`` threads (None: as the process has it) and OpenMP on ``openmp``, for the block's duration."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a dependency of scikit-learn
        yield
        return
    limits: dict[str, int] = {"openmp": int(openmp)}
    if blas is not None:
        limits["blas"] = int(blas)
    with threadpool_limits(limits=limits):
        yield


def blas_threads() -> int:
    """The threads the loaded BLAS may use (the job's ``OMP_NUM_THREADS``; 1 if unknown): the fewest any loaded
    BLAS library is set to, since numpy and scipy may each load their own and a limit set before one of them was
    loaded does not reach it."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - a dependency of scikit-learn
        return 1
    counts = [int(pool.get("num_threads") or 1) for pool in threadpool_info() if pool.get("user_api") == "blas"]
    return max(1, min(counts, default=1))


def run_tasks(tasks: Sequence[Callable[[], Any]], threads: int) -> list[Any]:
    """``[task() for task in tasks]`` on ``threads`` worker threads, each with single-threaded BLAS."""
    with thread_limits(1):
        if threads <= 1 or len(tasks) <= 1:
            return [task() for task in tasks]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(threads, len(tasks))) as pool:
            return list(pool.map(lambda task: task(), tasks))


@dataclass(frozen=True)
class Standardised:
    """One outer split's ``StandardScaler``: rows of ``x`` are taken as ``(x - mean) / scale`` in float32, with a
    column of ones appended (the intercept)."""

    x: np.ndarray
    mean: np.ndarray
    scale: np.ndarray

    @classmethod
    def fit(cls, x: np.ndarray, train: np.ndarray) -> Standardised:
        """``StandardScaler().fit(x[train])``'s ``mean_`` and ``scale_``, bit for bit, from its own arithmetic for
        finite float64 rows (the corrected two-pass variance, its constant-feature test), without the NaN mask it
        builds and sums (a pass and a float64 copy of the rows: the rows here are finite, checked upstream)."""
        rows = np.asarray(x[np.asarray(train)], dtype=np.float64)  # a copy: centred and squared in place
        n = float(len(rows))
        mean = np.sum(rows, axis=0) / n
        rows -= mean
        correction = np.sum(rows, axis=0)
        rows **= 2
        var = np.sum(rows, axis=0)
        var -= correction ** 2 / n
        var /= n
        eps = np.finfo(np.float64).eps
        scale = np.sqrt(var)
        scale[var <= n * eps * var + (n * mean * eps) ** 2] = 1.0  # scikit-learn's _is_constant_feature
        return cls(x, mean, scale)

    def rows(self, index: np.ndarray) -> np.ndarray:
        out = np.empty((len(index), self.x.shape[1] + 1), dtype=np.float32)
        for lo in range(0, len(index), _BLOCK_ROWS):
            block = self.x[index[lo:lo + _BLOCK_ROWS]]  # a fresh float64 block, standardised in place as
            block -= self.mean  # StandardScaler.transform does, then rounded to float32
            block /= self.scale
            out[lo:lo + _BLOCK_ROWS, :-1] = block
        out[:, -1] = 1.0
        return out


def _fit(objective: _Objective, w0: np.ndarray, C: float, judged: np.ndarray, max_iter: int, check_every: int,
         patience: int, gtol: float) -> tuple[np.ndarray, int, bool, np.ndarray | None]:
    """(weights, iterations, reached a stopping rule, the predictions of ``judged`` at the weights where the last
    check made them, else None) of one C's fit from ``w0`` (module docstring)."""
    from scipy.optimize import minimize

    l2 = 1.0 / (C * objective.n)
    judged = objective.judged(judged) if isinstance(judged, np.ndarray) else judged
    if objective.last is not None and np.array_equal(objective.last[0], w0):
        _, grad = objective.penalised(w0, *objective.last[1:], l2)
        if np.max(np.abs(grad)) <= gtol:
            return w0, 0, True, None
    state: dict[str, Any] = {"it": 0, "done": False}
    window: list[list[Any]] = []  # [weights, their predictions or None] of the last patience + 1 checks

    def callback(intermediate_result: Any) -> None:
        state["it"] += 1
        if state["it"] % check_every:
            return
        window.append([intermediate_result.x.copy(), None])
        del window[:-(patience + 1)]
        if len(window) <= patience:  # too few checks for patience stable ones: no prediction needed yet
            return
        for entry in window:
            if entry[1] is None:
                entry[1] = _predict(judged, entry[0], objective.k)
        limit = STABLE_SHARE * len(window[0][1])
        if all(np.count_nonzero(a[1] != b[1]) <= limit for a, b in zip(window, window[1:])):
            state["done"] = True
            raise StopIteration

    result = minimize(objective, w0, args=(l2,), jac=True, method="L-BFGS-B", callback=callback,
                      options={"maxiter": max_iter, "gtol": gtol, "ftol": 64 * np.finfo(float).eps, "maxls": 50})
    # status 0: the gradient tolerance (or the stopping rule); 2: no further descent at the evaluation's precision
    reached = state["done"] or result.status == 2 or (result.status == 0 and result.nit < max_iter)
    checked = window[-1][1] if window and np.array_equal(window[-1][0], result.x) else None
    return result.x, int(result.nit), bool(reached), checked


@dataclass
class LogisticPath:
    """One outer split's probe: ``predicted`` class codes of its test rows, the ``chosen`` C, the inner ``scores``
    (inner folds x Cs, held-out accuracy), ``iterations`` (one list per inner fold, in ``Cs`` order, then
    ``[refit]``), and ``unfinished``: (inner fold index or ``"refit"``, C) of each fit that reached no stopping
    rule within ``max_iter`` iterations."""

    predicted: np.ndarray
    chosen: float
    scores: np.ndarray
    iterations: list[list[int]]
    unfinished: list[tuple[Any, float]]


@dataclass(frozen=True)
class _Settings:
    Cs: tuple[float, ...]
    max_iter: int
    check_every: int
    patience: int
    gtol: float
    device: str = "cpu"


class _Split:
    """One outer split's rows for its fits: the train rows' class codes, and the train and test rows standardised by
    the train rows' ``StandardScaler`` (float32, a column of ones appended), made once (``prepare``) for its inner
    folds and its refit, and let go after the refit."""

    def __init__(self, x: np.ndarray, codes: np.ndarray, train: np.ndarray, test: np.ndarray) -> None:
        self.x, self.train, self.test = x, np.asarray(train), np.asarray(test)
        self.classes, self.y = np.unique(codes[self.train], return_inverse=True)
        self.k = len(self.classes)
        self.rows: np.ndarray | None = None
        self.test_rows: np.ndarray | None = None

    def prepare(self) -> None:
        scaler = Standardised.fit(self.x, self.train)
        self.rows, self.test_rows = scaler.rows(self.train), scaler.rows(self.test)


def _first_fit(split: _Split, fit_rows: np.ndarray, held: np.ndarray, s: _Settings) -> list[Any]:
    """[weights, iterations, reached, the objective] of an inner fold's first C, from zero: the seed of its split's
    inner paths (module docstring); the fold's own path takes the objective (its rows, its last evaluation)."""
    assert split.rows is not None
    objective = _objective(split.rows[fit_rows], split.y[fit_rows], split.k, s.device)
    w, its, reached, _ = _fit(objective, objective.at_zero(), min(s.Cs) * (0.5 if split.k == 2 else 1.0),
                              split.rows[held], s.max_iter, s.check_every, s.patience, s.gtol)
    return [w, its, reached, objective]


def _inner_path(split: _Split, fit_rows: np.ndarray, held: np.ndarray, s: _Settings, seed: Any = None,
                own: bool = False) -> tuple[np.ndarray, np.ndarray, list[int], list[float]]:
    """(weights per C, held-out accuracy per C, iterations per C, Cs left unfinished) of one inner fold; ``seed``:
    ``_first_fit``'s result, where the first C starts (``own``: this fold's first C, already fitted)."""
    k = split.k
    factor = 0.5 if k == 2 else 1.0
    order = sorted(range(len(s.Cs)), key=lambda i: s.Cs[i])  # the path: strong to weak
    assert split.rows is not None
    truth = split.y[held]
    if own:  # the seed's objective, let go there
        objective, seed[3] = seed[3], None
    else:
        objective = _objective(split.rows[fit_rows], split.y[fit_rows], k, s.device)
    judged = objective.judged(split.rows[held])
    w = objective.at_zero() if seed is None else seed[0]
    weights = np.zeros((len(s.Cs), split.rows.shape[1] * k))
    scores, its, unfinished, predicted = np.zeros(len(s.Cs)), [0] * len(s.Cs), [], None
    before = None  # the weights of the C before the last, once the path extrapolates (module docstring)
    extrapolate = len(held) * STABLE_SHARE >= 1.0
    for i in order:
        start = w if before is None else _path_start(objective, before, w, 1.0 / (s.Cs[i] * factor * objective.n),
                                                     s.gtol)
        if own and i == order[0]:  # fitted by the seed
            end, its[i], reached, checked = seed[0], seed[1], seed[2], None
        else:
            end, its[i], reached, checked = _fit(objective, start, s.Cs[i] * factor, judged, s.max_iter,
                                                 s.check_every, s.patience, s.gtol)
        if its[i] or start is not w or predicted is None:  # a fit that moved (module docstring)
            predicted = _predict(judged, end, k) if checked is None else checked
        moved = bool(its[i]) or start is not w
        before, w = (w if extrapolate and moved and i != order[0] else None), end
        weights[i], scores[i] = w, float(np.mean(predicted == truth))
        if not reached:
            unfinished.append(float(s.Cs[i]))
    return weights, scores, its, unfinished


def _path_start(objective: _Objective, before: np.ndarray, w: np.ndarray, l2: float, gtol: float) -> np.ndarray:
    """The start of the next C's fit (penalty ``l2``) from the last C's weights ``w`` (evaluated last) and the C's
    before them, ``before``: ``w`` where it already meets ``gtol``, else the damped extrapolation
    ``w + PATH_STEP (w - before)`` where its penalised loss is below ``w``'s (one evaluation, kept for the fit's
    start), else ``w`` (its evaluation kept, so the fit does not repeat it)."""
    kept = objective.last
    if kept is None or not np.array_equal(kept[0], w):
        return w
    loss, grad = objective.penalised(w, *kept[1:], l2)
    if np.max(np.abs(grad)) <= gtol:
        return w
    trial = w + PATH_STEP * (w - before)
    if objective(trial, l2)[0] < loss:
        return trial
    objective.last = kept
    return w


def _refit(split: _Split, w0: np.ndarray, C: float, s: _Settings) -> tuple[np.ndarray, int, bool]:
    factor = 0.5 if split.k == 2 else 1.0
    assert split.rows is not None and split.test_rows is not None
    objective = _objective(split.rows, split.y, split.k, s.device)
    xt = objective.judged(split.test_rows)
    w, its, reached, checked = _fit(objective, w0, C * factor, xt, s.max_iter, s.check_every, s.patience, s.gtol)
    split.rows = split.test_rows = None  # this split's last fit
    return (_predict(xt, w, split.k) if checked is None else checked), its, reached


def run_graph(tasks: Sequence[Callable[[], Any]], after: Sequence[Sequence[int]], threads: int,
              results: list[Any] | None = None) -> list[Any]:
    """``[task() for task in tasks]`` (written into ``results`` as each returns, where given: a task may read the
    results of those it runs after), task ``i`` once the tasks ``after[i]`` (earlier in the list) have returned, on
    ``threads`` worker threads of single-threaded BLAS: a free worker takes the first ready task in list order, so
    none waits while a task is ready and no barrier leaves one idle. The first exception is raised."""
    results = [None] * len(tasks) if results is None else results
    with thread_limits(1):
        if threads <= 1 or len(tasks) <= 1:
            for i, task in enumerate(tasks):
                results[i] = task()
            return results
        import threading

        state: dict[str, Any] = {"next": list(range(len(tasks))), "done": set(), "running": 0, "error": None}
        ready = threading.Condition()

        def worker() -> None:
            while True:
                with ready:
                    while True:
                        if state["error"] is not None or not state["next"]:
                            return
                        i = next((i for i in state["next"] if state["done"].issuperset(after[i])), None)
                        if i is not None:
                            state["next"].remove(i)
                            state["running"] += 1
                            break
                        if not state["running"]:  # nothing runs that could make a task ready
                            state["error"] = ValueError(f"tasks {state['next']} follow tasks that never run")
                            ready.notify_all()
                            return
                        ready.wait()
                try:
                    results[i] = tasks[i]()
                except BaseException as exc:  # handed to the caller
                    with ready:
                        state["error"] = state["error"] or exc
                        state["running"] -= 1
                        ready.notify_all()
                    return
                with ready:
                    state["done"].add(i)
                    state["running"] -= 1
                    ready.notify_all()

        pool = [threading.Thread(target=worker, daemon=True) for _ in range(min(threads, len(tasks)))]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        if state["error"] is not None:
            raise state["error"]
        return results


def logistic_probe(x: np.ndarray, codes: np.ndarray, splits: Sequence[tuple[np.ndarray, np.ndarray]],
                   inner: Sequence[Sequence[tuple[np.ndarray, np.ndarray]]], Cs: Sequence[float], *,
                   max_iter: int = 1000, threads: int | None = None, check_every: int = CHECK_EVERY,
                   patience: int = PATIENCE, gtol: float = GTOL, device: str = "cpu") -> list[LogisticPath]:
    """The multinomial probe of every outer split (module docstring). ``x``: all rows (float64); ``codes``: their
    class codes; ``splits``: (train, test) row indices; ``inner[j]``: the (fit, held-out) pairs, as positions in
    ``splits[j]``'s train rows, that choose C; ``threads``: worker threads (None: the BLAS's thread count);
    ``device``: where the products run (``"cpu"``: NumPy; ``"torch:cpu"``, ``"cuda"``, ``"cuda:N"``: torch, a
    resolved ``retrieval.device.resolve_device`` name; on CUDA the fits run one after another)."""
    settings = _Settings(tuple(float(c) for c in Cs), int(max_iter), int(check_every), int(patience), float(gtol),
                         device)
    threads = blas_threads() if threads is None else max(1, int(threads))
    if device == "cpu":
        return _logistic_probe(x, codes, splits, inner, settings, threads)
    with _torch_threads(device) as one_at_a_time:
        return _logistic_probe(x, codes, splits, inner, settings, 1 if one_at_a_time else threads)


@contextlib.contextmanager
def _torch_threads(device: str) -> Iterator[bool]:
    """IEEE float32 products (no TF32) and, on the CPU, one torch thread per fit (restored after); yields whether
    the fits should run one after another (a CUDA device)."""
    import torch

    from vertebrae.scoring.retrieval.device import _ieee_float32

    before = torch.get_num_threads()
    cuda = device != "torch:cpu"
    try:
        if not cuda:
            torch.set_num_threads(1)
        with _ieee_float32(torch):
            yield cuda
    finally:
        torch.set_num_threads(before)


def _logistic_probe(x: np.ndarray, codes: np.ndarray, splits: Sequence[tuple[np.ndarray, np.ndarray]],
                    inner: Sequence[Sequence[tuple[np.ndarray, np.ndarray]]], settings: _Settings,
                    threads: int) -> list[LogisticPath]:
    parts = [_Split(x, codes, train, test) for train, test in splits]
    tasks: list[Callable[[], Any]] = []
    after: list[list[int]] = []
    index: list[tuple[int, list[int], int]] = []  # per split: (prepare task, inner tasks, refit task)
    heads: list[tuple[int, int | None]] = []  # per split: (prepare task, first fit task or None)

    def add(task: Callable[[], Any], follows: list[int]) -> int:
        tasks.append(task)
        after.append(follows)
        return len(tasks) - 1

    def head(j: int) -> None:  # a split's standardisation and first fit
        prepare = add(parts[j].prepare, [])
        seeded = len(inner[j]) > 1 and all(len(held) * STABLE_SHARE >= 1.0 for _, held in inner[j])
        heads.append((prepare, add(lambda split=parts[j], rows=inner[j][0]: _first_fit(split, *rows, settings),
                                   [prepare]) if seeded else None))

    head(0)
    for j, split in enumerate(parts):  # in split order, the next split's head before this split's inner folds
        if j + 1 < len(parts):
            head(j + 1)
        prepare, seed = heads[j]
        folds = [add(lambda split=split, fit_rows=fit_rows, held=held, seed=seed, own=f == 0: _inner_path(
            split, fit_rows, held, settings, None if seed is None else results[seed], own and seed is not None),
            [prepare] if seed is None else [seed]) for f, (fit_rows, held) in enumerate(inner[j])]
        index.append((prepare, folds, add(lambda j=j, folds=folds, along=seed is not None: _refit_split(
            parts[j], [results[f] for f in folds], settings, along), folds)))
    results: list[Any] = [None] * len(tasks)
    run_graph(tasks, after, threads, results)
    out = []
    for j, (_, folds, refit) in enumerate(index):
        paths, (predicted, best, its, reached) = [results[f] for f in folds], results[refit]
        unfinished = [(f, c) for f, part in enumerate(paths) for c in part[3]]
        unfinished += [] if reached else [("refit", settings.Cs[best])]
        out.append(LogisticPath(parts[j].classes[predicted], settings.Cs[best], np.array([p[1] for p in paths]),
                                [p[2] for p in paths] + [[its]], unfinished))
    return out


def _refit_split(split: _Split, paths: Sequence[Any], s: _Settings, along: bool = False
                 ) -> tuple[np.ndarray, int, int, bool]:
    """(test predictions, chosen C's index, iterations, reached) of one split's refit: the C of the largest mean
    held-out accuracy (the first of the largest), from the inner folds' mean weights at that C; ``along``: moved
    along their mean path toward ``C n / n'`` (``n``, ``n'``: the refit's and an inner fold's rows; the sum of the
    losses over ``n`` rows weighs against the same penalty ``||W||^2 / 2C`` as over ``n'`` rows at ``C n' / n``),
    interpolated in ``log C`` between the chosen C and the next weaker one."""
    best = int(np.argmax(np.sum([p[1] for p in paths], axis=0)))
    start = np.mean([p[0][best] for p in paths], axis=0)
    weaker = [i for i in range(len(s.Cs)) if s.Cs[i] > s.Cs[best]]
    if along and weaker:
        step = min(weaker, key=lambda i: s.Cs[i])
        rows = len(split.train) * (len(paths) - 1) / len(paths)  # an inner fold's, as StratifiedKFold splits
        share = np.log(len(split.train) / rows) / np.log(s.Cs[step] / s.Cs[best])
        start = start + share * (np.mean([p[0][step] for p in paths], axis=0) - start)
    predicted, its, reached = _refit(split, start, s.Cs[best], s)
    return predicted, best, its, reached


def _ridge_solver(x: np.ndarray, y: np.ndarray) -> Callable[[float], tuple[np.ndarray, np.ndarray]]:
    """alpha -> (coef (d x targets), intercept) of the ridge fit with an intercept on ``x``, ``y``, every alpha
    from one decomposition of the centred rows."""
    mx, my = x.mean(axis=0), y.mean(axis=0)
    xc, yc = x - mx, y - my
    if xc.shape[0] >= xc.shape[1]:
        lam, V = np.linalg.eigh(xc.T @ xc)
        lam = np.maximum(lam, 0.0)
        proj = V.T @ (xc.T @ yc)

        def solve(alpha: float) -> tuple[np.ndarray, np.ndarray]:
            coef = V @ (proj / (lam + alpha)[:, None])
            return coef, my - mx @ coef
    else:
        U, sv, Vt = np.linalg.svd(xc, full_matrices=False)
        proj = U.T @ yc

        def solve(alpha: float) -> tuple[np.ndarray, np.ndarray]:
            coef = Vt.T @ (proj * (sv / (sv * sv + alpha))[:, None])
            return coef, my - mx @ coef
    return solve


def _ridge_split(x: np.ndarray, values: np.ndarray, train: np.ndarray, test: np.ndarray,
                 folds: Sequence[tuple[np.ndarray, np.ndarray]], alphas: Sequence[float]) -> tuple[np.ndarray, float]:
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(x[train])
    xtr, ytr = scaler.transform(x[train]), values[train]
    errors = np.zeros((len(folds), len(alphas)))
    for f, (fit_rows, held) in enumerate(folds):
        solve = _ridge_solver(xtr[fit_rows], ytr[fit_rows])
        for i, alpha in enumerate(alphas):
            coef, intercept = solve(alpha)
            errors[f, i] = np.mean((xtr[held] @ coef + intercept - ytr[held]) ** 2)
    best = int(np.argmin(errors.mean(axis=0)))  # the first of the smallest, as GridSearchCV ranks
    coef, intercept = _ridge_solver(xtr, ytr)(alphas[best])
    return scaler.transform(x[test]) @ coef + intercept, float(alphas[best])


def ridge_probe(x: np.ndarray, values: np.ndarray, splits: Sequence[tuple[np.ndarray, np.ndarray]],
                inner: Sequence[Sequence[tuple[np.ndarray, np.ndarray]]], alphas: Sequence[float], *,
                threads: int | None = None) -> list[tuple[np.ndarray, float]]:
    """(predictions of the test rows (n_test x targets), chosen alpha) of each outer split: ``RidgeCV(alphas,
    cv=inner[j], scoring="neg_mean_squared_error")`` on the split's standardised train rows (module docstring);
    ``values``: n x targets. The outer splits run on ``threads`` worker threads of single-threaded BLAS."""
    return run_tasks([lambda train=train, test=test, folds=folds: _ridge_split(x, values, train, test, folds, alphas)
                      for (train, test), folds in zip(splits, inner)], blas_threads() if threads is None else threads)


__all__ = ["CHECK_EVERY", "GTOL", "PATH_STEP", "PATIENCE", "LogisticPath", "Standardised", "blas_threads",
           "logistic_probe", "ridge_probe", "run_graph", "run_tasks", "thread_limits"]
