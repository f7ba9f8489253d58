"""Reading images as researchers hold them (not a test): vertebrae's webdataset and image_folder sources vs each
format's own reader, for one embedding shard holding every row.

Run: ``python bench/data_sources.py`` (100,000 images: 1,000 tar shards of 100 samples, and a class-per-folder tree
of 10 classes) or ``python bench/data_sources.py --rows 5000`` for a quick run. Ends with ``max_ratio=X``: the worse
format's vertebrae time over its own reader's time (the issue asks X <= 1.2).

What is timed, per format, on the same files (images are tiny 8x8 PNGs, so reading and decoding, not pixels, cost):

* **webdataset, vertebrae**: ``load_source({"type": "webdataset", ...}, rows=(0, n))`` (the rows of the shard: tar
  headers indexed, labels read) then every row decoded to RGB as the model extractors decode it
  (``vertebrae.extractors.torch_runtime.load_image``).
* **webdataset, baseline**: ``webdataset.WebDataset(urls, shardshuffle=False)`` iterated, each sample's ``png``
  decoded to RGB with PIL and its ``cls`` parsed.
* **image_folder, vertebrae**: ``load_source({"type": "image_folder", ...}, rows=(0, n))`` then ``load_image`` per row.
* **image_folder, baseline**: ``os.scandir`` over the sorted class folders and their sorted files, each file
  opened with PIL and converted to RGB.

Each side runs twice, alternating, after one untimed warm-up pass (files in the page cache for all); the best of
the two is reported.

Then planning a sharded source (issue 48): ``vertebrae validate`` of a labelled benchmark over a WebDataset
pattern of ``--shards`` tiny tar files (100,000 by default; one sample each, written as raw tar blocks), run
twice: first with no digest cache (every shard hashed, as a first validate does), then again (digests from the
cache); the same config over a single shard is the baseline (the fixed cost: Snakemake, imports, the dry run).
Prints ``wds_validate_100k_s=X``, the first (worst) time at 100,000 shards (the issue asks X < 10).
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vertebrae.data.sources import load_source  # noqa: E402
from vertebrae.extractors.torch_runtime import load_image  # noqa: E402

CLASSES = 10
PER_SHARD = 100


def _pngs(count: int = 64) -> list[bytes]:
    from PIL import Image

    rng = np.random.default_rng(0)
    out = []
    for _ in range(count):
        buffer = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, size=(8, 8, 3), dtype=np.uint8)).save(buffer, format="PNG")
        out.append(buffer.getvalue())
    return out


def write_data(root: Path, n: int) -> tuple[str, Path]:
    pngs = _pngs()
    shards = root / "shards"
    folder = root / "folder"
    shards.mkdir()
    n_shards = -(-n // PER_SHARD)
    for s in range(n_shards):
        with tarfile.open(shards / f"train-{s:06d}.tar", "w") as tar:
            for i in range(s * PER_SHARD, min(n, (s + 1) * PER_SHARD)):
                for ext, payload in (("png", pngs[i % len(pngs)]), ("cls", str(i % CLASSES).encode())):
                    info = tarfile.TarInfo(f"sample{i:07d}.{ext}")
                    info.size = len(payload)
                    tar.addfile(info, io.BytesIO(payload))
    for c in range(CLASSES):
        (folder / f"class{c:02d}").mkdir(parents=True)
    for i in range(n):
        (folder / f"class{i % CLASSES:02d}" / f"img{i:07d}.png").write_bytes(pngs[i % len(pngs)])
    return f"shards/train-{{{0:06d}..{n_shards - 1:06d}}}.tar", folder


def ours(decl: dict, base: Path, n: int) -> int:
    data = load_source(decl, base_dir=base, where="bench", rows=(0, n))
    for value, rid in zip(data.features.values, data.features.ids):
        load_image(value, rid)
    return len(data.features)


def wds_baseline(urls: list[str]) -> int:
    import webdataset
    from PIL import Image

    count = 0
    for sample in webdataset.WebDataset(urls, shardshuffle=False):
        with Image.open(io.BytesIO(sample["png"])) as image:
            image.convert("RGB")
        int(sample["cls"])
        count += 1
    return count


def folder_baseline(folder: Path) -> int:
    from PIL import Image

    count = 0
    with os.scandir(folder) as entries:
        classes = sorted(e.path for e in entries if e.is_dir())
    for path in classes:
        with os.scandir(path) as entries:
            files = sorted(e.path for e in entries if e.is_file())
        for file in files:
            with Image.open(file) as image:
                image.convert("RGB")
            count += 1
    return count


def timed(fn, *args) -> tuple[float, int]:
    start = time.perf_counter()
    count = fn(*args)
    return time.perf_counter() - start, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="images per format (default 100,000)")
    parser.add_argument("--shards", type=int, default=100_000, help="tar files of the validate case (default 100,000)")
    args = parser.parse_args()
    import webdataset  # noqa: F401  (imported before timing: it imports torch)

    print(f"machine: {platform.machine()} {platform.processor() or ''} cpus={os.cpu_count()} python {platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="vertebrae-bench-") as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        pattern, folder = write_data(root, args.rows)
        print(f"wrote {args.rows} images twice (tars and folders) in {time.perf_counter() - start:.1f} s")
        from braceexpand import braceexpand

        urls = [str(root / p) for p in braceexpand(pattern)]
        cases = {
            "webdataset": ((ours, {"type": "webdataset", "path": pattern, "image_key": "png"}, root, args.rows),
                           (wds_baseline, urls)),
            "image_folder": ((ours, {"type": "image_folder", "path": "folder"}, root, args.rows),
                             (folder_baseline, folder)),
        }
        ratios = {}
        print(f"{'format':<14}{'vertebrae s':>13}{'own reader s':>14}{'ratio':>8}")
        for name, (mine, base) in cases.items():
            timed(*mine), timed(*base)  # warm-up: page cache, imports
            best_mine, best_base = float("inf"), float("inf")
            for _ in range(2):
                t, count = timed(*mine)
                assert count == args.rows, (name, count)
                best_mine = min(best_mine, t)
                t, count = timed(*base)
                assert count == args.rows, (name, count)
                best_base = min(best_base, t)
            ratios[name] = best_mine / best_base
            print(f"{name:<14}{best_mine:>13.2f}{best_base:>14.2f}{ratios[name]:>8.3f}")
        digest_times(root, pattern)
        validate_times(root / "validate", args.shards)
    print(f"max_ratio={max(ratios.values()):.3f}")


def digest_times(root: Path, pattern: str) -> None:
    """Content tracking: each source's ``files`` recipe computed with an empty digest cache (every file hashed), then
    again from the cache (size and mtime only), as planning a workflow does each time."""
    from vertebrae.core.file_digests import FileDigests
    from vertebrae.data.sources.files import source_files_recipe

    old = time.time() - 60  # past the cache's racy window, as a user's files are
    for path in root.rglob("*"):
        os.utime(path, (old, old))
    for decl in ({"type": "webdataset", "path": pattern, "image_key": "png"}, {"type": "image_folder", "path": "folder"}):
        cache = root / f"digests-{decl['type']}.json"
        seconds, hashed = [], []
        for _ in range(2):
            digests = FileDigests(cache)
            start = time.perf_counter()
            source_files_recipe(decl, base_dir=root, where="bench", digests=digests)
            digests.save()
            seconds.append(time.perf_counter() - start)
            hashed.append(len(digests.hashed))
        print(f"digests {decl['type']}: first plan {seconds[0]:.2f} s ({hashed[0]} files hashed), "
              f"then {seconds[1]:.2f} s ({hashed[1]} hashed; size and mtime checked)")


def write_tiny_shards(folder: Path, n: int) -> float:
    """``n`` tar files of one sample (an 8x8 PNG and its class), written as raw tar blocks (a tarfile per shard
    would take minutes at 100,000); returns the seconds taken."""
    png = _pngs(1)[0]

    def member(name: str, payload: bytes) -> bytes:
        info = tarfile.TarInfo(name)
        info.size = len(payload)
        return info.tobuf(format=tarfile.GNU_FORMAT) + payload + b"\0" * (-len(payload) % 512)

    start = time.perf_counter()
    folder.mkdir(parents=True)
    for s in range(n):
        key = f"sample{s:07d}"
        label = str(s % CLASSES).encode()
        blocks = member(f"{key}.png", png) + member(f"{key}.cls", label) + b"\0" * 1024  # the end-of-archive blocks
        (folder / f"train-{s:06d}.tar").write_bytes(blocks)
    return time.perf_counter() - start


def validate_times(root: Path, shards: int) -> None:
    """``vertebrae validate`` of one labelled benchmark over ``shards`` tar files (see the module docstring)."""
    repo = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH")) if p)}

    def validate(n: int, digests: bool) -> float:
        last = f"{n - 1:06d}"
        pattern = f"shards-{n}/train-{{000000..{last}}}.tar" if n > 1 else "shards-1/train-000000.tar"
        config = root / f"validate-{n}.yaml"
        config.write_text("benchmarks:\n  wds:\n    dataset:\n      source: {type: webdataset, path: "
                          f"'{pattern}', image_key: png}}\n    extractors:\n      clip: {{type: open_clip, model: "
                          "ViT-B-32, pretrained: laion2b_s34b_b79k}\n", encoding="utf-8")
        if not digests:
            for state in (root / "results" / ".vertebrae", root / ".vertebrae"):  # the out folder's; the layout before
                (state / "digests.json").unlink(missing_ok=True)
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "vertebrae", "validate", str(config)], cwd=root, env=env,
                              capture_output=True, text=True)
        seconds = time.perf_counter() - start
        assert proc.returncode == 0 and ": valid;" in proc.stdout, proc.stdout + proc.stderr
        return seconds

    root.mkdir()
    wrote = write_tiny_shards(root / "shards-1", 1) + write_tiny_shards(root / f"shards-{shards}", shards)
    old = time.time() - 60  # past the digest cache's racy window, as a user's files are
    for folder in (root / "shards-1", root / f"shards-{shards}"):
        for path in folder.iterdir():
            os.utime(path, (old, old))
    fixed = min(validate(1, False), validate(1, False))
    first = validate(shards, False)
    again = validate(shards, True)
    per_shard = (first - fixed) / shards * 1e6
    print(f"validate webdataset: {shards:,} one-sample shards (written in {wrote:.1f} s): first {first:.2f} s "
          f"(every shard hashed), again {again:.2f} s (digests cached); one shard {fixed:.2f} s; "
          f"{per_shard:.0f} us per shard; planning alone {plan_time(root, root / f'validate-{shards}.yaml'):.2f} s "
          "(validate plans once; Snakemake's dry run reads that plan back)")
    name = "100k" if shards == 100_000 else f"{shards}_shards"
    print(f"wds_validate_{name}_s={first:.2f}")


def plan_time(root: Path, config: Path) -> float:
    """Seconds of ``vertebrae.planning.plan`` of ``config`` in this process (headers read anew), as validate calls it."""
    from vertebrae.cli.commands import merged_config
    from vertebrae.data.sources import webdataset as wds
    from vertebrae.planning import plan

    here = Path.cwd()
    os.chdir(root)  # relative paths in a config resolve against the working folder
    try:
        merged = merged_config([config])
        wds._INDEX.clear()
        start = time.perf_counter()
        plan(merged)
        return time.perf_counter() - start
    finally:
        os.chdir(here)


if __name__ == "__main__":
    main()
