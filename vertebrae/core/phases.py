"""Where a scoring job's wall time goes: one line in the job's log, for people and benchmarks reading it.

``Phases`` starts its clock when the job's function begins; ``with phases("read"):`` adds that block's wall time to
the phase ``read`` (a phase may be entered several times). ``log()`` writes one line to standard error, which the
workflow sends to the job's log::

    phases: start_s=0.612 read_s=1.204 kernel_s=3.411 write_s=0.052 job_s=4.700

``start_s``: how long the process had been running when the job began (interpreter start, imports, argument
parsing; absent where ``/proc`` cannot tell; a job served by the job server counts from its fork); ``job_s``: from
then to ``log()``, so ``job_s`` minus the named phases is the job's unnamed rest (checks, small reads). Nothing reads
the line back into a result or a fingerprint (``bench/retrieval_scale.py`` prints it as the fan-out's breakdown).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import TextIO

from vertebrae.core.throughput import process_age_seconds

PREFIX = "phases:"


class Phases:
    """Wall seconds per named phase of one job, and of the job as a whole."""

    def __init__(self) -> None:
        self._began = time.perf_counter()
        self.start_s = process_age_seconds()
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - began

    def line(self) -> str:
        """``phases: start_s=... NAME_s=... job_s=...`` (seconds, three decimals)."""
        values = ({} if self.start_s is None else {"start": self.start_s}) | self.seconds
        values["job"] = time.perf_counter() - self._began
        return " ".join([PREFIX, *(f"{name}_s={value:.3f}" for name, value in values.items())])

    def log(self, stream: TextIO | None = None) -> None:
        print(self.line(), file=stream or sys.stderr, flush=True)


def parse_phases(text: str) -> dict[str, float] | None:
    """The last ``phases:`` line of a log's text as ``{name: seconds}`` (``start``, ..., ``job``); None without one."""
    found = None
    for line in text.splitlines():
        if line.startswith(PREFIX):
            found = {key[:-2]: float(value) for key, _, value in
                     (item.partition("=") for item in line[len(PREFIX):].split()) if key.endswith("_s")}
    return found


__all__ = ["PREFIX", "Phases", "parse_phases"]
