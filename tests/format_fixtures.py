"""Small image datasets in the layouts researchers hold them (class folders, a ``save_to_disk`` folder, WebDataset
tar shards, and the same rows as a manifest), plus ``image_features``: an importable callable extractor that
decodes each image row the way model extractors do and returns its mean and spread per channel."""

from __future__ import annotations

import csv
import io
import json
import tarfile
from pathlib import Path

import numpy as np

CLASSES = ("blue", "green", "red")


def tiny_images(n: int = 18, *, seed: int = 0) -> list[tuple[str, str, bytes]]:
    """``n`` rows of (id, class, PNG bytes); the class sets the dominant channel so the classes separate."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        label = CLASSES[i % 3]
        pixels = rng.integers(0, 90, size=(6 + i % 3, 7, 3))
        pixels[..., CLASSES.index(label)] += 120 + rng.integers(0, 30)
        buffer = io.BytesIO()
        Image.fromarray(pixels.astype(np.uint8)).save(buffer, format="PNG")
        rows.append((f"img{i:03d}", label, buffer.getvalue()))
    return rows


def write_image_folder(root: Path, rows) -> Path:
    for rid, label, data in rows:
        (root / label).mkdir(parents=True, exist_ok=True)
        (root / label / f"{rid}.png").write_bytes(data)
    return root


def write_manifest(path: Path, rows, image_dir: Path, *, ids: str = "folder") -> Path:
    """A manifest of the same rows (images written under ``image_dir``); ``ids="folder"`` names rows as an
    image_folder does (``class/file``), ``ids="key"`` by their key."""
    image_dir.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "image", "label"])
        for rid, label, data in sorted(rows, key=lambda r: (r[1], r[0])):
            (image_dir / f"{rid}.png").write_bytes(data)
            writer.writerow([f"{label}/{rid}.png" if ids == "folder" else rid,
                             (image_dir / f"{rid}.png").relative_to(path.parent).as_posix(), label])
    return path


def write_tar_shards(folder: Path, rows, *, per_shard: int = 5, label: str = "cls", ext: str = "png") -> list[Path]:
    """Shards ``train-000000.tar``...; each sample ``<key>.<ext>`` and its label (``cls``: class index, ``txt``:
    class name, ``json``: ``{"label": name}``)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for s in range(0, len(rows), per_shard):
        path = folder / f"train-{s // per_shard:06d}.tar"
        with tarfile.open(path, "w") as tar:
            for rid, name, data in rows[s:s + per_shard]:
                members = {ext: data}
                if label == "cls":
                    members["cls"] = str(CLASSES.index(name)).encode()
                elif label == "txt":
                    members["txt"] = name.encode()
                elif label == "json":
                    members["json"] = json.dumps({"label": name}).encode()
                for suffix, payload in members.items():
                    info = tarfile.TarInfo(f"{rid}.{suffix}")
                    info.size = len(payload)
                    tar.addfile(info, io.BytesIO(payload))
        paths.append(path)
    return paths


def image_features(rows) -> np.ndarray:
    """Per-row mean and standard deviation of each RGB channel (6 columns), decoded like model extractors do."""
    from vertebrae.extractors.torch_runtime import load_image

    out = []
    for value, rid in zip(rows.values, rows.ids):
        pixels = np.asarray(load_image(value, rid), dtype=np.float64)
        out.append(np.concatenate([pixels.mean(axis=(0, 1)), pixels.std(axis=(0, 1))]))
    return np.asarray(out)


def write_hf_dataset(folder: Path, rows, *, image: str = "feature") -> Path:
    """A DatasetDict (splits ``train`` = every row, ``test`` = the first two) saved with ``save_to_disk``; images as
    an ``Image`` feature with bytes (``image="feature"``) or as paths relative to ``folder`` (``image="path"``)."""
    import datasets

    if image == "path":
        (folder / "files").mkdir(parents=True, exist_ok=True)
        for rid, _, data in rows:
            (folder / "files" / f"{rid}.png").write_bytes(data)
        cells, feature = [f"files/{rid}.png" for rid, _, _ in rows], datasets.Value("string")
    else:
        cells, feature = [{"bytes": data, "path": None} for _, _, data in rows], datasets.Image()
    features = datasets.Features({"image": feature, "label": datasets.ClassLabel(names=list(CLASSES)),
                                  "id": datasets.Value("string")})
    train = datasets.Dataset.from_dict({"image": cells, "label": [CLASSES.index(label) for _, label, _ in rows],
                                        "id": [rid for rid, _, _ in rows]}, features=features)
    datasets.disable_progress_bars()
    datasets.DatasetDict({"train": train, "test": train.select(range(2))}).save_to_disk(str(folder))
    return folder


BATCHES: list[list[str]] = []  # the tar files of each batch ``batch_centred_features`` embedded, in order


def batch_centred_features(rows) -> np.ndarray:
    """``image_features`` less the batch mean, plus the batch size: a row's output depends on the other rows of its
    batch (as a model's may in its last bits). Records the tar files each batch's rows name in ``BATCHES``."""
    from vertebrae.core.image_refs import container_path

    BATCHES.append(sorted({container_path(v) for v in rows.values}))
    features = image_features(rows)
    return features - features.mean(axis=0) + len(features)


def prompt_features(rows) -> np.ndarray:
    """Text encoder in ``image_features``' space: a prompt naming a class points at that class's channel mean."""
    out = np.zeros((len(rows), 6))
    for i, text in enumerate(rows):
        for c, name in enumerate(CLASSES):
            if name in text:
                out[i, c] += 150.0
        out[i, 3:] = 40.0
    return out


def write_captions(root: Path, rows) -> dict[str, Path]:
    """Text queries for an image gallery of ``rows``: one caption per class (ids ``q-<class>``, label the class) as
    a ``save_to_disk`` dataset ``captions`` and as a manifest ``captions.csv``, and the relevance file ``qrels.tsv``
    (each caption to every image of its class, by image key) and ``qrels-folder.tsv`` (by image folder id)."""
    import datasets

    ids, texts = [f"q-{name}" for name in CLASSES], [f"a {name} picture" for name in CLASSES]
    datasets.disable_progress_bars()
    datasets.Dataset.from_dict({"id": ids, "caption": texts, "label": list(CLASSES)}).save_to_disk(str(root / "captions"))
    with open(root / "captions.csv", "w", newline="") as handle:
        csv.writer(handle).writerows([("id", "caption"), *zip(ids, texts)])
    for name, key in (("qrels.tsv", lambda rid, label: rid), ("qrels-folder.tsv", lambda rid, label: f"{label}/{rid}.png")):
        lines = [f"q-{label}\t{key(rid, label)}\t1\n" for rid, label, _ in rows]
        (root / name).write_text("".join(sorted(lines)), encoding="utf-8")
    return {"hf": root / "captions", "manifest": root / "captions.csv"}
