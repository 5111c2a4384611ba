"""Decoders written with a fused attention op, from given weights (numpy, no torch).

Two graphs of the same network (embedding, per layer RMSNorm -> attention with rotary and grouped KV
heads -> residual -> RMSNorm -> SiLU-gated MLP -> residual, final RMSNorm, LM head):
- `gqa_contrib`: as onnxruntime-genai's builder writes it for CPU fp32: one packed QKV MatMul feeding
  com.microsoft.GroupQueryAttention (rotary inside, do_rotary=1), SkipSimplifiedLayerNormalization for
  the residual+norm pairs, seqlens_k / total_sequence_length computed from attention_mask; inputs
  input_ids, attention_mask, past_key_values.*; outputs logits, present.*.
- `attention23`: opset-23 ONNX ops only: RMSNormalization, RotaryEmbedding, Attention with
  q_num_heads/kv_num_heads, an additive causal+padding mask from position_ids and attention_mask.
and one of GPT-2 (`gpt2_mha_contrib`, com.microsoft.MultiHeadAttention).

`weights` uses Hugging Face LlamaForCausalLM / GPT2LMHeadModel state-dict names (models/export_decoders.py passes them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MS = "com.microsoft"
BATCH, SEQ, PAST, TOTAL = "batch_size", "sequence_length", "past_sequence_length", "total_sequence_length"


@dataclass(frozen=True)
class DecoderShape:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    vocab: int
    max_positions: int
    eps: float
    rope_theta: float = 0.0  # rotary models only

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


class _Graph:
    """Nodes and initializers collected while a graph is written, with fresh names."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def op(
        self,
        op_type: str,
        inputs: list[str],
        n_out: int = 1,
        domain: str = "",
        name: str = "",
        last_outputs: tuple[str, ...] = (),  # graph output names for the node's last outputs
        **attrs,
    ) -> list[str]:
        self._n += 1
        base = name or f"{op_type}_{self._n}"
        outs = [f"{base}/out{i}" for i in range(n_out - len(last_outputs))] + list(last_outputs)
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=base, domain=domain, **attrs))
        return outs


def rope_caches(shape: DecoderShape) -> tuple[np.ndarray, np.ndarray]:
    """cos/sin of position * inverse frequency, [max_positions, head_dim / 2], as Llama's default rotary."""
    inv_freq = 1.0 / (shape.rope_theta ** (np.arange(0, shape.head_dim, 2, dtype=np.float64) / shape.head_dim))
    angles = np.outer(np.arange(shape.max_positions, dtype=np.float64), inv_freq)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def _t(w: np.ndarray) -> np.ndarray:
    """A torch Linear weight [out, in] as a MatMul right operand [in, out]."""
    return np.ascontiguousarray(w.T).astype(np.float32)


def _io(shape: DecoderShape, with_positions: bool) -> tuple[list[onnx.ValueInfoProto], list[onnx.ValueInfoProto]]:
    kv = [BATCH, shape.kv_heads, PAST, shape.head_dim]
    present = [BATCH, shape.kv_heads, TOTAL, shape.head_dim]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [BATCH, SEQ])]
    inputs.append(helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [BATCH, TOTAL]))
    if with_positions:
        inputs.append(helper.make_tensor_value_info("position_ids", TensorProto.INT64, [BATCH, SEQ]))
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [BATCH, SEQ, shape.vocab])]
    for i in range(shape.layers):
        for kind in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past_key_values.{i}.{kind}", TensorProto.FLOAT, kv))
            outputs.append(helper.make_tensor_value_info(f"present.{i}.{kind}", TensorProto.FLOAT, present))
    return inputs, outputs


def _mlp(g: _Graph, x: str, w: dict[str, np.ndarray], p: str) -> str:
    gate = g.op("MatMul", [x, g.const(f"{p}.mlp.gate_proj.weight_T", _t(w[f"{p}.mlp.gate_proj.weight"]))])[0]
    up = g.op("MatMul", [x, g.const(f"{p}.mlp.up_proj.weight_T", _t(w[f"{p}.mlp.up_proj.weight"]))])[0]
    silu = g.op("Mul", [gate, g.op("Sigmoid", [gate])[0]])[0]
    act = g.op("Mul", [silu, up])[0]
    return g.op("MatMul", [act, g.const(f"{p}.mlp.down_proj.weight_T", _t(w[f"{p}.mlp.down_proj.weight"]))])[0]


def _model(g: _Graph, name: str, shape: DecoderShape, with_positions: bool, opsets: list) -> onnx.ModelProto:
    inputs, outputs = _io(shape, with_positions)
    graph = helper.make_graph(g.nodes, name, inputs, outputs, g.inits)
    model = helper.make_model(graph, opset_imports=opsets, producer_name="hexfuse-onnx models/attention_decoders.py")
    model.ir_version = 10
    return model


def gqa_contrib(w: dict[str, np.ndarray], shape: DecoderShape) -> onnx.ModelProto:
    g = _Graph()
    cos, sin = rope_caches(shape)
    g.const("cos_cache", cos)
    g.const("sin_cache", sin)
    mask_len = g.op("ReduceSum", ["attention_mask", g.const("axis1", np.array([1], np.int64))], keepdims=0)[0]
    seqlens_k = g.op(
        "Cast", [g.op("Sub", [mask_len, g.const("one_i64", np.array(1, np.int64))])[0]], to=TensorProto.INT32
    )
    total = g.op("Gather", [g.op("Shape", ["attention_mask"])[0], g.const("idx1", np.array(1, np.int64))], axis=0)
    total_len = g.op("Cast", total, to=TensorProto.INT32)[0]

    h = g.op("Gather", [g.const("model.embed_tokens.weight", w["model.embed_tokens.weight"]), "input_ids"])[0]
    residual, mlp_out = h, None
    for i in range(shape.layers):
        p = f"model.layers.{i}"
        ln1 = g.const(f"{p}.input_layernorm.weight", w[f"{p}.input_layernorm.weight"])
        if mlp_out is None:  # the first norm has no residual to add yet
            normed = _rms_decomposed(g, h, ln1, shape.eps)
        else:
            normed, _, _, residual = g.op(
                "SkipSimplifiedLayerNormalization", [mlp_out, residual, ln1], 4, MS, epsilon=shape.eps
            )
        qkv_w = np.concatenate([_t(w[f"{p}.self_attn.{x}_proj.weight"]) for x in "qkv"], axis=1)
        qkv = g.op("MatMul", [normed, g.const(f"{p}.self_attn.qkv_proj.weight_T", qkv_w)])[0]
        attn = g.op(
            "GroupQueryAttention",
            [
                qkv,
                "",
                "",
                f"past_key_values.{i}.key",
                f"past_key_values.{i}.value",
                seqlens_k[0],
                total_len,
                "cos_cache",
                "sin_cache",
            ],
            3,
            MS,
            name=f"{p}/GroupQueryAttention",
            last_outputs=(f"present.{i}.key", f"present.{i}.value"),
            num_heads=shape.heads,
            kv_num_heads=shape.kv_heads,
            do_rotary=1,
            rotary_interleaved=0,
            scale=float(shape.head_dim**-0.5),
        )
        o = g.op("MatMul", [attn[0], g.const(f"{p}.self_attn.o_proj.weight_T", _t(w[f"{p}.self_attn.o_proj.weight"]))])[
            0
        ]
        ln2 = g.const(f"{p}.post_attention_layernorm.weight", w[f"{p}.post_attention_layernorm.weight"])
        normed2, _, _, residual = g.op("SkipSimplifiedLayerNormalization", [o, residual, ln2], 4, MS, epsilon=shape.eps)
        mlp_out = _mlp(g, normed2, w, p)
    final = g.op(
        "SkipSimplifiedLayerNormalization",
        [mlp_out, residual, g.const("model.norm.weight", w["model.norm.weight"])],
        1,
        MS,
        epsilon=shape.eps,
    )[0]
    g.nodes.append(
        helper.make_node("MatMul", [final, g.const("lm_head.weight_T", _t(w["lm_head.weight"]))], ["logits"])
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)]
    return _model(g, "llama_gqa_contrib", shape, False, opsets)


def _rms_decomposed(g: _Graph, x: str, gamma: str, eps: float) -> str:
    """RMSNorm as the first layer's SimplifiedLayerNormalization computes it, in opset-21 ops."""
    sq = g.op("Pow", [x, g.const("two_f32", np.array(2.0, np.float32))])[0]
    mean = g.op("ReduceMean", [sq, g.const("axis_last", np.array([-1], np.int64))], keepdims=1)[0]
    std = g.op("Sqrt", [g.op("Add", [mean, g.const("eps_f32", np.array(eps, np.float32))])[0]])[0]
    return g.op("Mul", [g.op("Div", [x, std])[0], gamma])[0]


def _additive_mask(g: _Graph) -> str:
    """[batch, 1, seq, total] float: 0 where key j <= the query's position and attention_mask[j] = 1, else
    the float minimum (as Hugging Face's eager mask)."""
    total = g.op("Gather", [g.op("Shape", ["attention_mask"])[0], g.const("m_idx1", np.array(1, np.int64))], axis=0)[0]
    keys = g.op("Range", [g.const("m_zero", np.array(0, np.int64)), total, g.const("m_one", np.array(1, np.int64))])[0]
    query_pos = g.op("Unsqueeze", ["position_ids", g.const("m_axis2", np.array([2], np.int64))])[0]  # [B, S, 1]
    causal = g.op("LessOrEqual", [keys, query_pos])[0]  # [B, S, T]
    present = g.op(
        "Unsqueeze",
        [g.op("Cast", ["attention_mask"], to=TensorProto.BOOL)[0], g.const("m_axis1", np.array([1], np.int64))],
    )[0]
    allowed = g.op("And", [causal, present])[0]
    zero, low = np.array(0.0, np.float32), np.array(np.finfo(np.float32).min, np.float32)
    mask = g.op("Where", [allowed, g.const("m_0f", zero), g.const("m_min", low)])[0]
    return g.op("Unsqueeze", [mask, g.const("m_axis1b", np.array([1], np.int64))])[0]


def attention23(w: dict[str, np.ndarray], shape: DecoderShape) -> onnx.ModelProto:
    g = _Graph()
    cos, sin = rope_caches(shape)
    g.const("cos_cache", cos)
    g.const("sin_cache", sin)
    mask = _additive_mask(g)
    residual = g.op("Gather", [g.const("model.embed_tokens.weight", w["model.embed_tokens.weight"]), "input_ids"])[0]
    for i in range(shape.layers):
        p = f"model.layers.{i}"
        ln1 = g.const(f"{p}.input_layernorm.weight", w[f"{p}.input_layernorm.weight"])
        normed = g.op("RMSNormalization", [residual, ln1], axis=-1, epsilon=shape.eps)[0]
        qkv = {}
        for x in "qkv":
            name = f"{p}.self_attn.{x}_proj.weight"
            qkv[x] = g.op("MatMul", [normed, g.const(name + "_T", _t(w[name]))])[0]
        for x, heads in (("q", shape.heads), ("k", shape.kv_heads)):
            qkv[x] = g.op("RotaryEmbedding", [qkv[x], "cos_cache", "sin_cache", "position_ids"], num_heads=heads)[0]
        attn = g.op(
            "Attention",
            [qkv["q"], qkv["k"], qkv["v"], mask, f"past_key_values.{i}.key", f"past_key_values.{i}.value"],
            3,
            name=f"{p}/Attention",
            last_outputs=(f"present.{i}.key", f"present.{i}.value"),
            q_num_heads=shape.heads,
            kv_num_heads=shape.kv_heads,
            scale=float(shape.head_dim**-0.5),
        )
        o = g.op("MatMul", [attn[0], g.const(f"{p}.self_attn.o_proj.weight_T", _t(w[f"{p}.self_attn.o_proj.weight"]))])[
            0
        ]
        residual = g.op("Add", [residual, o])[0]
        ln2 = g.const(f"{p}.post_attention_layernorm.weight", w[f"{p}.post_attention_layernorm.weight"])
        normed2 = g.op("RMSNormalization", [residual, ln2], axis=-1, epsilon=shape.eps)[0]
        residual = g.op("Add", [residual, _mlp(g, normed2, w, p)])[0]
    final = g.op(
        "RMSNormalization", [residual, g.const("model.norm.weight", w["model.norm.weight"])], axis=-1, epsilon=shape.eps
    )[0]
    g.nodes.append(
        helper.make_node("MatMul", [final, g.const("lm_head.weight_T", _t(w["lm_head.weight"]))], ["logits"])
    )
    return _model(g, "llama_attention23", shape, True, [helper.make_opsetid("", 23)])


def gpt2_mha_contrib(w: dict[str, np.ndarray], shape: DecoderShape) -> onnx.ModelProto:
    """GPT-2 as onnxruntime's transformer optimizer lays it out when it fuses attention: the QKV
    MatMul Split into three, bias, causal masking (unidirectional=1), key padding mask and past all
    inside com.microsoft.MultiHeadAttention; SkipLayerNormalization and FastGelu around it."""
    g = _Graph()
    eps = shape.eps
    wte = w["transformer.wte.weight"]
    tokens = g.op("Gather", [g.const("transformer.wte.weight", wte), "input_ids"])[0]
    places = g.op("Gather", [g.const("transformer.wpe.weight", w["transformer.wpe.weight"]), "position_ids"])[0]
    residual = g.op("Add", [tokens, places])[0]
    key_mask = g.op("Cast", ["attention_mask"], to=TensorProto.INT32)[0]
    thirds = g.const("qkv_split", np.full(3, shape.hidden, np.int64))
    mlp_out = None
    for i in range(shape.layers):
        p = f"transformer.h.{i}"
        ln1 = [g.const(f"{p}.ln_1.{x}", w[f"{p}.ln_1.{x}"]) for x in ("weight", "bias")]
        if mlp_out is None:
            normed = g.op("LayerNormalization", [residual, *ln1], axis=-1, epsilon=eps)[0]
        else:
            normed, _, _, residual = g.op("SkipLayerNormalization", [mlp_out, residual, *ln1], 4, MS, epsilon=eps)
        qkv = g.op("MatMul", [normed, g.const(f"{p}.attn.c_attn.weight", w[f"{p}.attn.c_attn.weight"])])[0]
        q, k, v = g.op("Split", [qkv, thirds], 3, axis=-1)
        attn = g.op(
            "MultiHeadAttention",
            [
                q,
                k,
                v,
                g.const(f"{p}.attn.c_attn.bias", w[f"{p}.attn.c_attn.bias"]),
                key_mask,
                "",
                f"past_key_values.{i}.key",
                f"past_key_values.{i}.value",
            ],
            3,
            MS,
            name=f"{p}/MultiHeadAttention",
            last_outputs=(f"present.{i}.key", f"present.{i}.value"),
            num_heads=shape.heads,
            unidirectional=1,
        )[0]
        o = g.op("MatMul", [attn, g.const(f"{p}.attn.c_proj.weight", w[f"{p}.attn.c_proj.weight"])])[0]
        ln2 = [g.const(f"{p}.ln_2.{x}", w[f"{p}.ln_2.{x}"]) for x in ("weight", "bias")]
        bias = g.const(f"{p}.attn.c_proj.bias", w[f"{p}.attn.c_proj.bias"])
        normed2, _, _, residual = g.op("SkipLayerNormalization", [o, residual, *ln2, bias], 4, MS, epsilon=eps)
        fc = g.op("MatMul", [normed2, g.const(f"{p}.mlp.c_fc.weight", w[f"{p}.mlp.c_fc.weight"])])[0]
        act = g.op("FastGelu", [fc, g.const(f"{p}.mlp.c_fc.bias", w[f"{p}.mlp.c_fc.bias"])], 1, MS)[0]
        down = g.op("MatMul", [act, g.const(f"{p}.mlp.c_proj.weight", w[f"{p}.mlp.c_proj.weight"])])[0]
        mlp_out = g.op("Add", [down, g.const(f"{p}.mlp.c_proj.bias", w[f"{p}.mlp.c_proj.bias"])])[0]
    lnf = [g.const(f"transformer.ln_f.{x}", w[f"transformer.ln_f.{x}"]) for x in ("weight", "bias")]
    final = g.op("SkipLayerNormalization", [mlp_out, residual, *lnf], 1, MS, epsilon=eps)[0]
    g.nodes.append(helper.make_node("MatMul", [final, g.const("lm_head.weight_T", _t(wte))], ["logits"]))
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)]
    return _model(g, "gpt2_mha_contrib", shape, True, opsets)
