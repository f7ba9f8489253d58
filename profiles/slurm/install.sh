#!/usr/bin/env bash
# Install profiles/slurm as the global `slurm` Snakemake profile, with the site's account and partitions:
#     profiles/slurm/install.sh ACCOUNT PARTITION [GPU_PARTITION [MAX_GPUS]]
# Writes ${XDG_CONFIG_HOME:-~/.config}/snakemake/slurm/{config.yaml,partitions.yaml} through `vertebrae profile
# slurm` (which a pip install has without this script); afterwards `snakemake --profile slurm` works.
set -euo pipefail
if [[ $# -gt 4 ]]; then
    echo "usage: $0 ACCOUNT PARTITION [GPU_PARTITION [MAX_GPUS]]" >&2
    exit 64
fi
account=${1:-} partition=${2:-} gpu_partition=${3:-} max_gpus=${4:-8}
# An empty account or partition would install a profile that submits every job with `-A ''` or to no partition:
# refuse, naming what is missing and how to give it.
missing=()
[[ -n "$account" ]] || missing+=("the SLURM account (SLURM_ACCOUNT=<account>, the account jobs are charged to: sbatch -A)")
[[ -n "$partition" ]] || missing+=("the CPU partition (SLURM_PARTITION=<partition>; \`sinfo -s\` lists them)")
if [[ ${#missing[@]} -gt 0 ]]; then
    for what in "${missing[@]}"; do echo "$0: missing $what" >&2; done
    echo "give them as: make slurm-profile SLURM_ACCOUNT=<account> SLURM_PARTITION=<partition>" \
        "[SLURM_GPU_PARTITION=<gpu partition>]   (or: $0 ACCOUNT PARTITION [GPU_PARTITION [MAX_GPUS]])" >&2
    echo "nothing was installed" >&2
    exit 64
fi
[[ "$max_gpus" =~ ^[1-9][0-9]*$ ]] || { echo "$0: MAX_GPUS must be a positive whole number, got '$max_gpus'" >&2; exit 64; }
for value in "$account" "$partition" "$gpu_partition"; do
    [[ "$value" =~ ^[A-Za-z0-9_.-]*$ ]] || { echo "$0: invalid name: '$value'" >&2; exit 64; }
done
here=$(cd "$(dirname "$0")" && pwd)
target="${XDG_CONFIG_HOME:-$HOME/.config}/snakemake/slurm"
# the profile itself is written by `vertebrae profile slurm` (the route for a pip install), from this folder's files
vertebrae=$(command -v vertebrae || echo "$here/../../.venv/bin/vertebrae")
"$vertebrae" profile slurm --account "$account" --partition "$partition" \
    ${gpu_partition:+--gpu-partition "$gpu_partition" --max-gpus "$max_gpus"} --out "$target"
