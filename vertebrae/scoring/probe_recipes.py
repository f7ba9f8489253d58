"""The linear probe's published recipes (``LinearProbeMetric(recipe=...)``): each computes a probe the way a tool
the field quotes computes it, on one outer split (train rows, test rows) of the metric's folds or declared split.

``clip_benchmark`` — CLIP_benchmark's ``linear_probe`` task (LAION-AI/CLIP_benchmark 1.6, ``metrics/linear_probe.py``
and the ``eval`` defaults of its CLI), on CPU in float32 (CLIP_benchmark runs it on CUDA under fp16 autocast unless
``--no_amp``; this recipe is its ``--no_amp`` arithmetic):

1. rows L2-normalised (its ``Featurizer(normalize=True)``);
2. the validation rows: declared ones (``val``: the val rows of the metric's declared split, its
   ``--val_split``: a dataset split of their own, taken in row order), or with ``val_proportion`` (its
   ``--val_proportion``) the train rows split as ``torch.utils.data.random_split`` splits them with the fractions
   ``[1 - p, p]`` (floors, the remainder dealt round-robin, one ``randperm``), or none; then the fit rows
   permuted by one more ``randperm`` (its few-shot selection with ``fewshot_k = -1``). The draws come from a
   torch generator seeded with the run's seed (CLIP_benchmark draws them from the global stream after loading its
   model, which no embedding file can replay);
3. one training = ``torch.manual_seed(seed)``, ``torch.nn.Linear(d, max class code + 1)``, ``torch.optim.AdamW``
   (``lr``, the candidate weight decay, torch's betas and eps), mean cross-entropy, ``epochs`` passes over
   shuffled mini-batches of ``batch_size`` (the last one short), the learning rate set before every step to the
   cosine schedule ``0.5 (1 + cos(pi step / steps)) lr`` without warm-up. The shuffle is the one
   ``DataLoader(shuffle=True)`` makes from the global stream: per epoch one int64 draw for the iterator's base
   seed, one for the sampler's generator, then ``randperm`` of the rows from that generator;
4. weight decay: without validation rows 0 (its default); with them, its search over the 97 values
   ``logspace(-6, 2, 97)``: the 7 values of ``logspace(-6, 2, 7)`` first, then around the best index steps of
   8, 4, 2, 1 (left, best, right, clipped to the grid), each candidate trained on the fit rows and judged by
   top-1 accuracy on the validation rows (a strictly larger accuracy wins; the running best starts at the grid's
   first value with accuracy 0); the final layer is trained on the fit rows followed by the validation rows;
5. the prediction is the first largest logit of each test row; with at least 5 classes, its ``acc5`` too: the
   share of test rows whose class is among the 5 largest logits (``topk``), reported as ``top5_accuracy``.

All of it runs inside ``torch.random.fork_rng``: the caller's global torch stream is left as it was.

``mteb`` — MTEB's classification evaluator (mteb 2.x, ``AbsTaskClassification``): ``n_experiments`` (10)
experiments; each shuffles the train positions in place with a fresh ``numpy.random.RandomState(seed)`` (the same
list every experiment, so each experiment sees the previous one's order shuffled again), keeps the first
``samples_per_label`` (8) rows of each class in that order, fits ``LogisticRegression(max_iter=100,
random_state=seed)`` (lbfgs, C = 1) on those raw rows (no scaling, no normalisation) in that order and predicts
every test row. The scores are the means over experiments of each experiment's accuracy (and the other
scores). MTEB's own seed is 42.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np

WD_GRID_SIZE, WD_INIT_SIZE = 97, 7


def random_split_lengths(n: int, proportion: float) -> tuple[int, int]:
    """(fit rows, validation rows) as ``random_split(range(n), [1 - p, p])`` sizes them."""
    lengths = [int(math.floor(n * frac)) for frac in (1 - proportion, proportion)]
    for i in range(n - sum(lengths)):
        lengths[i % 2] += 1
    return lengths[0], lengths[1]


def _train(torch: Any, x: Any, y: Any, rows: np.ndarray, classes: int, weight_decay: float, lr: float, epochs: int,
           batch_size: int, seed: int) -> Any:
    """One CLIP_benchmark training of a linear layer on ``rows`` (step 3 of the module docstring)."""
    torch.manual_seed(seed)
    layer = torch.nn.Linear(x.shape[1], classes)
    optimiser = torch.optim.AdamW(layer.parameters(), lr=lr, weight_decay=weight_decay)
    index = torch.from_numpy(np.asarray(rows, dtype=np.int64))
    features, targets = x[index], y[index]
    n = len(rows)
    per_epoch = -(-n // batch_size)
    steps = epochs * per_epoch
    for epoch in range(epochs):
        torch.empty((), dtype=torch.int64).random_()  # the DataLoader iterator's base seed
        shuffle = torch.Generator()
        shuffle.manual_seed(int(torch.empty((), dtype=torch.int64).random_().item()))
        order = torch.randperm(n, generator=shuffle)
        for i in range(per_epoch):
            step = i + epoch * per_epoch
            for group in optimiser.param_groups:
                group["lr"] = 0.5 * (1 + np.cos(np.pi * step / steps)) * lr
            batch = order[i * batch_size:(i + 1) * batch_size]
            optimiser.zero_grad()
            loss = torch.nn.functional.cross_entropy(layer(features[batch]), targets[batch])
            loss.backward()
            optimiser.step()
    return layer


def _predict(torch: Any, layer: Any, x: Any, rows: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return layer(x[torch.from_numpy(np.asarray(rows, dtype=np.int64))]).argmax(dim=1).numpy()


def _top5(torch: Any, layer: Any, x: Any, y: Any, rows: np.ndarray) -> np.ndarray:
    """Per row: is its class among the 5 largest logits, as CLIP_benchmark's ``accuracy(..., topk=(1, 5))`` takes
    them (``topk(5, 1, True, True)`` of the float32 logits)?"""
    index = torch.from_numpy(np.asarray(rows, dtype=np.int64))
    with torch.no_grad():
        top = layer(x[index]).float().topk(5, 1, True, True).indices
    return (top == y[index].view(-1, 1)).any(dim=1).numpy()


def clip_benchmark_probe(unit: np.ndarray, codes: np.ndarray, train: np.ndarray, test: np.ndarray, *, lr: float,
                         epochs: int, batch_size: int, val_proportion: float | None, seed: int, n_classes: int = 0,
                         val: np.ndarray | None = None) -> tuple[np.ndarray, float, np.ndarray | None]:
    """(test predictions, weight decay, each test row's top-5 hit) of CLIP_benchmark's probe on one split;
    ``unit``: the L2-normalised rows; ``val``: declared validation rows (not with ``val_proportion``). The top-5
    hits are None where CLIP_benchmark reports no acc5: a dataset of fewer than 5 classes (``n_classes``, its
    class list), or a layer of fewer than 5 outputs."""
    import torch

    if val is not None and val_proportion is not None:
        raise ValueError("clip_benchmark_probe: declared val rows and val_proportion exclude each other "
                         "(CLIP_benchmark's --val_split and --val_proportion)")
    with torch.random.fork_rng(devices=[]):
        draws = torch.Generator()
        draws.manual_seed(int(seed))
        if val is not None:
            fit, val = train, np.asarray(val, dtype=np.int64)
        elif val_proportion is None:
            fit, val = train, None
        else:
            n_fit, n_val = random_split_lengths(len(train), val_proportion)
            order = torch.randperm(n_fit + n_val, generator=draws).numpy()
            fit, val = train[order[:n_fit]], train[order[n_fit:]]
        fit = fit[torch.randperm(len(fit), generator=draws).numpy()]
        x = torch.from_numpy(np.ascontiguousarray(unit, dtype=np.float32))
        y = torch.from_numpy(np.asarray(codes, dtype=np.int64))
        classes = int(codes[fit].max()) + 1
        settings = dict(lr=lr, epochs=epochs, batch_size=batch_size, seed=int(seed))
        weight_decay = 0.0
        if val is not None:
            grid = np.logspace(-6, 2, num=WD_GRID_SIZE).tolist()
            first = np.logspace(-6, 2, num=WD_INIT_SIZE).tolist()

            def peak(candidates: list[int]) -> int:
                best, best_accuracy = 0, 0.0
                for idx in candidates:
                    layer = _train(torch, x, y, fit, classes, grid[idx], **settings)
                    accuracy = float((_predict(torch, layer, x, val) == codes[val]).mean())
                    if best_accuracy < accuracy:
                        best, best_accuracy = idx, accuracy
                return best

            best = peak([i for i, value in enumerate(grid) if value in first])
            span = 8
            while span > 0:
                best = peak([max(best - span, 0), best, min(best + span, len(grid) - 1)])
                span //= 2
            weight_decay = grid[best]
            fit = np.concatenate([fit, val])
        layer = _train(torch, x, y, fit, classes, weight_decay, **settings)
        top5 = _top5(torch, layer, x, y, test) if n_classes >= 5 and classes >= 5 else None
        return _predict(torch, layer, x, test), weight_decay, top5


def mteb_probe(matrix: np.ndarray, codes: np.ndarray, train: np.ndarray, test: np.ndarray, *, n_experiments: int,
               samples_per_label: int, max_iter: int, seed: int) -> tuple[list[np.ndarray], int]:
    """(test predictions per experiment, fits that stopped at ``max_iter``) of MTEB's evaluator on one split."""
    import warnings as _warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    from vertebrae.scoring.probe_solver import thread_limits

    positions, out, unfinished = list(range(len(train))), [], 0
    for _ in range(n_experiments):
        np.random.RandomState(seed).shuffle(positions)
        taken: dict[int, int] = defaultdict(int)
        sampled = []
        for p in positions:
            label = int(codes[train[p]])
            if taken[label] < samples_per_label:
                sampled.append(train[p])
                taken[label] += 1
        rows = np.asarray(sampled, dtype=np.int64)
        with _warnings.catch_warnings(record=True) as caught, thread_limits(None):
            _warnings.simplefilter("always", ConvergenceWarning)
            _warnings.simplefilter("ignore", FutureWarning)
            model = LogisticRegression(max_iter=max_iter, random_state=seed).fit(matrix[rows], codes[rows])
        unfinished += sum(issubclass(w.category, ConvergenceWarning) for w in caught)
        out.append(model.predict(matrix[test]))
    return out, unfinished


__all__ = ["clip_benchmark_probe", "mteb_probe", "random_split_lengths"]
