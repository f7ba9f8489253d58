"""A warm process for ``vertebrae run``'s jobs: imports once, forks one process per job subcommand.

A local run's jobs are short processes that spend most of their time importing (scikit-learn alone takes about a
second in every score and compress job). ``vertebrae run`` wraps Snakemake in ``vertebrae.cli.serving``, which
starts ``python -m vertebrae.job_server SOCKET PARENT_PID``: a process that imports the served subcommands' modules
and their heavy libraries once, listens on a Unix socket in a private temporary folder (mode 0700), and names
itself in ``VERTEBRAE_JOB_SERVER`` (``vertebrae.core.job_client``). Each request (a subcommand's arguments, working
directory, environment and standard streams) is served by a fork: its own process group, the request's streams as
its 0/1/2, its directory, environment and import path (the client's ``sys.path``), and BLAS limited to the threads the environment names
(``OMP_NUM_THREADS``, which Snakemake sets from the rule's ``threads``: the same thread count as a process started
with it, so the same bits). Its exit status goes back to the client, which exits with it. A client that goes away
mid-job (killed) takes its job with it (SIGKILL to the job's group).

Served: the subcommands in ``SERVED``, the bookkeeping and scoring jobs, asked by a client of the same environment
and the same vertebrae package (``sys.prefix`` and the package's folder). Not served: embedding and fitting (model
libraries are not forked warm, CUDA least of all) and the user commands. A served job's Snakemake benchmark record
times the client, which waits for the job (``s`` is the job's wall time), but its ``max_rss`` is the client's: the
cost report reads peak memory only from embedding, fitting and compress jobs (each measures its own), so no
compress job (labelled, retrieval, zero-shot) is served either.

The server ends on SIGTERM (``serving`` sends it when Snakemake is done), or on its own when its ``vertebrae run`` is
gone (checked every second); children it still has are killed then.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import selectors
import signal
import socket
import sys
import traceback

from vertebrae.core.job_client import PACKAGE, READY, SERVER_ENV, receive_message, send_message

SERVED = frozenset({
    "plan", "merge-embeddings", "write-protocol", "score", "score-labelled-partial", "merge-labelled-partials",
    "report", "compare", "merge-retrieval-embeddings", "write-retrieval-relevance",
    "score-retrieval", "score-retrieval-partial", "score-retrieval-fanout-partial", "stage-retrieval-fanout",
    "merge-retrieval-partials", "figures", "report-tables", "report-page", "results-index", "plan-zero-shot",
    "merge-zero-shot-embeddings", "write-zero-shot-protocol", "score-zero-shot", "summary",
    "leaderboard",
})
# imported before the first fork, besides the served subcommands' own modules: what their jobs import lazily
PRELOAD = ("numpy", "scipy.stats", "h5py", "sklearn.decomposition", "overlapindex", "separatix", "threadpoolctl",
           "matplotlib.pyplot", "vertebrae.results")


def _preload() -> object:
    cli = importlib.import_module("vertebrae.cli")
    for name in sorted({cli.COMMANDS[c].run.partition(":")[0] for c in SERVED if c in cli.COMMANDS}) + list(PRELOAD):
        try:
            importlib.import_module(name)
        except ImportError:  # an optional library missing: its jobs import it (and fail) as they would unserved
            pass
    return cli


def _run_child(cli, request: dict, fds: list[int]) -> int:
    """In the forked process: become the job and run it; its exit status."""
    os.setpgid(0, 0)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    for target, fd in zip((0, 1, 2), fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update({k: v for k, v in request["env"].items() if k != SERVER_ENV})
    sys.path[:] = request["path"]  # the client's: what the job imports (a user's module on its PYTHONPATH) is found
    importlib.invalidate_caches()  # as its own process would find it, wherever the server was started
    threads = os.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0:
        from threadpoolctl import threadpool_limits

        threadpool_limits(int(threads))
    sys.argv = ["vertebrae", *request["argv"]]
    try:
        status = cli.main(request["argv"])
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int) and exc.code is not None:
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        status = 1
    return status


def serve(path: str, parent: int) -> None:
    """Listen at ``path`` until ``parent`` is gone or SIGTERM; one fork per served request."""
    # a terminal's Ctrl-C reaches Snakemake, which ends the run (and `vertebrae run`, which says how to resume): the
    # server ignores it from its first moment, its imports included, so that it prints no traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print(READY, flush=True)  # bound: requests wait in the backlog while the imports run beside Snakemake's start
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    cli = _preload()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    jobs: dict[int, socket.socket] = {}  # pid -> its client's connection
    try:
        while not stopping and os.getppid() == parent:
            for key, _ in selector.select(timeout=1.0):
                if key.fileobj is listener:
                    _accept(cli, listener, selector, jobs)
                elif key.fileobj == wake_r:
                    os.read(wake_r, 4096)
                else:  # a client closed (or wrote) mid-job: it is gone, and so is its job
                    pid = key.data
                    selector.unregister(key.fileobj)
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(pid, signal.SIGKILL)
            _reap(selector, jobs)
    finally:  # however the server ends, no job outlives it (its client reports it failed)
        for pid in jobs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


def _accept(cli, listener: socket.socket, selector: selectors.BaseSelector, jobs: dict) -> None:
    conn, _ = listener.accept()
    conn.settimeout(10)
    try:
        request, fds = receive_message(conn, max_fds=3)
    except (OSError, ValueError):
        conn.close()
        return
    if (request is None or len(fds) != 3 or not request.get("argv") or request["argv"][0] not in SERVED
            or request.get("prefix") != sys.prefix  # a rule's conda env or container: its own packages
            or request.get("package") != PACKAGE or not isinstance(request.get("path"), list)):  # another vertebrae
        for fd in fds:
            os.close(fd)
        with contextlib.suppress(OSError):
            send_message(conn, {"served": False})
        conn.close()
        return
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            listener.close()
            conn.close()
            for other in jobs.values():
                other.close()
            status = _run_child(cli, request, fds)
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(status if isinstance(status, int) and 0 <= status <= 255 else 1)
    for fd in fds:
        os.close(fd)
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)  # as the child does: either order, the group exists before anyone signals it
    try:
        send_message(conn, {"served": True, "pid": pid})
    except OSError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    jobs[pid] = conn
    selector.register(conn, selectors.EVENT_READ, pid)


def _reap(selector: selectors.BaseSelector, jobs: dict) -> None:
    while jobs:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = jobs.pop(pid, None)
        if conn is None:
            continue
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(conn)
        with contextlib.suppress(OSError):
            send_message(conn, {"status": os.waitstatus_to_exitcode(status)})
        conn.close()


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
