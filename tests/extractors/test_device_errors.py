"""A device the machine lacks (``device: cuda`` without a GPU, ``cuda:N`` past the last GPU, ``mps`` off a Mac) is
a vertebrae ConfigError naming the extractor and its ``device`` key, raised before any weights load, in every model
adapter (they all resolve their device through ``torch_runtime``) and through the CLI's one-line error; never a raw
torch traceback from deep inside a forward pass."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_models import make_mlp

from vertebrae.cli import main
from vertebrae.core.errors import ConfigError, VertebraeError
from vertebrae.core.inputs import RawInputs
from vertebrae.extractors.registry import build_extractor
from vertebrae.extractors.torch_module import TorchExtractor
from vertebrae.extractors.torch_runtime import resolve_device
from vertebrae.stages.common import embed_endpoint

WHERE = "benchmarks.topics.extractors.minilm"


@pytest.fixture
def no_gpu(monkeypatch):
    """This machine as one without a CUDA GPU (whatever torch build or hardware runs the test)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    if torch.version.cuda is None:
        monkeypatch.setattr(torch.version, "cuda", "12.0")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_cuda_on_this_machine_without_a_gpu_names_extractor_and_device():
    """No monkeypatching: the real torch of this GPU-less machine, a live module declared on cuda."""
    extractor = TorchExtractor("mlp", make_mlp(), cache_identity="mlp-v1", device="cuda")
    X = np.random.default_rng(0).normal(size=(5, 8))
    with pytest.raises(ConfigError) as caught:
        embed_endpoint(extractor, X, tuple(range(5)), shards=1, batch_size=4, endpoint="samples")
    message = str(caught.value)
    assert "extractor 'mlp'" in message and "device is 'cuda'" in message, message
    assert "'auto'" in message and "'cpu'" in message  # how to fix it
    assert next(extractor.module.parameters()).device.type == "cpu"  # nothing was moved


def test_config_declared_text_model_names_its_config_key_before_loading_weights(no_gpu, minilm_path, monkeypatch):
    import transformers

    extractor = build_extractor("minilm", {"type": "hf_text", "model": str(minilm_path), "device": "cuda"}, where=WHERE)

    def load(*args, **kwargs):
        raise AssertionError("weights were loaded before the device was checked")

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", load)
    with pytest.raises(ConfigError, match=rf"extractor 'minilm': {WHERE}\.device is 'cuda', but torch finds no CUDA"):
        extractor.transform(RawInputs.texts(["a sentence"]))


def test_gpu_index_past_the_last_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.version, "cuda", torch.version.cuda or "12.0")
    with pytest.raises(ConfigError, match=r"extractor 'big': x\.device is 'cuda:2', but torch sees 2 CUDA GPU\(s\)"):
        resolve_device("cuda:2", extractor="big", where="x")
    assert resolve_device("cuda:1", extractor="big", where="x") == torch.device("cuda:1")


def test_torch_without_cuda_support(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(ConfigError, match=r"this torch build .* has no CUDA support"):
        resolve_device("cuda", extractor="e", where="b.e")


def test_mps_off_a_mac(monkeypatch):
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=r"extractor 'e': b\.e\.device is 'mps', but Apple's MPS backend"):
        resolve_device("mps", extractor="e", where="b.e")


def test_auto_and_cpu_always_resolve(no_gpu):
    assert resolve_device("auto").type in ("cpu", "mps")
    assert resolve_device("cpu", extractor="e").type == "cpu"


def test_the_cli_prints_one_line_not_a_traceback(no_gpu, monkeypatch, capsys):
    """A job that hits the missing GPU exits 2 with ``vertebrae: error: ...`` (the CLI's handling of every
    VertebraeError), shown here with the embed job's function replaced by one that embeds on cuda."""
    from vertebrae.stages import jobs

    def embed(**kwargs):
        TorchExtractor("mlp", make_mlp(), cache_identity="mlp-v1", device="cuda").transform(np.zeros((2, 8)))

    monkeypatch.setattr(jobs, "run_embed_shard", embed)
    assert issubclass(ConfigError, VertebraeError)
    assert main(["embed-shard", "--plan-json", "spec.json", "--shard-index", "0", "--output", "out.h5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vertebrae: error: extractor 'mlp': device is 'cuda'") and "Traceback" not in err
