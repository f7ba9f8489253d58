"""The progress display of ``vertebrae run`` and ``vertebrae eval``: one display instead of Snakemake's log.

``watch(command, env, ...)`` starts Snakemake (its stdout and stderr merged into one pipe), writes every line it
prints to ``OUT/logs/snakemake/<date>T<time>.log`` (``OUT``: the run's out folder) and reads the same lines for a handful of landmarks of Snakemake's
text output (9.x: its ``Job stats`` table, a job's ``rule NAME:`` block with its ``jobid``, ``log`` and
``benchmark`` fields, ``Finished jobid: N (Rule: NAME)``, ``Error in rule NAME:``, ``Nothing to be done``). From
them it shows:

- on a terminal (stderr is a TTY): a Rich progress display, one bar for all jobs (done / total, elapsed, estimated
  time left) and one per rule;
- anywhere else (CI, a SLURM log, a pipe): plain lines on stderr, the first naming the jobs and the log file, then one
  every ``PLAIN_EVERY`` seconds while jobs finish (``12/40 jobs done (score 3/5, ...), 1m20s elapsed, ~2m left``), a
  heartbeat every ``HEARTBEAT`` seconds when none does, and a last one when Snakemake ends.

The time left is the work left (per job: its own benchmark record under ``OUT/benchmarks/`` from an earlier run where one
exists, else the mean of its rule's records, else of the jobs of its rule done in this run) divided by the run's
parallelism so far (job-seconds finished per second elapsed, at most the cores Snakemake was given). A failed job is
reported as it fails: its rule and log file, the log's error line first, then the log's last lines. A run that
stops before any job (a refused config, a locked folder) prints the last lines of Snakemake's output. Ctrl-C reaches
Snakemake too (one process group), which stops its jobs and removes their incomplete outputs; the display waits for it
and says how to resume. Snakemake itself is never imported here: it runs in its own process.
"""

from __future__ import annotations

import datetime
import re
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from vertebrae.core.out_folder import LOGS, RESULTS, records_dir
from vertebrae.reports.text import terminal_text

LOG_FOLDER = Path(LOGS) / "snakemake"  # under the out folder
PLAIN_EVERY = 30.0  # seconds between two plain progress lines while jobs finish
HEARTBEAT = 600.0  # seconds between two plain lines when no job finishes
READ_AFTER_EXIT = 10.0  # seconds to read what Snakemake printed last, once it has exited
FAILURE_GRACE = 1.0  # seconds a failed job waits before it is shown: a Ctrl-C fails jobs before vertebrae sees it
TAIL = 10  # lines of a failed job's log shown
RECORDS_PER_RULE = 2000  # benchmark records read per rule for its mean duration
TARGET_RULES = {"all"}  # the workflow's target rule: no work, no record
PLANNING = "building the DAG of jobs"

# a group job's members are logged indented by four spaces: every landmark may be
_RULE = re.compile(r"\s*(?:local)?(?:rule|checkpoint) (\w+):")
_FIELD = re.compile(r"\s{4,}(\w+): (.*)")
_FINISHED = re.compile(r"\s*Finished jobid: (\d+) \(Rule: (\w+)\)")
_ERROR = re.compile(r"\s*Error in rule (\w+):")
_CORES = re.compile(r"Provided cores: (\d+)")
_ERROR_LINE = re.compile(r"(vertebrae: error:|[\w.]*(Error|Exception)\b|error\b|fatal\b|Killed\b)", re.I)


@dataclass
class Job:
    """A job Snakemake started: its rule, log files, benchmark record, start time and expected duration."""

    rule: str
    logs: list[str]
    benchmark: str | None
    started: float
    expected: float | None = None


@dataclass
class RunState:
    """What Snakemake's output said so far: jobs per rule, started, finished and failed."""

    root: Path = Path(".")  # Snakemake's working folder: the jobs' log and benchmark paths are relative to it
    out: str = RESULTS  # the run's out folder (relative to root): the earlier runs' records are under it
    totals: dict[str, int] = field(default_factory=dict)
    done: Counter = field(default_factory=Counter)
    running: dict[int, Job] = field(default_factory=dict)
    failed: list[tuple[str, int | None, list[str]]] = field(default_factory=list)
    durations: dict[str, list[float]] = field(default_factory=dict)  # rule -> seconds of its jobs done in this run
    prior: dict[str, float] = field(default_factory=dict)  # rule -> mean seconds of its earlier benchmark records
    cores: int | None = None
    nothing_to_do: str | None = None
    first_start: float | None = None
    busy: float = 0.0  # job-seconds of the jobs finished in this run
    _block: dict | None = None
    _stats: dict[str, int] | None = None

    # ---- reading Snakemake's lines ----------------------------------------------------------------------------
    def feed(self, line: str, now: float) -> tuple[str, ...]:
        """Take one line of Snakemake's output; returns the events it completes: ``("stats",)``, ``("failed",)``."""
        events: tuple[str, ...] = ()
        if self._block is not None:
            match = _FIELD.fullmatch(line)
            if match:
                self._block.setdefault(match.group(1), match.group(2))
                return ()
            if not line.startswith("        "):  # a shell command's continuation lines are indented deeper
                events = self._close_block(now)
        if self._stats is not None:
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                if parts[0] == "total":
                    self.totals, self._stats = self._stats, None
                    self.prior = {rule: mean for rule in self.totals
                                  if (mean := rule_mean(self.root / records_dir(self.out) / rule)) is not None}
                    return (*events, "stats")
                self._stats[parts[0]] = int(parts[1])
            elif parts and not set(line.strip()) <= {"-", " "} and parts != ["job", "count"]:
                self._stats = None
            return events
        if line == "Job stats:":
            self._stats = {}
        elif match := _RULE.fullmatch(line):
            self._block = {"kind": "start", "rule": match.group(1)}
        elif match := _ERROR.fullmatch(line):
            self._block = {"kind": "error", "rule": match.group(1)}
        elif match := _FINISHED.fullmatch(line):
            self._finish(int(match.group(1)), match.group(2), now)
        elif match := _CORES.match(line):
            self.cores = int(match.group(1))
        elif line.startswith("Nothing to be done"):
            self.nothing_to_do = line
        return events

    def _close_block(self, now: float) -> tuple[str, ...]:
        block, self._block = self._block, None
        jobid = int(block["jobid"]) if block.get("jobid", "").isdigit() else None
        logs = [p.strip() for p in block.get("log", "").split(" (check log file")[0].split(",") if p.strip()]
        if block["kind"] == "start":
            if jobid is not None:
                benchmark = block.get("benchmark")
                self.running[jobid] = Job(block["rule"], logs, benchmark, now,
                                          record_seconds(self.root / benchmark) if benchmark else None)
                self.first_start = now if self.first_start is None else self.first_start
                self.totals.setdefault(block["rule"], 0)
                self.totals[block["rule"]] = max(self.totals[block["rule"]], self._count(block["rule"]))
            return ()
        job = self.running.pop(jobid, None) if jobid is not None else None
        self.failed.append((block["rule"], jobid, logs or (job.logs if job else [])))
        return ("failed",)

    def _finish(self, jobid: int, rule: str, now: float) -> None:
        job = self.running.pop(jobid, None)
        self.done[rule] += 1
        if job is not None:
            self.durations.setdefault(rule, []).append(now - job.started)
            self.busy += now - job.started

    def _count(self, rule: str) -> int:
        return (self.done[rule] + sum(j.rule == rule for j in self.running.values())
                + sum(f[0] == rule for f in self.failed))

    def close(self, now: float) -> tuple[str, ...]:
        return self._close_block(now) if self._block is not None else ()

    # ---- counts and the time left ---------------------------------------------------------------------------
    @property
    def total(self) -> int:
        return sum(self.totals.values())

    @property
    def finished(self) -> int:
        return sum(self.done.values())

    def expected(self, rule: str) -> float | None:
        """Seconds a job of ``rule`` is expected to take: its earlier records' mean, else this run's."""
        if rule in TARGET_RULES:
            return 0.0
        if rule in self.prior:
            return self.prior[rule]
        seen = self.durations.get(rule)
        return statistics.fmean(seen) if seen else None

    def time_left(self, now: float) -> float | None:
        """Estimated seconds until every job is done, or None while nothing tells."""
        if not self.totals:
            return None
        known = [e for rule in self.totals if (e := self.expected(rule)) is not None and rule not in TARGET_RULES]
        fallback = statistics.median(known) if known else None
        work = 0.0
        for rule, total in self.totals.items():
            waiting = total - self._count(rule)
            if waiting > 0:
                each = self.expected(rule) if self.expected(rule) is not None else fallback
                if each is None:
                    return None
                work += waiting * each
        for job in self.running.values():
            each = job.expected if job.expected is not None else self.expected(job.rule)
            each = fallback if each is None else each
            if each is None:
                return None
            work += max(each - (now - job.started), 0.0)
        limit = max(1, self.cores or len(self.running) or 1)
        if self.busy > 0 and self.first_start is not None and now > self.first_start:
            parallel = min(max(self.busy / (now - self.first_start), 1.0), limit)
        else:
            parallel = max(1, min(limit, len(self.running)))
        return work / parallel

    def rules_line(self, limit: int = 4) -> str:
        """The rules with jobs left, as ``score 3/5, report 0/1``."""
        open_rules = [f"{rule} {self.done[rule]}/{total}" for rule, total in self.totals.items()
                      if self.done[rule] < total and rule not in TARGET_RULES]
        return ", ".join(open_rules[:limit]) + (", ..." if len(open_rules) > limit else "")


def record_seconds(path: Path) -> float | None:
    """The mean ``s`` (wall-clock seconds) of a Snakemake benchmark record (TSV: a header, a row per repeat)."""
    try:
        rows = path.read_text(encoding="utf-8", errors="replace").splitlines()[1:]
        values = [float(row.split("\t", 1)[0]) for row in rows if row.strip()]
    except (OSError, ValueError):
        return None
    return statistics.fmean(values) if values else None


def rule_mean(folder: Path) -> float | None:
    """The mean duration of the benchmark records under one rule's folder (earlier runs), or None."""
    if not folder.is_dir():
        return None
    seconds = []
    for index, path in enumerate(folder.rglob("*.tsv")):
        if index >= RECORDS_PER_RULE:
            break
        if (value := record_seconds(path)) is not None:
            seconds.append(value)
    return statistics.fmean(seconds) if seconds else None


def duration(seconds: float) -> str:
    """``45s``, ``1m20s``, ``2h05m``."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def error_line(lines: Sequence[str]) -> str | None:
    """The line of a job's log that says what went wrong: a ``vertebrae: error:`` line, else the last line naming an
    error or exception, else the last line."""
    text = [line.rstrip() for line in lines if line.strip()]
    for pattern in (lambda s: s.startswith("vertebrae: error:"), lambda s: bool(_ERROR_LINE.match(s.strip()))):
        for line in reversed(text):
            if pattern(line):
                return line.strip()
    return text[-1].strip() if text else None


def failure_report(rule: str, jobid: int | None, logs: Sequence[str], root: Path) -> list[str]:
    """The lines that report one failed job: what failed, its error line first, then its log's last lines."""
    where = f"{rule}" + (f" (jobid {jobid})" if jobid is not None else "")
    if not logs:
        return [f"vertebrae: job failed: {where}; it has no log file (Snakemake's log says why)"]
    out = [f"vertebrae: job failed: {where}; its log: {', '.join(logs)}"]
    try:
        lines = (root / logs[0]).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return [*out, "  (its log file could not be read)"]
    first = error_line(lines)
    if first is None:
        return [*out, "  (its log is empty)"]
    tail = [line for line in lines if line.strip()][-TAIL:]
    out.append(f"  {terminal_text(first)}")
    if tail != [first]:
        out.append("  last lines of its log:")
        out += [f"    {terminal_text(line)}" for line in tail]
    return out


class PlainDisplay:
    """Lines on a stream: the plan, a line per PLAIN_EVERY seconds while jobs finish, the outcome."""

    def __init__(self, stream: IO[str]):
        self.stream, self.last, self.last_done = stream, None, -1

    def print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def update(self, state: RunState, now: float, started: float) -> None:
        if not state.totals:
            return
        changed = state.finished != self.last_done
        if self.last is None or (changed and now - self.last >= PLAIN_EVERY) or now - self.last >= HEARTBEAT:
            if self.last is not None:
                self.print(status_line(state, now, started))
            self.last, self.last_done = now, state.finished

    def close(self) -> None:
        pass


class RichDisplay:
    """A Rich live display on a terminal: all jobs, then one bar per rule."""

    def __init__(self, console):
        from rich.live import Live
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.console = console
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[note]}"), console=console, auto_refresh=False)
        self.live = Live(self.progress, console=console, auto_refresh=False, transient=True)
        self.live.start()
        self.tasks: dict[str, int] = {}

    def print(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def update(self, state: RunState, now: float, started: float) -> None:
        elapsed = f"{duration(now - started)} elapsed"
        if not state.totals:
            self._task(PLANNING, 0, None, elapsed)
        else:
            if PLANNING in self.tasks:
                self.progress.remove_task(self.tasks.pop(PLANNING))
            left = state.time_left(now)
            self._task("all jobs", state.finished, state.total,
                       elapsed + (f", ~{duration(left)} left" if left is not None else "") +
                       (f", {len(state.failed)} failed" if state.failed else ""))
            for rule, total in state.totals.items():
                if rule in TARGET_RULES:
                    continue
                running = sum(job.rule == rule for job in state.running.values())
                self._task(f"  {rule}", state.done[rule], total, f"{running} running" if running else "")
        self.live.refresh()

    def _task(self, name: str, done: int, total: int | None, note: str) -> None:
        if name not in self.tasks:
            self.tasks[name] = self.progress.add_task(name, total=total, note=note)
        self.progress.update(self.tasks[name], completed=done, total=total, note=note)

    def close(self) -> None:
        self.live.stop()


def status_line(state: RunState, now: float, started: float) -> str:
    """``12/40 jobs done (score 3/5, ...), 1m20s elapsed, ~2m left``."""
    rules = state.rules_line()
    left = state.time_left(now)
    return (f"{state.finished}/{state.total} jobs done" + (f" ({rules})" if rules else "")
            + (f", {len(state.failed)} failed" if state.failed else "")
            + f", {duration(now - started)} elapsed" + (f", ~{duration(left)} left" if left is not None else ""))


def display_for(stream: IO[str]):
    """A Rich display where ``stream`` is a terminal (and Rich is installed), plain lines otherwise."""
    if stream.isatty():
        try:
            from rich.console import Console
        except ImportError:  # pragma: no cover - rich comes with the workflow extra
            return PlainDisplay(stream)
        console = Console(file=stream)
        if console.is_terminal:
            return RichDisplay(console)
    return PlainDisplay(stream)


def log_path(root: Path, out: str = RESULTS) -> Path:
    """A new file for Snakemake's output under ``root/OUT/logs/snakemake/``, named by the date and time."""
    folder = root / out / LOG_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    path, n = folder / f"{stamp}.log", 2
    while path.exists():
        path, n = folder / f"{stamp}-{n}.log", n + 1
    return path


def watch(command: Sequence[str], env: dict[str, str] | None, *, resume: str, root: Path = Path("."),
          out: str = RESULTS, stream: IO[str] | None = None, clock: Callable[[], float] = time.monotonic) -> int:
    """Run Snakemake's ``command`` under the progress display; its exit status (130 when interrupted by Ctrl-C
    while it still said 0). ``resume``: the command that resumes the run; ``root``: Snakemake's working folder;
    ``out``: the run's out folder (relative to ``root``, or absolute)."""
    stream = sys.stderr if stream is None else stream
    path = log_path(root, out)
    shown = path.relative_to(root) if not path.is_absolute() else path
    state, lock = RunState(root=root, out=out), threading.Lock()
    tail, interrupted = deque(maxlen=200), threading.Event()
    pending: deque[tuple[float, tuple]] = deque()  # failed jobs seen, shown once FAILURE_GRACE has passed
    display = display_for(stream)
    started = clock()

    def report(events: tuple[str, ...]) -> None:
        if "stats" in events:
            plan = ", ".join(f"{rule} {n}" for rule, n in state.totals.items() if rule not in TARGET_RULES)
            display.print(f"vertebrae: {state.total} jobs to run ({plan}); Snakemake's log: {shown} "
                          "(--verbose prints it here)")
        if "failed" in events:
            pending.append((clock(), state.failed[-1]))

    def show_failures(seen_before: float | None) -> None:
        """Show the failed jobs seen before ``seen_before`` (None: all) unless the run was interrupted: the same
        SIGINT reaches Snakemake's jobs, which can fail before this process handles it; the outcome says why."""
        while pending and (seen_before is None or pending[0][0] <= seen_before):
            failed = pending.popleft()[1]
            if not interrupted.is_set():
                display.print("\n".join(failure_report(*failed, root=root)))

    def read(pipe: IO[str]) -> None:
        with open(path, "w", encoding="utf-8") as log:
            for raw in pipe:
                log.write(raw)
                line = raw.rstrip("\n")
                with lock:
                    tail.append(line)
                    report(state.feed(line, clock()))
            with lock:
                report(state.close(clock()))

    proc = subprocess.Popen(list(command), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1)
    reader = threading.Thread(target=read, args=(proc.stdout,), daemon=True)
    reader.start()
    try:
        while proc.poll() is None or reader.is_alive():
            try:
                with lock:
                    show_failures(clock() - FAILURE_GRACE)
                    display.update(state, clock(), started)
                if proc.poll() is not None:  # a job process that outlives Snakemake may hold the pipe open
                    reader.join(READ_AFTER_EXIT)
                    break
                reader.join(0.25) if reader.is_alive() else time.sleep(0.25)
            except KeyboardInterrupt:  # Snakemake got the same SIGINT: it stops its jobs; wait for it
                interrupted.set()
    finally:
        with lock:
            show_failures(None)
        display.close()
    code = proc.returncode
    return _outcome(state, code, interrupted.is_set(), shown, resume, tail, display, clock() - started)


def _outcome(state: RunState, code: int, interrupted: bool, shown: Path, resume: str, tail, display,
             elapsed: float) -> int:
    say = display.print
    counts = f"{state.finished}/{state.total} jobs done" if state.totals else "no job done"
    if interrupted:
        say(f"vertebrae: interrupted after {duration(elapsed)}, {counts}; Snakemake stopped its jobs and removed "
            f"their incomplete outputs. Resume with the same command (finished jobs are kept): {resume}")
        say(f"Snakemake's log: {shown}")
        return code or 130
    if code == 0:
        if state.nothing_to_do and not state.totals:
            say(state.nothing_to_do)
        else:
            say(f"vertebrae: {counts} in {duration(elapsed)}; Snakemake's log: {shown}")
        return 0
    if state.failed:
        rules = ", ".join(dict.fromkeys(rule for rule, _, _ in state.failed))
        say(f"vertebrae: {counts}, {len(state.failed)} failed ({rules}); Snakemake's log: {shown}. After a fix, "
            f"the same command resumes (finished jobs are kept): {resume}")
        return code
    lines = [line for line in tail if line.strip() and not line.startswith("Complete log")][-15:]
    say(f"vertebrae: Snakemake stopped (exit status {code}); its log: {shown}; its last lines:")
    say("\n".join(terminal_text(line) for line in lines))
    return code


__all__ = ["LOG_FOLDER", "RunState", "duration", "error_line", "failure_report", "record_seconds", "status_line",
           "watch"]
