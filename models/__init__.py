"""Deterministic, seeded ONNX models for testing and benchmarking hexfuse-onnx.

`BUILDERS` maps each zoo model's name to its `build(seed=0)`; every module in
`models/zoo/` documents what the model contains and which discoveries it should give.
`models.synthetic.build_synthetic(n_nodes, seed)` makes large models for scale tests.

    python -m models list
    python -m models build --all -o out/
"""

from __future__ import annotations

from collections.abc import Callable

import onnx

from models.synthetic import build_synthetic
from models.zoo import (
    convnet_heads,
    gpt_decode_step,
    gpt_decode_step_contrib,
    inception,
    mha_encoder,
    mlp_chain,
    sequential_chain,
    two_branch,
)

_MODULES = (
    two_branch,
    inception,
    mha_encoder,
    mlp_chain,
    gpt_decode_step,
    gpt_decode_step_contrib,
    convnet_heads,
    sequential_chain,
)

BUILDERS: dict[str, Callable[..., onnx.ModelProto]] = {m.__name__.rsplit(".", 1)[1]: m.build for m in _MODULES}

DESCRIPTIONS: dict[str, str] = {m.__name__.rsplit(".", 1)[1]: (m.__doc__ or "").strip() for m in _MODULES}


def build(name: str, seed: int = 0) -> onnx.ModelProto:
    """Builds the zoo model `name` with `seed`."""
    try:
        builder = BUILDERS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(BUILDERS)}") from None
    return builder(seed=seed)


__all__ = ["BUILDERS", "DESCRIPTIONS", "build", "build_synthetic"]
