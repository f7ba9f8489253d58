"""The logistic probe's objective (``probe_solver``, ``solver: vertebrae``): the mean multinomial loss and its
gradient over one fit's standardised float32 rows, on NumPy or a torch device, and the predictions its weights
make. The weights are flat, ``k x (d + 1)``, each class's intercept last."""

from __future__ import annotations

from typing import Any

import numpy as np


def _predict(xa: Any, w: np.ndarray, k: int) -> np.ndarray:
    """Class codes of the rows of ``xa`` (a float32 array, or a torch tensor on the fit's device) under the flat
    weights ``w`` (``k x (d + 1)``); ties: the lowest code."""
    if isinstance(xa, np.ndarray):
        return np.argmax(xa @ w.reshape(k, xa.shape[1]).astype(np.float32).T, axis=1)
    import torch

    weights = torch.from_numpy(w.reshape(k, xa.shape[1]).astype(np.float32)).to(xa.device)
    return _first_argmax(torch, xa @ weights.T).cpu().numpy()


def _first_argmax(torch: Any, z: Any) -> Any:
    """Per row of ``z``, the lowest column holding its largest value (numpy's argmax; torch's may take another)."""
    top = z.max(dim=1, keepdim=True).values
    columns = torch.arange(z.shape[1], device=z.device)
    return torch.where(z == top, columns, z.shape[1]).min(dim=1).values


#: a row whose other classes' exp sum (relative to its own class) exceeds this, or overflowed, is evaluated again
#: shifted by its largest logit (float32's exp overflows past 88.7)
_FAR = 1e30


class _Objective:
    """The mean multinomial loss of one fit's rows and its gradient, the weights flat as ``k x (d + 1)`` (each
    class's intercept last). Logits are held row by class (``n x k``: the faster layout of the product with few
    classes) and each row is taken relative to its own class's logit: ``loss_i = log1p(s_i)``, ``s_i`` the sum of
    ``exp(z_ic - z_iy)`` over the other classes, and the own class's residual ``-s_i / (1 + s_i)``, so neither
    loses its digits to a rounding of ``1 + s_i`` when a row is well fitted; the row sums are one BLAS product. A row
    whose ``s_i`` exceeds ``_FAR`` (its own class far behind: ``exp`` near overflow) is evaluated again, shifted by
    its largest logit. The last evaluation is kept (module docstring: where one C ends the next starts)."""

    def __init__(self, xa: np.ndarray, y: np.ndarray, k: int) -> None:
        self.xa, self.k, self.n = xa, k, len(y)
        self.y = np.asarray(y)
        self.own = np.arange(self.n) * k + self.y  # each row's own logit in the flat n x k block
        self.ones = np.ones(k, dtype=np.float32)
        self.last: tuple[np.ndarray, float, np.ndarray] | None = None

    def at_zero(self) -> np.ndarray:
        """Zero weights, their evaluation kept without a product: every class has probability ``1 / k`` there, so
        the loss is ``log k`` and the gradient ``mean(x) / k`` minus each class's row sum over n."""
        import scipy.sparse as sp

        onehot = sp.csr_matrix((np.ones(self.n, dtype=np.float32), (self.y, np.arange(self.n))),
                               shape=(self.k, self.n))
        grad = self.xa.mean(axis=0, dtype=np.float64)[None, :] / self.k - (onehot @ self.xa).astype(np.float64) / self.n
        w = np.zeros(grad.size)
        self.last = (w.copy(), float(np.log(self.k)), grad.reshape(-1))
        return w

    def data_term(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        """(mean loss, its gradient), the penalty left out."""
        if self.last is not None and np.array_equal(self.last[0], w):
            return self.last[1], self.last[2]
        weights = w.reshape(self.k, -1).astype(np.float32).T
        z = self.xa @ weights
        flat = z.reshape(-1)
        z -= flat[self.own][:, None]
        with np.errstate(over="ignore"):  # an overflowed row is evaluated again below
            np.exp(z, out=z)
        flat[self.own] = 0.0
        others = z @ self.ones  # s_i
        rows, total = np.log1p(others), others + 1.0
        far = np.flatnonzero(~(others <= _FAR))
        if far.size:  # rare: exp overflowed, or nearly; these rows again, shifted by their largest logit
            zf = self.xa[far] @ weights
            zf -= zf.max(axis=1, keepdims=True)
            own = zf[np.arange(far.size), self.y[far]]
            np.exp(zf, out=zf)
            zf[np.arange(far.size), self.y[far]] = 0.0
            z[far], others[far] = zf, zf.sum(axis=1)
            total[far] = others[far] + np.exp(own)
            rows[far] = np.log(total[far]) - own
        loss = float(rows.sum(dtype=np.float64)) / self.n
        z *= (1.0 / total)[:, None]
        flat[self.own] = -others / total
        grad = (z.T @ self.xa).astype(np.float64).reshape(-1) / self.n
        self.last = (w.copy(), loss, grad)
        return loss, grad

    def judged(self, rows: np.ndarray) -> Any:
        """``rows`` as the fit's predictions take them (here: as they are)."""
        return rows

    def penalised(self, w: np.ndarray, loss: float, grad: np.ndarray, l2: float) -> tuple[float, np.ndarray]:
        coef = w.reshape(self.k, -1)[:, :-1]
        grad = grad.copy()
        grad.reshape(self.k, -1)[:, :-1] += l2 * coef
        return loss + 0.5 * l2 * float(np.sum(coef * coef)), grad

    def __call__(self, w: np.ndarray, l2: float) -> tuple[float, np.ndarray]:
        return self.penalised(w, *self.data_term(w), l2)


class _TorchObjective(_Objective):
    """``_Objective`` with its products on a torch device (``device``: "torch:cpu", "cuda" or "cuda:N"): the rows
    move there once, each evaluation is the same float32 computation (IEEE float32 matmuls, no TF32), the loss summed
    in float64, the gradient back as float64. Only the summation order differs from NumPy's."""

    def __init__(self, xa: np.ndarray, y: np.ndarray, k: int, device: str) -> None:
        import torch

        super().__init__(xa, y, k)
        self.torch = torch
        self.device = torch.device("cpu" if device == "torch:cpu" else device)
        self.rows = torch.from_numpy(xa).to(self.device)
        self.own_t = torch.from_numpy(self.own).to(self.device)
        self.y_t = torch.from_numpy(self.y).to(self.device)

    def judged(self, rows: np.ndarray) -> Any:
        return self.torch.from_numpy(rows).to(self.device)

    def data_term(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        if self.last is not None and np.array_equal(self.last[0], w):
            return self.last[1], self.last[2]
        torch = self.torch
        weights = torch.from_numpy(w.reshape(self.k, -1).astype(np.float32)).to(self.device)
        z = self.rows @ weights.T
        flat = z.view(-1)
        z -= flat[self.own_t][:, None]
        z.exp_()
        flat[self.own_t] = 0.0
        others = z.sum(dim=1)
        rows, total = others.log1p(), others + 1.0
        far = torch.nonzero(~(others <= _FAR)).view(-1)
        if len(far):
            picked = torch.arange(len(far), device=z.device), self.y_t[far]
            zf = self.rows[far] @ weights.T
            zf -= zf.max(dim=1, keepdim=True).values
            own = zf[picked].clone()
            zf.exp_()
            zf[picked] = 0.0
            z[far], others[far] = zf, zf.sum(dim=1)
            total[far] = others[far] + own.exp()
            rows[far] = total[far].log() - own
        loss = float(rows.sum(dtype=torch.float64)) / self.n
        z *= (1.0 / total)[:, None]
        flat[self.own_t] = -others / total
        grad = (z.T @ self.rows).double().cpu().numpy().reshape(-1) / self.n
        self.last = (w.copy(), loss, grad)
        return loss, grad


def _objective(xa: np.ndarray, y: np.ndarray, k: int, device: str) -> _Objective:
    return _Objective(xa, y, k) if device == "cpu" else _TorchObjective(xa, y, k, device)
