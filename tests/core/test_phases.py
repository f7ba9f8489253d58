"""A job's phase line (vertebrae.core.phases): what it says, and that a reader gets the same numbers back."""

from __future__ import annotations

import io
import time

from vertebrae.core.phases import Phases, parse_phases


def test_phases_add_up_and_read_back():
    phases = Phases()
    with phases("read"):
        time.sleep(0.02)
    with phases("kernel"):
        time.sleep(0.03)
    with phases("read"):  # a phase entered twice counts both times
        time.sleep(0.02)
    stream = io.StringIO()
    phases.log(stream)
    got = parse_phases("some job output\n" + stream.getvalue() + "more output\n")
    assert list(got) == ["start", "read", "kernel", "job"]  # the process age first (Linux), the job's total last
    assert got["read"] >= 0.04 and got["kernel"] >= 0.03
    assert got["job"] >= got["read"] + got["kernel"] - 0.002  # three decimals each
    assert got["start"] > 0


def test_the_last_line_counts_and_a_log_without_one_has_none():
    assert parse_phases("phases: read_s=1.000 job_s=2.000\nphases: read_s=3.500 job_s=4.000\n") == {"read": 3.5,
                                                                                                   "job": 4.0}
    assert parse_phases("Traceback (most recent call last):\n") is None
