"""The client side of ``vertebrae run``'s job server: a job subcommand handed to a warm process, or run here.

``vertebrae run`` starts a job server (``vertebrae.job_server``, through ``vertebrae.cli.serving``) and names it to Snakemake's jobs in
``VERTEBRAE_JOB_SERVER`` = ``{host}:{slurm job}:{socket path}``. A ``vertebrae`` process that inherits it, on the
same host and in the same SLURM allocation (none, or the same job id: a job SLURM runs elsewhere never uses it),
connects and sends its arguments, working directory, environment and standard streams (the descriptors themselves,
over the Unix socket); the server forks a process that already imported the job's modules and runs the subcommand
there. This process waits for it, forwards the signals it gets (SIGINT, SIGTERM, SIGHUP, SIGQUIT) to the job's
process group, and exits as the job did: the same status, or the same signal. A server that cannot be reached or
declines (a subcommand not in its ``SERVED``, or another environment's ``vertebrae``: a rule's conda env or
container) leaves it to this process: serving changes no output, only who imports.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
from collections.abc import Mapping, Sequence

SERVER_ENV = "VERTEBRAE_JOB_SERVER"
PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the vertebrae package this process runs
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
HEADER = struct.Struct("!I")  # the length of a JSON message that follows
READY = "ready"  # the server's first line on stdout: it listens


def server_value(path: str, environ: Mapping[str, str]) -> str:
    """The ``VERTEBRAE_JOB_SERVER`` value naming a server at ``path`` that runs on this host, in the SLURM job
    ``environ`` names (or none)."""
    return f"{socket.gethostname()}:{environ.get('SLURM_JOB_ID', '')}:{path}"


#: Set inside an Apptainer / Singularity container: a job there runs in the image, never handed to a host server
#: (the host's /tmp, where the server's socket lives, is bound into the container).
CONTAINER_ENV = ("APPTAINER_CONTAINER", "SINGULARITY_CONTAINER")


def server_path(environ: Mapping[str, str]) -> str | None:
    """The socket path of a server this process may use (same host, same SLURM job or none, not in a container),
    else None."""
    host, _, rest = environ.get(SERVER_ENV, "").partition(":")
    job, _, path = rest.partition(":")
    if (not path or host != socket.gethostname() or job != environ.get("SLURM_JOB_ID", "")
            or any(environ.get(name) for name in CONTAINER_ENV)):
        return None
    return path


def send_message(sock: socket.socket, message: Mapping, fds: Sequence[int] = ()) -> None:
    data = json.dumps(message).encode("utf-8")
    data = HEADER.pack(len(data)) + data
    sent = socket.send_fds(sock, [data], list(fds)) if fds else sock.send(data)
    if sent < len(data):  # (sendall of nothing still writes: to a peer that already closed, a broken pipe)
        sock.sendall(data[sent:])


def receive_message(sock: socket.socket, max_fds: int = 0) -> tuple[dict | None, list[int]]:
    """One message and the descriptors sent with it; (None, []) when the peer closed first."""
    fds: list[int] = []
    buffer = b""
    while len(buffer) < HEADER.size or len(buffer) < HEADER.size + HEADER.unpack(buffer[:HEADER.size])[0]:
        if max_fds and not fds:
            chunk, fds, _, _ = socket.recv_fds(sock, 65536, max_fds)
        else:
            chunk = sock.recv(65536)
        if not chunk:
            for fd in fds:
                os.close(fd)
            return None, []
        buffer += chunk
    size = HEADER.unpack(buffer[:HEADER.size])[0]
    return json.loads(buffer[HEADER.size:HEADER.size + size].decode("utf-8")), list(fds)


def run_served(argv: Sequence[str]) -> int | None:
    """Run ``vertebrae ARGV`` in the job server and return its exit status (or die by its signal); None when no
    server can take it (none named, none reachable, or the subcommand is not one it serves)."""
    path = server_path(os.environ)
    if path is None:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    with sock:
        send_message(sock, {"argv": list(argv), "cwd": os.getcwd(), "env": dict(os.environ), "prefix": sys.prefix,
                            "path": list(sys.path), "package": PACKAGE}, (0, 1, 2))
        reply, _ = receive_message(sock)
        if reply is None or not reply.get("served"):
            return None
        pid = reply["pid"]

        def forward(signum: int, _frame) -> None:
            try:
                os.killpg(pid, signum)
            except ProcessLookupError:
                pass

        for signum in FORWARDED:
            signal.signal(signum, forward)
        done, _ = receive_message(sock)
    if done is None:  # the server went away mid-job: the job's fate is unknown, so it failed
        return 1
    status = done["status"]
    if status < 0:  # killed by a signal: end the same way, as the job's own process would have
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
        return 128 - status
    return status
