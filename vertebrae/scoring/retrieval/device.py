"""Where the kernel's block products run: NumPy (``device="cpu"``) or torch (``"cuda"``, ``"cuda:N"``, ``"torch:cpu"``).

Block products only *filter* (``kernel``): every block score is within ``arithmetic._tolerance`` of its direct
float64 value, a bound that holds for any summation order, blocking, split-K reduction or fused multiply-add, so a
block product computed by torch gives the same ranks, ties, nearest negatives and metrics as NumPy's: the score
documents are identical. Two things the bound does not cover are kept out:

* reduced-precision float32 matmuls (TF32, bf16): every product runs inside ``_ieee_float32`` (float32 matmul
  precision "ieee" / "highest", TF32 off for cuBLAS and cuDNN, restored afterwards; nested and concurrent
  products share one setting);
* flush-to-zero of subnormal float32 values, which a device kernel may do: a block whose float32 operand holds a
  subnormal value, or whose smallest nonzero query-row norm times largest gallery-row norm is below 2^-90 (where
  flushed products could use more than the tenth of the tolerance it keeps as margin), is multiplied by NumPy
  instead (``TorchProduct.flush_safe``). Embeddings of ordinary scale never meet either.

Sparse endpoints stay on NumPy (scipy's sparse product). Dense scan rows are moved to the device once per
endpoint (``block_product(..., endpoints=...)``; a view of one is then sliced on the device), each block's
result comes back into the kernel's workspace as a C-contiguous NumPy array. torch is imported only inside these
functions: importing ``vertebrae.scoring.retrieval`` does not import it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from vertebrae.core.errors import ConfigError

DEVICES = ("auto", "cpu", "cuda", "cuda:N", "torch:cpu")
_CUDA = re.compile(r"cuda(:[0-9]+)?")
_TINY32 = float(np.finfo(np.float32).tiny)  # 2^-126: the smallest normal float32
_SAFE_PRODUCT = 2.0 ** -90  # min nonzero |q| * max |g| at which flushed float32 results fit the tolerance margin
_SAFE_NORM = 2.0 ** -45  # squared_l2: max |g| at which a flushed |g|^2 fits it
_CHECK_ROWS = 1 << 14  # rows per chunk of the subnormal scan


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


def _cuda_count(torch: Any) -> int:
    try:
        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except Exception:  # a broken driver or runtime: no usable GPU
        return 0


def resolve_device(device: str) -> str:
    """The device block products run on: ``"cpu"`` (NumPy), ``"torch:cpu"``, ``"cuda"`` or ``"cuda:N"``.

    ``"auto"`` is ``"cuda"`` when torch is installed and sees a GPU, else ``"cpu"``. ``"torch:cpu"`` runs the
    torch path on the CPU (tests, machines without a GPU). A device that cannot be used is refused with a
    ConfigError naming ``device``.
    """
    if not isinstance(device, str):
        raise ConfigError(f"device must be one of {DEVICES} (a string), got {device!r}")
    if device == "cpu":
        return device
    if device == "auto":
        torch = _torch()
        return "cuda" if torch is not None and _cuda_count(torch) > 0 else "cpu"
    if device != "torch:cpu" and not _CUDA.fullmatch(device):
        raise ConfigError(f"device must be one of {DEVICES}, got {device!r}")
    torch = _torch()
    if torch is None:
        raise ConfigError(f"device={device!r} needs torch, which is not installed; install torch or use "
                          "device='cpu'")
    if device == "torch:cpu":
        return device
    count = _cuda_count(torch)
    if count == 0:
        raise ConfigError(f"device={device!r}: no CUDA GPU is visible to torch (torch.cuda.is_available() is "
                          "False); use device='auto' or device='cpu'")
    index = int(device[5:]) if ":" in device else 0
    if index >= count:
        raise ConfigError(f"device={device!r}: torch sees {count} CUDA GPU(s), cuda:0 to cuda:{count - 1}")
    return device


def block_product(device: str, endpoints: Sequence[Any] = ()) -> TorchProduct | None:
    """The kernel's block product on a resolved ``device``: None for ``"cpu"`` (NumPy), else a ``TorchProduct``.

    ``endpoints``: scan arrays (``Endpoint.scan``) whose views the kernel will multiply; each dense one is moved
    to the device once, on first use (a CUDA device takes it only while it fits half of the free device memory;
    otherwise each block's rows travel on their own).
    """
    if device == "cpu":
        return None
    return TorchProduct(device, endpoints)


class _Resident:
    """One endpoint's scan rows: the device copy (made on first use) and which rows hold subnormal floats."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.tensor: Any = None
        self.too_big = False
        self.subnormal_rows = _subnormal_rows(array)
        self.pointer = array.__array_interface__["data"][0]

    def offset(self, view: np.ndarray) -> int | None:
        """The row at which ``view`` starts inside this endpoint, or None when it is not a row range of it."""
        array = self.array
        if (view.dtype != array.dtype or view.ndim != 2 or view.shape[1] != array.shape[1]
                or view.strides != array.strides or array.strides[0] <= 0):
            return None
        delta = view.__array_interface__["data"][0] - self.pointer
        row, rest = divmod(delta, array.strides[0])
        if delta < 0 or rest or row + view.shape[0] > array.shape[0]:
            return None
        return int(row)


def _subnormal_rows(array: np.ndarray) -> np.ndarray:
    """Per row: does it hold a subnormal float32 value (always False for float64 rows)?"""
    out = np.zeros(array.shape[0], dtype=bool)
    if array.dtype != np.float32:
        return out
    for start in range(0, array.shape[0], _CHECK_ROWS):
        block = np.abs(array[start:start + _CHECK_ROWS])
        out[start:start + block.shape[0]] = ((block < _TINY32) & (block > 0)).any(axis=1)
    return out


class TorchProduct:
    """Block products in torch on one device (see the module docstring); safe to share between threads."""

    def __init__(self, device: str, endpoints: Sequence[Any] = ()) -> None:
        torch = _torch()
        if torch is None:
            raise ConfigError(f"device={device!r} needs torch, which is not installed; install torch or use "
                              "device='cpu'")
        self.device = device
        self._torch = torch
        self._target = torch.device("cpu" if device == "torch:cpu" else device)
        self._cuda = self._target.type == "cuda"
        self._lock = threading.Lock()
        self._residents = [_Resident(array) for array in endpoints
                           if isinstance(array, np.ndarray) and array.ndim == 2 and array.flags.c_contiguous]

    def __call__(self, Q_block: Any, G_shard: Any, similarity: str, workspace: Any,
                 order: np.ndarray | None = None) -> np.ndarray | None:
        """The block's scan scores into ``workspace.get("scores", ...)`` as ``kernel._block_product`` computes
        them (Q.scan @ G.scan.T, or (2 Q.scan) @ G.scan.T - |g|^2, query rows in ``order`` when given); None
        when this block is NumPy's (sparse, no columns, or not flush-safe)."""
        A, B = Q_block.scan, G_shard.scan
        if not (isinstance(A, np.ndarray) and isinstance(B, np.ndarray)) or A.shape[1] == 0:
            return None
        if not self.flush_safe(Q_block, G_shard, similarity):
            return None
        torch = self._torch
        dtype = np.result_type(A.dtype, B.dtype)
        out = workspace.get("scores", (A.shape[0], B.shape[0]), dtype)
        with _ieee_float32(torch):
            a, b = self._tensor(A), self._tensor(B)
            if order is not None:
                a = a.index_select(0, torch.from_numpy(np.ascontiguousarray(order, dtype=np.int64)).to(self._target))
            if a.dtype != b.dtype:  # float32 -> float64 is exact; numpy's matmul promotes the same way
                a, b = a.double(), b.double()
            if similarity == "squared_l2":
                a = a * 2  # doubling is exact
            if self._cuda:
                S = torch.mm(a, b.t())
            else:
                S = torch.from_numpy(out)
                torch.mm(a, b.t(), out=S)
            if similarity == "squared_l2":
                S.sub_(torch.from_numpy(np.ascontiguousarray(G_shard.sq, dtype=dtype)).to(self._target))
            if self._cuda:
                torch.from_numpy(out).copy_(S)
        return out

    def flush_safe(self, Q_block: Any, G_shard: Any, similarity: str) -> bool:
        """Whether flush-to-zero of subnormal float32 values on the device could not move a block score by more
        than the tolerance's margin: no subnormal float32 input, and for a float32 product (both sides float32)
        min nonzero |q| * max |g| >= 2^-90 (squared_l2 also max |g| >= 2^-45). Rows are as scanned (``sq``:
        their float64 squared norms; cosine rows are unit)."""
        A, B = Q_block.scan, G_shard.scan
        if self._subnormal(A) or self._subnormal(B):
            return False
        if A.dtype != np.float32 or B.dtype != np.float32:
            return True  # a float64 product: float64 values are never flushed
        g_max = float(np.sqrt(G_shard.sq.max())) if len(G_shard.sq) else 0.0
        if g_max == 0.0:
            return True  # every gallery row is zero: the products are exact zeros
        if similarity == "squared_l2" and g_max < _SAFE_NORM:
            return False
        q_sq = Q_block.sq[Q_block.sq > 0]
        return q_sq.size == 0 or float(np.sqrt(q_sq.min())) * g_max >= _SAFE_PRODUCT

    def _resident(self, view: np.ndarray) -> tuple[_Resident | None, int]:
        for resident in self._residents:
            row = resident.offset(view)
            if row is not None:
                return resident, row
        return None, 0

    def _subnormal(self, view: np.ndarray) -> bool:
        if view.dtype != np.float32:
            return False
        resident, row = self._resident(view)
        if resident is None:
            return bool(_subnormal_rows(view).any())
        return bool(resident.subnormal_rows[row:row + view.shape[0]].any())

    def _tensor(self, view: np.ndarray) -> Any:
        """``view`` as a tensor on the device: a slice of its endpoint's resident copy when it has one."""
        resident, row = self._resident(view)
        if resident is not None:
            with self._lock:
                if resident.tensor is None and not resident.too_big:
                    if self._cuda and resident.array.nbytes > self._torch.cuda.mem_get_info(self._target)[0] // 2:
                        resident.too_big = True
                    else:
                        resident.tensor = self._upload(resident.array)
            if resident.tensor is not None:
                return resident.tensor[row:row + view.shape[0]]
        return self._upload(view)

    def _upload(self, array: np.ndarray) -> Any:
        torch = self._torch
        if not array.flags.writeable:  # torch.from_numpy warns on read-only arrays; torch.tensor copies
            return torch.tensor(array, device=self._target)
        tensor = torch.from_numpy(np.ascontiguousarray(array))
        return tensor.to(self._target) if self._cuda else tensor


# the matmul precision settings are process-wide: the first product in sets them, the last one out restores them
_PRECISION_LOCK = threading.Lock()
_precision_users = 0
_precision_saved: list[tuple[Any, str, Any]] = []


def _precision_flags(torch: Any) -> list[tuple[Any, str, Any]]:
    """(owner, attribute, value) of every float32 matmul/conv precision switch torch has, and the IEEE value."""
    backends = torch.backends
    if hasattr(backends.cuda.matmul, "fp32_precision"):  # torch >= 2.9: per-backend precision, "ieee" = no TF32
        owners = [backends.cuda.matmul, getattr(getattr(backends, "mkldnn", None), "matmul", None),
                  getattr(backends.cudnn, "conv", None), getattr(backends.cudnn, "rnn", None)]
        return [(owner, "fp32_precision", "ieee") for owner in owners
                if owner is not None and hasattr(owner, "fp32_precision")]
    return [(torch, "float32_matmul_precision", "highest"), (backends.cuda.matmul, "allow_tf32", False),
            (backends.cudnn, "allow_tf32", False)]


def _get(owner: Any, name: str) -> Any:
    return owner.get_float32_matmul_precision() if name == "float32_matmul_precision" else getattr(owner, name)


def _set(owner: Any, name: str, value: Any) -> None:
    if name == "float32_matmul_precision":
        owner.set_float32_matmul_precision(value)
    else:
        setattr(owner, name, value)


@contextmanager
def _ieee_float32(torch: Any):
    """IEEE float32 matmuls (no TF32, no bf16) for the duration; the previous settings are restored after."""
    global _precision_users, _precision_saved
    with _PRECISION_LOCK:
        if _precision_users == 0:
            flags = _precision_flags(torch)
            _precision_saved = [(owner, name, _get(owner, name)) for owner, name, _ in flags]
            for owner, name, value in flags:
                _set(owner, name, value)
        _precision_users += 1
    try:
        yield
    finally:
        with _PRECISION_LOCK:
            _precision_users -= 1
            if _precision_users == 0:
                for owner, name, value in _precision_saved:
                    _set(owner, name, value)
                _precision_saved = []
