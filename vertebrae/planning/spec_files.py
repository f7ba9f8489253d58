"""Job specs as files: the workflow's plan jobs read their spec from a file, never from a shell argument.

Linux caps one argument at 128 KiB (``MAX_ARG_STRLEN``) and ``bash -c`` gets a job's whole shell line as one, so a
spec passed as ``--spec TEXT`` broke the report's plan job at about 150 candidates. ``write_spec_files`` writes each
spec that has a plan job as ``OUT/.vertebrae/specs/{fingerprint}-{digest}.json`` (``OUT``: the run's out folder,
``vertebrae.core.out_folder``) under the working directory when the Snakefile is parsed
(``vertebrae.stages.plan.spec_file_text``: the digest hashes the spec without its context, ``spec_content``: a spec
whose non-recipe fields change gets a new name, one planned by another config under other benchmark or candidate
names keeps it). The plan rule takes the file as an input and runs ``vertebrae plan --spec-file``, which refuses a
file whose content does not hash to its name.

Reruns: the spec file's name changes exactly when what the job reads does, which Snakemake's ``input`` rerun
trigger sees; the rule marks the file ``ancient`` so that a spec file written again (a deleted
``OUT/.vertebrae/``, a fresh checkout of the results, another config's context) reruns nothing. A folder of the old layout
(``.vertebrae/specs/`` beside ``results/``) has its plan jobs' inputs recorded at the old path: Snakemake's input
trigger reruns them once (docs: "The out folder").

Writing costs a stat per spec when the files exist: every SLURM job parses the Snakefile again.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

from vertebrae.core.out_folder import RESULTS, state_dir
from vertebrae.stages.plan import spec_file_name, spec_file_text

SPEC_DIR = "specs"  # under the run's state folder, OUT/.vertebrae/


def spec_dir(out: str = RESULTS) -> str:
    """``OUT/.vertebrae/specs``: where the plan jobs' spec files lie (the one place that says so)."""
    return f"{state_dir(out).as_posix()}/{SPEC_DIR}"


def spec_file(spec: Mapping[str, Any], out: str = RESULTS) -> tuple[str, str]:
    """``spec``'s file path relative to the working directory (under the out folder ``out``), and its text."""
    name, text = spec_file_text(spec)
    return f"{spec_dir(out)}/{name}", text


def spec_path(spec: Mapping[str, Any], out: str = RESULTS) -> str:
    """``spec``'s file path as ``spec_file`` gives it, without encoding its text."""
    return f"{spec_dir(out)}/{spec_file_name(spec)}"


def write_spec_file(path: str | Path, text: str) -> bool:
    """Write ``text`` to ``path`` unless a file of its size is there already (the name fixes the content; a file
    changed in place is refused by the plan job, naming it). Atomic (a temporary file moved into place), not
    synced: a spec file is written again from the config whenever it is missing. True when written."""
    data = text.encode("utf-8")
    with suppress(FileNotFoundError):
        if os.stat(path).st_size == len(data):
            return False
    directory, name = os.path.split(os.fspath(path))
    os.makedirs(directory or ".", exist_ok=True)
    tmp = os.path.join(directory, f".{name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return True


def write_spec_files(specs: Mapping[str, Mapping[str, Any]], directory: str | Path = ".",
                     out: str = RESULTS) -> dict[str, str]:
    """Write the spec file of each of ``specs`` (fingerprint -> spec) under ``directory`` (in the out folder
    ``out``); return each one's path relative to ``directory`` (as the rules name it) by fingerprint."""
    paths = {}
    for fp, spec in specs.items():
        paths[fp], text = spec_file(spec, out)
        write_spec_file(Path(directory) / paths[fp], text)
    return paths


__all__ = ["SPEC_DIR", "spec_dir", "spec_file", "spec_path", "write_spec_file", "write_spec_files"]
