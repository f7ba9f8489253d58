"""``vertebrae run``'s job server, started and stopped around Snakemake (the server itself: ``vertebrae.job_server``).

``serving(environ)`` starts ``python -m vertebrae.job_server SOCKET PID`` with the socket in a private temporary
folder (mode 0700), waits until it listens (it imports the jobs' modules after that, while Snakemake starts), and
yields ``environ`` naming it in ``VERTEBRAE_JOB_SERVER`` (``vertebrae.core.job_client.server_value``) for Snakemake
and its jobs; afterwards it stops the server (SIGTERM, then SIGKILL after 10 s) and removes the folder.
``VERTEBRAE_JOB_SERVER=off`` in ``environ`` starts none, and a server that fails to start only costs speed: either
way the yielded environment names no server and every job runs its subcommand itself.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator

from vertebrae.core.job_client import READY, SERVER_ENV, server_value

OFF = "off"


@contextlib.contextmanager
def serving(environ: dict[str, str]) -> Iterator[dict[str, str]]:
    """A job server for the duration of the block; yields ``environ`` naming it, or naming none."""
    if environ.get(SERVER_ENV) == OFF:
        yield {k: v for k, v in environ.items() if k != SERVER_ENV}
        return
    folder = tempfile.mkdtemp(prefix="vertebrae-jobs-")
    path = os.path.join(folder, "socket")
    proc = subprocess.Popen([sys.executable, "-m", "vertebrae.job_server", path, str(os.getpid())],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
                            env={k: v for k, v in environ.items() if k != SERVER_ENV})
    try:
        ready = proc.stdout.readline().strip() == READY
        proc.stdout.close()
        served = dict(environ, **{SERVER_ENV: server_value(path, environ)}) if ready else {
            k: v for k, v in environ.items() if k != SERVER_ENV}
        yield served
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(folder, ignore_errors=True)
