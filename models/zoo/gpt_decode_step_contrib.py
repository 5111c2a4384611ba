"""gpt_decode_step_contrib: gpt_decode_step with each attention as one com.microsoft MultiHeadAttention.

Same two requests, inputs, outputs and (for one seed) the same weights and results as
gpt_decode_step. Per request: q/k/v_proj MatMul (no Add: the three biases go to the MHA
node's fused `bias` input [384]) -> MultiHeadAttention (num_heads 4, scale 1/sqrt(32))
-> out_proj (MatMul+Add).

- prefill/mha: query/key/value [1,16,128], unidirectional=1 (causal); outputs the context
  and prefill_present_key/value [1,4,16,32].
- decode/mha: query/key/value [4,1,128], past_key/past_value [4,4,32,32] (inputs 6 and 7);
  outputs the context and present_key/present_value [4,4,33,32].

ORT CPUExecutionProvider runs both MultiHeadAttention forms (checked with ORT 1.32).

Expected discoveries:
- prefill_decode: exactly one pair, {prefill/*} with {decode/*}, found through the contrib
  attention ops (prefill: causal, no past; decode: one new token, past KV).
- branches: the Q/K/V projection MatMuls of each request fork at the hidden input and all
  join at the MHA node (three single-MatMul branches, all matrix).
- microbatch: the decode request is separable along its batch axis (4).
"""

from __future__ import annotations

import numpy as np
import onnx

from models.graph_builder import MS_DOMAIN, GraphBuilder
from models.zoo import _gpt_common as c


def _attention(
    g: GraphBuilder,
    req: str,
    hidden: str,
    weights: dict[str, str],
    qkv_bias: str,
    out_bias: str,
    past: tuple[str, str] | None,
    out_name: str,
    present_names: tuple[str, str],
) -> None:
    qkv = [g.op("MatMul", [hidden, weights[w]], f"{req}/{w}_proj/matmul") for w in ("q", "k", "v")]
    inputs = qkv + [qkv_bias]
    attrs = {"num_heads": c.HEADS, "scale": c.SCALE}
    if past is None:
        attrs["unidirectional"] = 1
    else:
        inputs += ["", "", past[0], past[1]]  # key_padding_mask, attention_bias unused
    ctx = g.op(
        "MultiHeadAttention",
        inputs,
        f"{req}/mha",
        domain=MS_DOMAIN,
        outputs=[f"{req}/mha_out", *present_names],
        **attrs,
    )[0]
    o = g.op("MatMul", [ctx, weights["out"]], f"{req}/out_proj/matmul")
    g.op("Add", [o, out_bias], f"{req}/out_proj/add", outputs=[out_name])


def build(seed: int = 0) -> onnx.ModelProto:
    g = GraphBuilder("gpt_decode_step_contrib", seed, doc=__doc__.splitlines()[0])
    P, B, T = c.PREFILL_SEQ, c.DECODE_BATCH, c.PAST_SEQ
    prefill_hidden = g.input("prefill_hidden", [1, P, c.D_MODEL])
    decode_hidden = g.input("decode_hidden", [B, 1, c.D_MODEL])
    past_key = g.input("past_key", [B, c.HEADS, T, c.HEAD_DIM])
    past_value = g.input("past_value", [B, c.HEADS, T, c.HEAD_DIM])

    w_arrays, b_arrays = c.draw(g)
    weights = {k: g.const(f"attn/{k}_proj/weight", a) for k, a in w_arrays.items()}
    qkv_bias = g.const("attn/qkv_bias", np.concatenate([b_arrays[k] for k in ("q", "k", "v")]))
    out_bias = g.const("attn/out_proj/bias", b_arrays["out"])

    _attention(
        g,
        "prefill",
        prefill_hidden,
        weights,
        qkv_bias,
        out_bias,
        None,
        "prefill_out",
        ("prefill_present_key", "prefill_present_value"),
    )
    _attention(
        g,
        "decode",
        decode_hidden,
        weights,
        qkv_bias,
        out_bias,
        (past_key, past_value),
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
