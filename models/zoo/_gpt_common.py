"""Sizes and weights shared by gpt_decode_step and gpt_decode_step_contrib.

Both models draw the same weights in the same order from the seed, so for one seed they
compute the same function (the tests check that the contrib-op model matches).
"""

from __future__ import annotations

import math

import numpy as np

from models.graph_builder import GraphBuilder

D_MODEL, HEADS = 128, 4
HEAD_DIM = D_MODEL // HEADS
PREFILL_SEQ = 16  # the prefill request: batch 1, 16 prompt tokens
DECODE_BATCH, PAST_SEQ = 4, 32  # the decode batch: 4 requests, one new token each, 32 cached
SCALE = 1.0 / math.sqrt(HEAD_DIM)
MASK_VALUE = -1e4


def draw(g: GraphBuilder) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Draws the shared weights and biases (in a fixed order) without adding them."""
    rng = g.rng
    weights, biases = {}, {}
    for which in ("q", "k", "v", "out"):
        weights[which] = (rng.standard_normal((D_MODEL, D_MODEL)) / math.sqrt(D_MODEL)).astype(np.float32)
        biases[which] = (rng.standard_normal(D_MODEL) * 0.02).astype(np.float32)
    return weights, biases


def causal_mask(seq: int) -> np.ndarray:
    """[1,1,seq,seq] additive mask: 0 on and below the diagonal, MASK_VALUE above."""
    return np.triu(np.full((seq, seq), MASK_VALUE, dtype=np.float32), k=1)[None, None]
