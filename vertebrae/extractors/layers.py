"""One layer numbering for every adapter that takes ``hidden_layer`` / ``hidden_layers`` (timm, hf_vision, hf_text).

A model of L blocks (transformer blocks; for a timm CNN, the entries of its ``feature_info``) has the layers -L..L:

- ``0``: the embeddings, the input of block 1 (patch or token embeddings, with the position embeddings and any
  pre-norm the model applies before its first block);
- ``i`` (1..L): the output of block i, as the block gives it (before any final norm);
- ``-1``: the model's own final features, what its forward gives after the last block (after the final norm where
  the model has one): timm's ``forward_features``, transformers' ``last_hidden_state``; the very features the
  extractor pools without a ``hidden_layer``;
- ``-i`` (2..L): block L + 1 - i, counting blocks from the end as Python does (-2 = block L - 1, -L = block 1).

"Layer 4" is so the output of the fourth block in every family, and ``hidden_layers: [4, 8, 12]`` on a 12-block
model asks for the same blocks whichever adapter runs it. The recipe of an extractor with a hidden layer records
``NUMBERING``, so its fingerprint says which numbering its layer counts in (v1 was each family's own: timm's
0-based block index, transformers' ``hidden_states`` index, -1 before the final norm).
"""

from __future__ import annotations

from collections.abc import Sequence

from vertebrae.core.errors import ConfigError

#: The numbering a recipe's ``hidden_layer`` counts in (recorded as ``layer_numbering`` beside it)
NUMBERING = "vertebrae.layers/v2"


def valid_range(blocks: int) -> str:
    """The layers of a model of ``blocks`` blocks, in words (for error messages)."""
    return (f"-{blocks}..{blocks}: 0 = the embeddings, 1..{blocks} = the output of block i, -1 = the final "
            f"features (after the final norm), -2..-{blocks} = blocks counted from the end")


def check_layer_range(layers: Sequence[int], blocks: int, *, where: str, model: str) -> None:
    """Refuse a layer outside -blocks..blocks, naming the key (``where``), the model, its block count and the range."""
    for layer in layers:
        if not -blocks <= layer <= blocks:
            raise ConfigError(f"{where}: {layer} is beyond the depth of {model} ({blocks} blocks; valid layers "
                              f"{valid_range(blocks)})")


def hidden_state_index(layer: int, blocks: int) -> int | None:
    """The hidden state ``layer`` names, 0 (the embeddings) .. ``blocks`` (the output of the last block); None for -1,
    the model's final features."""
    if layer == -1:
        return None
    return layer + blocks + 1 if layer < 0 else layer


__all__ = ["NUMBERING", "check_layer_range", "hidden_state_index", "valid_range"]
