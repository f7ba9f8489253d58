"""Test-wide settings.

BLAS/OpenMP thread counts change floating-point summation order, so results are bit-identical across
processes only at the same thread count. Snakemake runs every job with its ``threads`` (1 here) exported as
OMP_NUM_THREADS and friends; the in-process runs of the test suite use the same single thread, which also
avoids oversubscribing the 2 cores of this machine. Set before numpy loads its BLAS.
"""

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_name] = "1"
