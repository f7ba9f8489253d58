"""Installed in the default run's job processes (tests/workflow/conftest.py, PYTHONPATH) for
tests/workflow/test_file_access.py: every file a ``vertebrae`` job process opens, lists or renames into place is
written to ``$VERTEBRAE_AUDIT_LOG/{pid}.jsonl``, after one line with the process's arguments. HDF5 files are opened
by libhdf5, not by Python: each ``h5py.File`` is reported as an ``open`` event too. Other processes (Snakemake
itself) are left alone; files of the Python environment, which the audit allows, are not logged (most of a job's
opens are its imports)."""

import json
import os
import sys

_LOG = os.environ.get("VERTEBRAE_AUDIT_LOG")


def _install(log: str) -> None:
    import importlib.machinery

    seen: set = set()
    out = open(os.path.join(log, f"{os.getpid()}.jsonl"), "a", buffering=1, encoding="utf-8")
    out.write(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd()}) + "\n")
    events = frozenset({"open", "os.listdir", "os.scandir", "os.rename", "os.replace"})
    # the Python environment (its modules, a packaged model's weights): the audit allows it, so it goes unlogged,
    # which keeps the hook's cost small (most of a job's opens are its imports)
    environment = tuple({os.path.join(p, "") for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})

    def hook(event, args):
        if event not in events:
            return
        if event == "open":
            path, mode, flags = args
            writes = bool(mode and any(c in mode for c in "wax+")) or bool((flags or 0) & (os.O_WRONLY | os.O_RDWR))
            kind = "w" if writes else "r"
        elif event in ("os.listdir", "os.scandir"):
            path, kind = args[0], "d"
        elif event in ("os.rename", "os.replace"):
            path, kind = args[1], "w"
        else:
            return
        if path is None or isinstance(path, int):
            return
        path = os.fsdecode(path)
        if path.startswith(environment):
            return
        path = os.path.abspath(path)
        if (path, kind) not in seen:
            seen.add((path, kind))
            out.write(json.dumps({"path": path, "kind": kind}) + "\n")

    class H5Files:
        """h5py opens its files in C: each ``h5py.File(name, mode)`` is reported as an ``open`` event."""

        @staticmethod
        def find_spec(name, path=None, target=None):
            if name != "h5py":
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or spec.loader is None:
                return spec
            execute = spec.loader.exec_module

            def exec_module(module):
                execute(module)
                init = module.File.__init__

                def __init__(self, name, mode="r", *args, **kwargs):
                    if isinstance(name, (str, bytes, os.PathLike)):
                        sys.audit("open", os.fspath(name), mode, 0)
                    init(self, name, mode, *args, **kwargs)

                module.File.__init__ = __init__

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, H5Files)
    sys.addaudithook(hook)


if _LOG and sys.argv and os.path.basename(sys.argv[0]) == "vertebrae":
    _install(_LOG)
