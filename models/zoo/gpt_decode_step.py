"""gpt_decode_step: one GPT attention layer serving a prefill request and a decode batch.

Two requests in one graph, with no data path between them (they only share the attention
weights, as initializers). Each request has its own attention block in exported-op form:

prefill (prefill_hidden [1,16,128]):
    q/k/v_proj (MatMul+Add) -> Reshape [1,16,4,32] -> Transpose (0,2,1,3)
    K^T (Transpose 0,1,3,2); scores MatMul -> scale Mul -> causal mask Add (-1e4 above the
    diagonal) -> Softmax -> MatMul V -> Transpose -> Reshape [1,16,128] -> out_proj (MatMul+Add)
    outputs prefill_out [1,16,128], prefill_present_key/value [1,4,16,32]
decode (decode_hidden [4,1,128], past_key/past_value [4,4,32,32]):
    q/k/v_proj -> Reshape [4,1,4,32] -> Transpose; Concat(past, new) on axis 2 -> present
    K^T; scores MatMul [4,4,1,33] -> scale -> Softmax -> MatMul V -> Transpose -> Reshape
    -> out_proj; outputs decode_out [4,1,128], present_key/present_value [4,4,33,32]

Node names are `prefill/...` and `decode/...`; shared weights are `attn/...`.

Expected discoveries:
- prefill_decode: exactly one pair, the prefill attention (matrix-heavy: 16-token GEMMs)
  with the decode attention (memory/vector-heavy: GEMVs over the 33-entry KV cache).
- branches: within each request Q/K/V projections are independent branches forking at the
  hidden input (Q-vs-K joins at the scores MatMul; V joins at the context MatMul). The two
  requests are disconnected components (no common fork), not a fork/join pair.
- microbatch: the decode attention is separable along its batch axis (4 requests).
"""

from __future__ import annotations

import onnx

from models.graph_builder import GraphBuilder
from models.zoo import _gpt_common as c


def _attention(
    g: GraphBuilder,
    req: str,
    hidden: str,
    batch: int,
    seq: int,
    weights: dict[str, str],
    biases: dict[str, str],
    past: tuple[str, str] | None,
    mask: str | None,
    out_name: str,
    present_names: tuple[str, str],
) -> None:
    split = g.ints(f"{req}/split_heads_shape", [batch, seq, c.HEADS, c.HEAD_DIM])
    merge = g.ints(f"{req}/merge_heads_shape", [batch, seq, c.D_MODEL])
    # Without a past, the new K/V heads are the present K/V outputs themselves.
    head_outputs = {"k": [present_names[0]], "v": [present_names[1]]} if past is None else {}
    heads = {}
    for which in ("q", "k", "v"):
        t = g.op("MatMul", [hidden, weights[which]], f"{req}/{which}_proj/matmul")
        t = g.op("Add", [t, biases[which]], f"{req}/{which}_proj/add")
        t = g.op("Reshape", [t, split], f"{req}/{which}/reshape")
        heads[which] = g.op(
            "Transpose", [t], f"{req}/{which}/transpose", perm=[0, 2, 1, 3], outputs=head_outputs.get(which, 1)
        )
    k, v = heads["k"], heads["v"]
    if past is not None:
        k = g.op("Concat", [past[0], k], f"{req}/present_key/concat", outputs=[present_names[0]], axis=2)
        v = g.op("Concat", [past[1], v], f"{req}/present_value/concat", outputs=[present_names[1]], axis=2)
    kt = g.op("Transpose", [k], f"{req}/k/transpose_t", perm=[0, 1, 3, 2])
    s = g.op("MatMul", [heads["q"], kt], f"{req}/scores/matmul")
    s = g.op("Mul", [s, "attn/scale"], f"{req}/scale")
    if mask is not None:
        s = g.op("Add", [s, mask], f"{req}/causal_mask/add")
    p = g.op("Softmax", [s], f"{req}/softmax", axis=-1)
    o = g.op("MatMul", [p, v], f"{req}/context/matmul")
    o = g.op("Transpose", [o], f"{req}/context/transpose", perm=[0, 2, 1, 3])
    o = g.op("Reshape", [o, merge], f"{req}/context/reshape")
    o = g.op("MatMul", [o, weights["out"]], f"{req}/out_proj/matmul")
    g.op("Add", [o, biases["out"]], f"{req}/out_proj/add", outputs=[out_name])


def build(seed: int = 0) -> onnx.ModelProto:
    g = GraphBuilder("gpt_decode_step", seed, doc=__doc__.splitlines()[0])
    P, B, T = c.PREFILL_SEQ, c.DECODE_BATCH, c.PAST_SEQ
    prefill_hidden = g.input("prefill_hidden", [1, P, c.D_MODEL])
    decode_hidden = g.input("decode_hidden", [B, 1, c.D_MODEL])
    past_key = g.input("past_key", [B, c.HEADS, T, c.HEAD_DIM])
    past_value = g.input("past_value", [B, c.HEADS, T, c.HEAD_DIM])

    w_arrays, b_arrays = c.draw(g)
    weights = {k: g.const(f"attn/{k}_proj/weight", a) for k, a in w_arrays.items()}
    biases = {k: g.const(f"attn/{k}_proj/bias", a) for k, a in b_arrays.items()}
    g.scalar("attn/scale", c.SCALE)
    mask = g.const("prefill/causal_mask", c.causal_mask(P))

    _attention(
        g,
        "prefill",
        prefill_hidden,
        1,
        P,
        weights,
        biases,
        None,
        mask,
        "prefill_out",
        ("prefill_present_key", "prefill_present_value"),
    )
    _attention(
        g,
        "decode",
        decode_hidden,
        B,
        1,
        weights,
        biases,
        (past_key, past_value),
        None,
        "decode_out",
        ("present_key", "present_value"),
    )

    g.output("prefill_out", [1, P, c.D_MODEL])
    g.output("decode_out", [B, 1, c.D_MODEL])
    g.output("present_key", [B, c.HEADS, T + 1, c.HEAD_DIM])
    g.output("present_value", [B, c.HEADS, T + 1, c.HEAD_DIM])
    g.output("prefill_present_key", [1, c.HEADS, P, c.HEAD_DIM])
    g.output("prefill_present_value", [1, c.HEADS, P, c.HEAD_DIM])
    return g.model()
