"""Checkpoint sweeps: one candidate per checkpoint of a training run, each exactly the single-checkpoint candidate.

An extractor of a family that loads local weights may declare ``checkpoints:`` instead of its weights key: a glob
(``ckpts/step_*.safetensors``) or a list of files / folders (each entry may itself be a glob), paths relative to the
working folder as the family's own key takes them. ``step_from`` says where each checkpoint's step comes from:

- a regular expression searched in the path as declared (its first group if it has one, else the whole match),
  e.g. ``'step_(\\d+)'``; the default is the last integer in the path (a weights suffix such as ``.safetensors``
  left out), so ``ckpts/step_1000.pt``, ``run/checkpoint-1000/`` and ``run/1000/model.safetensors`` are step 1000;
- ``metadata``: the checkpoint's own record: ``global_step`` of a folder's ``trainer_state.json`` (a Hugging Face
  Trainer checkpoint), else ``step`` / ``global_step`` in a ``.safetensors`` header's metadata (a folder's weights
  file, for a folder).

``expand_checkpoint_sweeps`` (called when the config is validated, before the layer sweep's expansion) turns
``NAME: {checkpoints: ..., ...}`` into ``NAME@STEP: {<weights key>: <checkpoint>, ...}`` for every checkpoint, the
rest of the declaration kept: exactly the candidate a user would write for that one checkpoint, so its recipe and
fingerprint are that candidate's (the family hashes the file's, or folder's, content), and a new checkpoint adds
only its own jobs. With ``hidden_layers`` the grid's candidates are ``NAME@STEP@LAYER`` (the layer sweep expands
each checkpoint's candidate), and the workflow embeds the layers of ONE checkpoint in one forward pass per batch
(``vertebrae.planning.sweeps``: their declarations differ only in the layer).

The weights key of each family (``WEIGHTS_KEY``): torch ``weights`` (a state-dict file), timm ``checkpoint`` (a file
or a ``save_for_hf`` folder), hf_text / hf_vision / hf_multimodal / sentence_transformers ``model`` (a local folder,
``save_pretrained`` output), open_clip ``pretrained`` (a weights file, with ``model`` naming the architecture) or,
for a folder, ``model: local-dir:FOLDER``.

Refused when the config is validated, naming the key and the value: a family that cannot load local weights, a
glob matching nothing, a listed path that does not exist, a step the regex cannot read from a path, two checkpoints
with one step, a weights key declared beside ``checkpoints``, and (torch) a checkpoint whose tensors do not fit
the module the factory builds: the module is built on torch's meta device (no memory) and its state dict's names
and shapes compared with the file's (a ``.safetensors`` header, or a torch file loaded with ``weights_only=True``,
memory-mapped); a timm checkpoint is checked the same way by the timm adapter when its candidate is built (plan
time); the checkpoints of a family that builds its model from each checkpoint's own files (hf_*,
sentence_transformers, open_clip) must hold the same tensors as the sweep's first, by name and shape, in their
``.safetensors`` files (headers only). No checkpoint is unpickled beyond ``weights_only=True``.

``checkpoint_series`` finds the step series among a benchmark's candidates (for the report's step figure,
``vertebrae.reports.steps``): candidates ``BASE@STEP`` (or ``BASE@STEP@LAYER`` with that ``hidden_layer``) whose
declarations differ only in their weights, two or more of them, whether a sweep made them or the user wrote them.
``CheckpointSweep`` is the Python face: the same expansion, its candidates built as extractors.
"""

from __future__ import annotations

import glob
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from vertebrae.core import check_records
from vertebrae.core.errors import ConfigError
from vertebrae.core.fingerprint import canonical_json

#: The key that names a family's local weights (what one checkpoint of a sweep becomes)
WEIGHTS_KEY = {"torch": "weights", "timm": "checkpoint", "hf_text": "model", "hf_vision": "model",
               "hf_multimodal": "model", "sentence_transformers": "model", "open_clip": "pretrained"}
#: The keys a sweep's declaration must leave to its checkpoints, per family
_TAKEN = {"torch": ("weights",), "timm": ("checkpoint", "pretrained"), "hf_text": ("model", "model_path_from"),
          "hf_vision": ("model", "model_path_from"), "hf_multimodal": ("model", "model_path_from"),
          "sentence_transformers": ("model", "model_path_from"), "open_clip": ("pretrained",)}
SWEEP_KEYS = ("checkpoints", "step_from")
METADATA = "metadata"
_WEIGHT_SUFFIXES = (".safetensors", ".pt", ".pth", ".bin", ".ckpt")
_LAST_INTEGER = re.compile(r"(\d+)(?!.*\d)", re.S)
_GLOB = re.compile(r"[*?\[]")
_FIT_CHECK = "checkpoint-fits-module/v1"


# -- finding the checkpoints and their steps

def checkpoint_paths(value: Any, *, where: str) -> list[str]:
    """The checkpoints ``checkpoints: value`` declares (a glob, or a list of paths and globs), as declared, each
    once, in declaration order (a glob's matches sorted)."""
    if isinstance(value, str):
        entries = [value]
    elif isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        entries = list(value)
    else:
        raise ConfigError(f"{where}: a glob or a non-empty list of checkpoint files / folders, got {value!r}")
    out: list[str] = []
    for i, entry in enumerate(entries):
        at = where if isinstance(value, str) else f"{where}[{i}]"
        if _GLOB.search(entry):
            matches = sorted(glob.glob(entry))
            if not matches:
                raise ConfigError(f"{at}: the glob {entry!r} matches no file or folder (relative to {Path.cwd()})")
        elif not Path(entry).exists():
            raise ConfigError(f"{at}: checkpoint not found: {entry!r}")
        else:
            matches = [entry]
        out.extend(m for m in matches if m not in out)
    return out


def _metadata_step(path: Path, where: str) -> int:
    folder = path if path.is_dir() else None
    if folder is not None and (folder / "trainer_state.json").is_file():
        try:
            step = json.loads((folder / "trainer_state.json").read_text(encoding="utf-8")).get("global_step")
        except (OSError, ValueError, AttributeError) as exc:
            raise ConfigError(f"{where}: {folder / 'trainer_state.json'} is not readable JSON: {exc}") from None
        if isinstance(step, int) and not isinstance(step, bool):
            return step
    files = sorted(folder.glob("*.safetensors")) if folder is not None else [path]
    for file in files:
        if file.suffix != ".safetensors":
            continue
        from safetensors import SafetensorError, safe_open

        try:
            with safe_open(str(file), framework="numpy") as handle:
                meta = handle.metadata() or {}
        except (SafetensorError, OSError, ValueError) as exc:
            raise ConfigError(f"{where}: {file} is not a readable safetensors file: {exc}") from None
        for key in ("step", "global_step"):
            if str(meta.get(key, "")).isdigit():
                return int(meta[key])
    raise ConfigError(f"{where}: step_from: metadata, but {path} records no step (no trainer_state.json global_step, "
                      "no step / global_step in a .safetensors header's metadata); declare a step_from regex instead")


def checkpoint_step(path: str, step_from: str | None, *, where: str) -> int:
    """The step of the checkpoint ``path`` (as declared) under ``step_from`` (module docstring)."""
    if step_from == METADATA:
        return _metadata_step(Path(path), where)
    text = path.rstrip("/")
    if step_from is None:
        suffix = next((s for s in _WEIGHT_SUFFIXES if text.endswith(s)), "")
        match = _LAST_INTEGER.search(text[: len(text) - len(suffix)])
        if match is None:
            raise ConfigError(f"{where}: no integer in the checkpoint path {path!r} to read its step from; declare "
                              "step_from (a regex whose first group is the step, or metadata)")
        return int(match.group(1))
    try:
        pattern = re.compile(step_from)
    except re.error as exc:
        raise ConfigError(f"{where.rsplit('.', 1)[0]}.step_from: '{step_from}' is not a regular expression: {exc}") from None
    match = pattern.search(text)
    if match is None:
        raise ConfigError(f"{where.rsplit('.', 1)[0]}.step_from: '{step_from}' does not match the checkpoint path "
                          f"{path!r}")
    found = match.group(1) if pattern.groups else match.group(0)
    if found is None or not found.isdigit():
        raise ConfigError(f"{where.rsplit('.', 1)[0]}.step_from: '{step_from}' reads {found!r} from {path!r}, not a "
                          "step (a non-negative integer)")
    return int(found)


def checkpoint_steps(decl: Mapping[str, Any], *, where: str) -> dict[int, str]:
    """``{step: checkpoint path}`` of a sweep's declaration, by step; two checkpoints of one step refused."""
    step_from = decl.get("step_from")
    if step_from is not None and not isinstance(step_from, str):
        raise ConfigError(f"{where}.step_from: a regular expression or 'metadata', got {step_from!r}")
    steps: dict[int, str] = {}
    for path in checkpoint_paths(decl.get("checkpoints"), where=f"{where}.checkpoints"):
        step = checkpoint_step(path, step_from, where=f"{where}.checkpoints")
        if step in steps:
            raise ConfigError(f"{where}.checkpoints: {steps[step]!r} and {path!r} are both step {step} (step_from "
                              f"{step_from or 'the last integer in the path'}); one checkpoint per step")
        steps[step] = path
    return dict(sorted(steps.items()))


# -- one candidate per checkpoint

def _weights_value(kind: str, path: str) -> tuple[str, str]:
    if kind == "open_clip" and Path(path).is_dir():
        return "model", f"local-dir:{path}"
    return WEIGHTS_KEY[kind], path


def sweep_candidates(name: str, decl: Mapping[str, Any], *, where: str) -> dict[str, dict[str, Any]]:
    """``{NAME@STEP: the single-checkpoint declaration}`` of one sweep (``NAME: decl`` with ``checkpoints``)."""
    kind = decl.get("type")
    key = f"{where}.checkpoints"
    if kind not in WEIGHTS_KEY:
        raise ConfigError(f"{key}: a checkpoint sweep takes an extractor of a family that loads local weights "
                          f"({', '.join(WEIGHTS_KEY)}), not type {kind!r}")
    for taken in _TAKEN[kind]:
        if decl.get(taken) not in (None, False) and not (kind == "open_clip" and taken == "model"):
            raise ConfigError(f"{where}.{taken}: {decl[taken]!r} beside checkpoints; each checkpoint becomes the "
                              f"candidate's {WEIGHTS_KEY[kind]}, so leave {taken} out")
    steps = checkpoint_steps(decl, where=where)
    rest = {k: v for k, v in decl.items() if k not in SWEEP_KEYS and k not in _TAKEN[kind]}
    if kind == "torch":
        check_torch_fit(rest, steps, where=key)
    elif kind != "timm":  # timm checks each checkpoint against its architecture when the candidate is built
        check_same_tensors(steps, where=key)
    out = {}
    for step, path in steps.items():
        weights_key, value = _weights_value(kind, path)
        out[f"{name}@{step}"] = {**rest, weights_key: value}
    return out


def expand_checkpoint_sweeps(extractors: Mapping[str, Any], *, where: str) -> dict[str, Any]:
    """The candidates of an ``extractors`` mapping with every checkpoint sweep expanded (module docstring), in
    declaration order; a sweep's candidate whose name is also declared is refused naming both."""
    out: dict[str, Any] = {}
    for name, decl in extractors.items():
        if not isinstance(decl, Mapping) or ("checkpoints" not in decl and "step_from" not in decl):
            if name in out:
                raise ConfigError(f"{where}.{name}: a checkpoint sweep already makes a candidate of this name; rename one")
            out[name] = decl
            continue
        if "checkpoints" not in decl:
            raise ConfigError(f"{where}.{name}.step_from: reads the steps of checkpoints, but no checkpoints are declared")
        for candidate, single in sweep_candidates(str(name), decl, where=f"{where}.{name}").items():
            if candidate in extractors or candidate in out:
                raise ConfigError(f"{where}.{name}.checkpoints: the sweep's candidate {candidate!r} is also declared; "
                                  "rename one")
            out[candidate] = single
    return out


# -- does a checkpoint fit the module (torch)

def tensor_shapes(path: Path, where: str) -> dict[str, tuple[int, ...]]:
    """``{tensor name: shape}`` of a weights file: a ``.safetensors`` header, or a torch file loaded with
    ``weights_only=True`` (memory-mapped); a file that is not a state dict is refused naming it."""
    import pickle

    try:
        if path.suffix == ".safetensors":
            from safetensors import SafetensorError, safe_open

            try:
                with safe_open(str(path), framework="numpy") as handle:
                    return {k: tuple(handle.get_slice(k).get_shape()) for k in handle.keys()}
            except SafetensorError as exc:
                raise ValueError(str(exc)) from None
        import torch

        try:
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError:  # a file of the legacy (non-zip) format cannot be memory-mapped
            state = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, OSError, EOFError, ValueError, pickle.UnpicklingError) as exc:
        raise ConfigError(f"{where}: {path} is not a readable weights file (truncated, corrupt, or more than tensors?): "
                          f"{exc}") from None
    if not isinstance(state, Mapping) or not all(hasattr(v, "shape") for v in state.values()):
        raise ConfigError(f"{where}: {path} is not a state dict (a mapping of tensor names to tensors)")
    return {str(k): tuple(v.shape) for k, v in state.items()}


def misfit(model: Mapping[str, tuple[int, ...]], file: Mapping[str, tuple[int, ...]], holder: str = "module"
           ) -> str | None:
    """What keeps a state dict (tensor name -> shape) from loading strictly into a ``holder`` of ``model``'s tensors
    (None: it fits), in words."""
    missing, unexpected = sorted(set(model) - set(file)), sorted(set(file) - set(model))
    wrong = sorted(k for k in set(model) & set(file) if tuple(model[k]) != tuple(file[k]))
    parts = []
    if missing:
        parts.append(f"{len(missing)} tensor(s) missing (first: {missing[0]})")
    if unexpected:
        parts.append(f"{len(unexpected)} unexpected (first: {unexpected[0]})")
    if wrong:
        parts.append(f"{len(wrong)} of another shape (first: {wrong[0]}: {list(file[wrong[0]])} in the file, "
                     f"{list(model[wrong[0]])} in the {holder})")
    return "; ".join(parts) or None


def _module_shapes(factory: str, params: Mapping[str, Any], where: str) -> dict[str, tuple[int, ...]]:
    import torch

    from vertebrae.core.callables import import_object

    build = import_object(factory, where=f"{where.rsplit('.', 1)[0]}.factory")
    try:
        with torch.device("meta"):
            module = build(**params)
    except (RuntimeError, NotImplementedError):  # a factory that cannot build on the meta device: on the CPU
        module = build(**params)
    except TypeError as exc:
        raise ConfigError(f"{where.rsplit('.', 1)[0]}.params: {exc}") from None
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}


def check_torch_fit(decl: Mapping[str, Any], steps: Mapping[int, str], *, where: str) -> None:
    """Every checkpoint's tensors have the names and shapes of the module ``decl``'s factory builds; ConfigError
    naming the key, the file and the first misfit. Remembered per declaration and file content
    (``vertebrae.core.check_records``) inside the workflow's planning."""
    from vertebrae.extractors.torch_runtime import file_sha256

    factory, params = decl.get("factory"), decl.get("params") or {}
    if not isinstance(factory, str) or not isinstance(params, Mapping):
        return  # the adapter refuses these when the candidate is built, naming the key
    files = {path: file_sha256(path) for path in steps.values() if Path(path).is_file()}
    for path in steps.values():
        if path not in files:
            raise ConfigError(f"{where}: {path!r} is a folder; a torch checkpoint is a state-dict file")
    declared = {"factory": factory, "params": json.loads(canonical_json(params)), "files": sorted(files.values())}
    packages = ("torch", "safetensors")
    if check_records.recalled(_FIT_CHECK, declared, packages) is True:
        return
    model = _module_shapes(factory, params, where)
    for path in files:
        problem = misfit(model, tensor_shapes(Path(path), where))
        if problem:
            raise ConfigError(f"{where}: {path} does not fit the module {factory} builds: {problem}")
    check_records.remember(_FIT_CHECK, declared, packages, True)


def _safetensors_files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*.safetensors") if not any(x.startswith(".") for x in p.parts))
    return [path] if path.suffix == ".safetensors" else []


def check_same_tensors(steps: Mapping[int, str], *, where: str) -> None:
    """The checkpoints of a sweep whose family builds the model from each checkpoint's own files (hf_*,
    sentence_transformers, open_clip) hold the same tensors, by name and shape, in their ``.safetensors`` files (read
    from the headers only): one of another architecture is refused naming it and the first checkpoint. Checkpoints
    without safetensors files are left to the family's loader."""
    first: tuple[str, dict[str, tuple[int, ...]]] | None = None
    for path in steps.values():
        files = _safetensors_files(Path(path))
        if not files:
            continue
        shapes: dict[str, tuple[int, ...]] = {}
        for file in files:
            shapes.update({f"{file.relative_to(path).as_posix() + ':' if Path(path).is_dir() else ''}{k}": v
                           for k, v in tensor_shapes(file, where).items()})
        if first is None:
            first = (path, shapes)
            continue
        problem = misfit(first[1], shapes)
        if problem:
            raise ConfigError(f"{where}: {path} does not fit the sweep's first checkpoint {first[0]}: "
                              f"{problem.replace('in the module', 'in ' + first[0])}")


# -- the step series among a benchmark's candidates

_TRAILING = re.compile(r"^(.*?)((?:@\d+)+)$")


def _parts(name: str, decl: Mapping[str, Any]) -> tuple[str, int, int | None] | None:
    """(base, step, layer) of a checkpoint candidate's name, else None."""
    match = _TRAILING.match(name)
    if match is None or not isinstance(decl, Mapping) or decl.get("type") not in WEIGHTS_KEY:
        return None
    head, numbers = match.group(1), [int(n) for n in match.group(2).split("@")[1:]]
    layer = decl.get("hidden_layer")
    if isinstance(layer, int) and not isinstance(layer, bool) and len(numbers) >= 2 and numbers[-1] == layer:
        numbers.pop()
    else:
        layer = None
    kind = decl["type"]
    weights = decl.get("model") if kind == "open_clip" and str(decl.get("model", "")).startswith("local-dir:") \
        else decl.get(WEIGHTS_KEY[kind])
    if not isinstance(weights, str) or not head:
        return None
    base = head + "".join(f"@{n}" for n in numbers[:-1])
    return base, numbers[-1], layer


def checkpoint_series(extractors: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The step series among a benchmark's (expanded) candidates: ``[{"sweep": BASE, "layer": LAYER | None,
    "points": [{"step": STEP, "candidate": NAME}, ...]}]``, points by step, a series of two or more candidates whose
    declarations differ only in their weights (module docstring)."""
    groups: dict[str, dict[str, Any]] = {}
    for name, decl in extractors.items():
        parts = _parts(str(name), decl)
        if parts is None:
            continue
        base, step, layer = parts
        kind = decl["type"]
        model = {k: v for k, v in decl.items() if k not in (WEIGHTS_KEY[kind], "model" if kind == "open_clip" else "")}
        key = canonical_json({"base": base, "layer": layer, "decl": model})
        group = groups.setdefault(key, {"sweep": base, "layer": layer, "points": []})
        if any(p["step"] == step for p in group["points"]):
            continue  # two candidates of one step: not a series point each
        group["points"].append({"step": step, "candidate": str(name)})
    series = []
    for group in groups.values():
        if len(group["points"]) >= 2:
            group["points"].sort(key=lambda p: p["step"])
            series.append(group)
    return series


# -- the Python face

class CheckpointSweep:
    """One candidate per checkpoint, as the config's ``checkpoints:`` declares them (module docstring).

    ``CheckpointSweep("net", {"type": "torch", "factory": "pkg:build"}, "ckpts/step_*.safetensors")`` checks and
    expands the sweep now (the same refusals as the config's); ``candidates`` are the single-checkpoint
    declarations by name (``net@STEP``, or ``net@STEP@LAYER`` with ``hidden_layers``), ``steps`` each candidate's
    step, ``extractors()`` builds them (iterate the sweep for the same), so ``Benchmark(dataset, [*sweep])`` scores
    every checkpoint; ``definitions()`` are its step series, whose numbers ``vertebrae.reports.steps.step_series``
    reads from the benchmark's result.
    """

    def __init__(self, name: str, extractor: Mapping[str, Any], checkpoints: str | Sequence[str], *,
                 step_from: str | None = None) -> None:
        from vertebrae.extractors.registry import expand_layer_sweeps

        if not isinstance(extractor, Mapping):
            raise ConfigError(f"checkpoint sweep {name!r}: extractor must be a declaration (a mapping with a type), "
                              f"got {type(extractor).__name__}")
        decl = {**extractor, "checkpoints": checkpoints if isinstance(checkpoints, str) else list(checkpoints)}
        if step_from is not None:
            decl["step_from"] = step_from
        self.name = name
        where = f"checkpoint sweep {name!r}"
        self.candidates: dict[str, dict[str, Any]] = expand_layer_sweeps(
            expand_checkpoint_sweeps({name: decl}, where=where), where=where)
        self._series = checkpoint_series(self.candidates)
        self.steps = {p["candidate"]: p["step"] for s in self._series for p in s["points"]}

    def extractors(self) -> list[Any]:
        """The candidates built as extractors, in step order (layers of one step together)."""
        from vertebrae.extractors.registry import build_extractor

        return [build_extractor(n, d, where=f"checkpoint sweep {self.name!r}.{n}") for n, d in self.candidates.items()]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.extractors())

    def definitions(self) -> list[dict[str, Any]]:
        """The step series (``checkpoint_series``) of this sweep's candidates; ``vertebrae.reports.steps.step_series``
        reads their scores and intervals from a result, ``step_figure`` draws them."""
        return json.loads(json.dumps(self._series))


__all__ = ["CheckpointSweep", "SWEEP_KEYS", "WEIGHTS_KEY", "checkpoint_paths", "checkpoint_series", "checkpoint_step",
           "checkpoint_steps", "check_same_tensors", "check_torch_fit", "expand_checkpoint_sweeps", "misfit",
           "sweep_candidates", "tensor_shapes"]
