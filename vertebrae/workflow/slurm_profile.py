"""``vertebrae profile slurm``: the packaged SLURM profile with a site's account and partitions, written where
Snakemake finds a profile by name, so a user who installed vertebrae with pip needs no checkout.

The profile is the packaged ``profiles/slurm/config.yaml`` (executor, job count, latency, job groups, status
polling) with ``default-resources: slurm_account`` set to ``account``, and a ``partitions.yaml`` naming
``partition`` (no GPUs) and, when given, ``gpu_partition`` (``max_gpus`` a job). It is written to ``out``, or to
Snakemake's user profile folder ``<user config dir>/snakemake/slurm`` (``$XDG_CONFIG_HOME/snakemake/slurm`` on
Linux), where ``snakemake --profile slurm`` and ``vertebrae run --profile slurm`` look first. Per-rule resources
stay in the workflow profile (``profiles/default``), which Snakemake applies after it. Names are SLURM names
(letters, digits, ``_ . -``); anything else is refused naming the option, and nothing is written.
"""

from __future__ import annotations

import re
from pathlib import Path

from vertebrae.core.artifacts import atomic_write
from vertebrae.core.errors import ConfigError, VertebraeError
from vertebrae.workflow.bundled import packaged_profile, profile_folders

_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_ACCOUNT_LINE = re.compile(r"^  slurm_account: .*$", re.MULTILINE)

#: what `vertebrae run --profile slurm` says when it falls back to the packaged profile (made for the test cluster)
UNSET = ("vertebrae: warning: --profile slurm: no slurm profile of yours was found, so vertebrae's packaged one is "
         "used, whose slurm_account ('root') and partition ('debug') are those of a single-node test cluster, not "
         "your site's; write yours once with `vertebrae profile slurm --account ACCOUNT --partition PARTITION`")


def user_profile_dir(name: str = "slurm") -> Path:
    """Snakemake's user profile folder for ``name`` (the first of ``bundled.profile_folders``)."""
    folders = profile_folders()
    if not folders:
        raise VertebraeError("platformdirs (a Snakemake dependency) is missing: name the folder with --out DIR")
    return folders[0] / name


def _name(value: str | None, option: str) -> str:
    if not value or not _NAME.fullmatch(value):
        raise ConfigError(f"{option}: {value!r} is not a SLURM name (letters, digits, '_', '.', '-'; `sinfo -s` "
                          "lists the partitions, `sacctmgr show assoc user=$USER` the accounts)")
    return value


def write_slurm_profile(account: str, partition: str, gpu_partition: str | None = None, max_gpus: int = 8,
                        out: str | Path | None = None) -> Path:
    """Write the profile (see the module docstring); returns its folder."""
    account, partition = _name(account, "--account"), _name(partition, "--partition")
    if gpu_partition is not None:
        _name(gpu_partition, "--gpu-partition")
    if isinstance(max_gpus, bool) or not isinstance(max_gpus, int) or max_gpus < 1:
        raise ConfigError(f"--max-gpus: must be a whole number >= 1, got {max_gpus!r}")
    source = packaged_profile("slurm")
    if source is None:
        raise VertebraeError("vertebrae is installed without its packaged slurm profile (profiles/slurm); reinstall it")
    text, found = _ACCOUNT_LINE.subn(f"  slurm_account: {account}", (source / "config.yaml").read_text(encoding="utf-8"))
    if found != 1:
        raise VertebraeError(f"{source / 'config.yaml'}: no single 'slurm_account' line to set")
    target = Path(out) if out is not None else user_profile_dir()
    if target.exists() and not target.is_dir():
        raise ConfigError(f"--out {target}: is a file, not a folder")
    partitions = [f"  {partition}:", "    max_gpu: 0"]
    if gpu_partition:
        partitions += [f"  {gpu_partition}:", f"    max_gpu: {max_gpus}"]
    target.mkdir(parents=True, exist_ok=True)
    header = f"# Written by `vertebrae profile slurm` (account {account}, partition {partition}) from {source}\n"
    for name, body in (("partitions.yaml", "partitions:\n" + "\n".join(partitions) + "\n"), ("config.yaml", text)):
        with atomic_write(target / name) as tmp:
            Path(tmp).write_text(header + body, encoding="utf-8")
    return target


def run_profile(kind: str, account: str, partition: str, gpu_partition: str | None = None, max_gpus: int = 8,
                out: str | None = None) -> int:
    """``vertebrae profile slurm ...``: write the profile and say where and how to use it."""
    if kind != "slurm":
        raise ConfigError(f"profile {kind!r}: only 'slurm' is known")
    target = write_slurm_profile(account, partition, gpu_partition, max_gpus, out)
    use = "slurm" if out is None else str(target)
    print(f"wrote the slurm profile in {target} (account {account}, partition {partition}"
          f"{f', GPU partition {gpu_partition}' if gpu_partition else ''}); run with: "
          f"vertebrae run CONFIG --profile {use}")
    return 0


__all__ = ["UNSET", "run_profile", "user_profile_dir", "write_slurm_profile"]
