"""Fused attention ops and onnxruntime's norms (lowering/attention.py, lowering/normalize.py), each
lowered into a pair and run on the real dsp/ host kernel against ONNX Runtime's own kernel for the op,
on small random cases: com.microsoft MultiHeadAttention, GroupQueryAttention, RotaryEmbedding,
SkipLayerNormalization, SkipSimplifiedLayerNormalization; ONNX SimplifiedLayerNormalization (an
onnxruntime op), Attention and RotaryEmbedding of opset 23."""

from __future__ import annotations

import math
import struct

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_lower import _op_records, needs_host

from hexfuse_onnx import contract as C
from hexfuse_onnx import graph, verify
from hexfuse_onnx.fused_work import fused_work
from hexfuse_onnx.lowering import LoweringError, lower_pair
from hexfuse_onnx.lowering.abi import Engine, Opcode, Role, Task
from hexfuse_onnx.lowering.program import specialize, tensor_records
from hexfuse_onnx.runtime import HostKernel

MS = "com.microsoft"
TOL = 1e-4
LOWEST = np.finfo(np.float32).min  # ORT's mask_filter_value
_NP = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(bool): TensorProto.BOOL,
}


def fused_pair(
    node: onnx.NodeProto,
    feeds: dict[str, np.ndarray],
    outputs: dict[str, list[int]],
    inits: dict[str, np.ndarray] | None = None,
    opset: int = 21,
) -> onnx.ModelProto:
    """A FusedHexPair whose task A is a Relu over `ra` [2, 3] and task B the one `node`, reading
    `feeds` (graph inputs) and `inits`; the body's value_info gives the node's outputs (as the pass does)."""
    inits = inits or {}
    node.name = node.name or "fused"
    a = [helper.make_node("Relu", ["ra"], ["ya"], name="relu")]
    inputs_a = [helper.make_tensor_value_info("ra", TensorProto.FLOAT, [2, 3])]
    inputs_b = [helper.make_tensor_value_info(k, _NP[v.dtype], list(v.shape)) for k, v in {**feeds, **inits}.items()]
    inputs_b = [v for v in inputs_b if v.name in node.input]
    outs_b = [helper.make_tensor_value_info(k, TensorProto.FLOAT, d) for k, d in outputs.items()]
    formal = [v.name for v in inputs_a + inputs_b]
    names_out = ["ya", *outputs]
    opsets = [helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)]
    fn = helper.make_function(C.DOMAIN, C.OP_TYPE, formal, names_out, [*a, node], opsets, list(C.NODE_ATTRIBUTES))
    fn.overload = "pair0"
    fn.value_info.extend(outs_b)
    pair = helper.make_node(
        C.OP_TYPE,
        formal,
        names_out,
        name="hexfuse/pair0",
        domain=C.DOMAIN,
        num_inputs_a=1,
        num_outputs_a=1,
        num_nodes_a=1,
        share_a=0.5,
        kind="branches",
    )
    pair.overload = "pair0"
    graph_inputs = [v for v in inputs_a + inputs_b if v.name not in inits]
    initializers = [numpy_helper.from_array(v, k) for k, v in inits.items()]
    outs = [helper.make_tensor_value_info("ya", TensorProto.FLOAT, [2, 3]), *outs_b]
    graph = helper.make_graph([pair], "g", graph_inputs, outs, initializer=initializers)
    return helper.make_model(
        graph, opset_imports=[*opsets, helper.make_opsetid(C.DOMAIN, 1)], functions=[fn], ir_version=10
    )


def plain(m: onnx.ModelProto) -> onnx.ModelProto:
    """The pair's body as a plain graph (onnxruntime 1.32 crashes creating a session whose function
    body holds SimplifiedLayerNormalization; a plain graph runs every op by its own kernel)."""
    graph = onnx.GraphProto()
    graph.CopyFrom(m.graph)
    del graph.node[:]
    graph.node.extend(m.functions[0].node)
    opsets = [o for o in m.opset_import if o.domain != C.DOMAIN]
    return helper.make_model(graph, opset_imports=opsets, ir_version=m.ir_version)


def run_both(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """ORT's run of the body (the op's own kernel) and the host kernel's run of the lowered program."""
    feeds = {"ra": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), **feeds}
    ref = ort.InferenceSession(plain(m).SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    node = m.graph.node[0]
    got = HostKernel().run(lower_pair(m, node), [inits[n] if n in inits else feeds[n] for n in node.input])
    return ref, got


def assert_matches_ort(
    m: onnx.ModelProto, feeds: dict[str, np.ndarray], keep: dict[int, np.ndarray] | None = None
) -> None:
    """Every output within TOL of ORT's; `keep` {output index: boolean mask} compares part of one."""
    ref, got = run_both(m, feeds)
    assert len(ref) == len(got)
    for k, (r, g) in enumerate(zip(ref, got)):
        assert r.shape == g.shape, (k, r.shape, g.shape)
        sel = keep.get(k) if keep else None
        r, g = (r, g) if sel is None else (r[sel], g[sel])
        assert verify.relative_error(r, g) <= TOL, (k, float(np.abs(r - g).max()))


def rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


# ---- norms


def skip_norm_case(simplified: bool, bias: bool):
    rng = np.random.default_rng(0)
    feeds = {"x": rand(rng, 2, 3, 16), "skip": rand(rng, 2, 3, 16)}
    inits = {"gamma": rand(rng, 16)}
    inputs = ["x", "skip", "gamma"]
    if not simplified:
        inits["beta"] = rand(rng, 16)
        inputs.append("beta")
    if bias:
        inits["bias"] = rand(rng, 16)
        inputs.append("bias")
    op = "SkipSimplifiedLayerNormalization" if simplified else "SkipLayerNormalization"
    node = helper.make_node(op, inputs, ["y", "", "", "sum"], domain=MS, epsilon=1e-5)
    return fused_pair(node, feeds, {"y": [2, 3, 16], "sum": [2, 3, 16]}, inits), feeds


@needs_host
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("simplified", [False, True])
def test_skip_layer_norm_gives_the_norm_and_the_sum(bias, simplified):
    assert_matches_ort(*skip_norm_case(simplified, bias))


@needs_host
def test_simplified_layer_norm_is_rms_norm():
    rng = np.random.default_rng(1)
    feeds = {"x": rand(rng, 2, 5, 8)}
    node = helper.make_node("SimplifiedLayerNormalization", ["x", "scale"], ["y"], epsilon=1e-6, axis=-1)
    assert_matches_ort(fused_pair(node, feeds, {"y": [2, 5, 8]}, {"scale": rand(rng, 8)}), feeds)


def test_skip_layer_norm_statistics_outputs_are_refused():
    rng = np.random.default_rng(2)
    feeds = {"x": rand(rng, 1, 2, 8), "skip": rand(rng, 1, 2, 8)}
    node = helper.make_node("SkipLayerNormalization", ["x", "skip", "gamma"], ["y", "mean"], domain=MS)
    m = fused_pair(node, feeds, {"y": [1, 2, 8], "mean": [1, 2, 1]}, {"gamma": rand(rng, 8)})
    with pytest.raises(LoweringError, match="output 1 .mean/inv_std_var. is read"):
        lower_pair(m, m.graph.node[0])


# ---- MultiHeadAttention


def mha_case(rng, b=2, s=3, past=4, heads=2, h=8, mask=True, causal=1, attn_bias=False, bias=True):
    d, total = heads * h, past + s
    feeds = {"q": rand(rng, b, s, d), "k": rand(rng, b, s, d), "v": rand(rng, b, s, d)}
    inputs = ["q", "k", "v", "bias" if bias else "", "", "", "", ""]
    inits = {"bias": rand(rng, 3 * d)} if bias else {}
    if mask:
        m = np.ones((b, total), np.int32)
        m[0, 1] = 0  # a padded past position
        m[-1, -1] = 0 if b > 1 else 1
        feeds["mask"] = m
        inputs[4] = "mask"
    if attn_bias:
        feeds["ab"] = rand(rng, 1, heads, s, total)
        inputs[5] = "ab"
    outputs = {"y": [b, s, d], "present_k": [b, heads, total, h], "present_v": [b, heads, total, h]}
    if past:
        feeds["pk"], feeds["pv"] = rand(rng, b, heads, past, h), rand(rng, b, heads, past, h)
        inputs[6:8] = ["pk", "pv"]
    else:
        outputs = {"y": [b, s, d]}
    node = helper.make_node(
        "MultiHeadAttention", inputs, list(outputs), domain=MS, num_heads=heads, unidirectional=causal
    )
    return fused_pair(node, feeds, outputs, inits), feeds


@needs_host
@pytest.mark.parametrize(
    "case",
    [
        {},
        {"causal": 0},
        {"mask": False},
        {"attn_bias": True, "bias": False},
        {"past": 0, "s": 5},
        {"b": 1, "s": 1, "past": 9},
    ],
    ids=["causal+mask+past", "mask", "causal", "attention_bias", "no past", "decode"],
)
def test_multi_head_attention_matches_ort(case):
    m, feeds = mha_case(np.random.default_rng(3), **case)
    assert_matches_ort(m, feeds)


def test_multi_head_attention_packed_qkv_is_refused():
    rng = np.random.default_rng(4)
    feeds = {"qkv": rand(rng, 1, 3, 2, 3, 8)}
    node = helper.make_node("MultiHeadAttention", ["qkv"], ["y"], domain=MS, num_heads=2)
    m = fused_pair(node, feeds, {"y": [1, 3, 16]})
    with pytest.raises(LoweringError, match="packed QKV"):
        lower_pair(m, m.graph.node[0])


# ---- GroupQueryAttention


def gqa_case(
    rng, b, s, past, seqlens, rotary=1, interleaved=0, packed=True, heads=4, kv=2, h=16, positions=64, empty=False
):
    """`empty`: with past 0, past K/V given as tensors of length 0 (a prefill's empty cache)."""
    total = max(seqlens) + 1
    feeds: dict[str, np.ndarray] = {}
    if packed:
        feeds["qkv"] = rand(rng, b, s, (heads + 2 * kv) * h)
        inputs = ["qkv", "", ""]
    else:
        feeds |= {"q": rand(rng, b, s, heads * h), "k": rand(rng, b, s, kv * h), "v": rand(rng, b, s, kv * h)}
        inputs = ["q", "k", "v"]
    if past or empty:
        feeds["pk"], feeds["pv"] = rand(rng, b, kv, past, h), rand(rng, b, kv, past, h)
    inputs += ["pk" if past or empty else "", "pv" if past or empty else "", "seqlens", "total"]
    feeds["seqlens"] = np.array(seqlens, np.int32)
    inits = {"total": np.array(total, np.int32)}
    if rotary:
        angles = np.arange(positions)[:, None] * (10000.0 ** (-np.arange(h // 2) / (h // 2)))[None]
        inits |= {"cos": np.cos(angles).astype(np.float32), "sin": np.sin(angles).astype(np.float32)}
        inputs += ["cos", "sin"]
    length = max(past, total)
    outputs = {"y": [b, s, heads * h], "present_k": [b, kv, length, h], "present_v": [b, kv, length, h]}
    node = helper.make_node(
        "GroupQueryAttention",
        inputs,
        list(outputs),
        domain=MS,
        num_heads=heads,
        kv_num_heads=kv,
        do_rotary=rotary,
        rotary_interleaved=interleaved,
        scale=1.0 / math.sqrt(h),
    )
    return fused_pair(node, feeds, outputs, inits), feeds


def valid_cache(b: int, kv: int, length: int, h: int, seqlens: list[int]) -> np.ndarray:
    """The present rows onnxruntime writes: [0, seqlens_k[b] + 1) of each batch row."""
    keep = np.zeros((b, kv, length, h), bool)
    for i, n in enumerate(seqlens):
        keep[i, :, : n + 1] = True
    return keep


@needs_host
@pytest.mark.parametrize("interleaved", [0, 1])
def test_group_query_attention_chunk_after_a_past_matches_ort(interleaved):
    m, feeds = gqa_case(np.random.default_rng(5), b=1, s=3, past=5, seqlens=[7], interleaved=interleaved)
    assert_matches_ort(m, feeds)


@needs_host
@pytest.mark.parametrize("packed", [True, False])
def test_group_query_attention_decode_with_different_lengths_matches_ort(packed):
    """Two rows of one past buffer of 6: row 0 uses all 6, row 1 only 3 (its new key goes to slot 3)."""
    seqlens = [6, 3]
    m, feeds = gqa_case(np.random.default_rng(6), b=2, s=1, past=6, seqlens=seqlens, packed=packed)
    keep = valid_cache(2, 2, 7, 16, seqlens)
    assert_matches_ort(m, feeds, keep={2: keep, 3: keep})


@needs_host
def test_group_query_attention_first_prompt_with_padding_matches_ort():
    """A first prompt of 4 tokens, row 1 right-padded to 3 real ones: its real rows are compared."""
    seqlens = [3, 2]
    m, feeds = gqa_case(np.random.default_rng(7), b=2, s=4, past=0, seqlens=seqlens)
    rows = np.zeros((2, 4, 64), bool)
    rows[0], rows[1, :3] = True, True
    keep = valid_cache(2, 2, 4, 16, seqlens)
    assert_matches_ort(m, feeds, keep={1: rows, 2: keep, 3: keep})


def only_inputs_are_empty(program: bytes) -> bool:
    """Every empty tensor of the program is an input (its io slot): no op reads or writes one."""
    return all(role == Role.INPUT for role, _, dims in tensor_records(program) if 0 in dims)


@needs_host
def test_group_query_attention_prefill_with_an_empty_past_matches_ort():
    """A prefill of 4 tokens from an empty cache (past K/V [1, 2, 0, 16]): present is the new keys."""
    m, feeds = gqa_case(np.random.default_rng(8), b=1, s=4, past=0, seqlens=[3], empty=True)
    assert feeds["pk"].shape == (1, 2, 0, 16)
    assert_matches_ort(m, feeds)
    assert only_inputs_are_empty(lower_pair(m, m.graph.node[0]))


@needs_host
def test_a_concat_with_an_empty_past_matches_ort():
    """A torch export's present = Concat(past, new) on the sequence axis, past of length 0."""
    rng = np.random.default_rng(9)
    feeds = {"past": rand(rng, 1, 2, 0, 16), "new": rand(rng, 1, 2, 5, 16)}
    node = helper.make_node("Concat", ["past", "new"], ["present"], axis=2)
    m = fused_pair(node, feeds, {"present": [1, 2, 5, 16]})
    assert_matches_ort(m, feeds)
    assert only_inputs_are_empty(lower_pair(m, m.graph.node[0]))


@pytest.mark.parametrize(
    ("attribute", "value"),
    [
        ("local_window_size", 4),
        ("softcap", 30.0),
        ("smooth_softmax", 1),
        ("causal", 0),
        ("sliding_window_cache", 1),
        ("k_quant_type", "PER_TENSOR"),
    ],
)
def test_group_query_attention_other_attributes_are_refused_by_name(attribute, value):
    m, _ = gqa_case(np.random.default_rng(8), b=1, s=1, past=4, seqlens=[4])
    body = m.functions[0].node[1]
    body.attribute.append(helper.make_attribute(attribute, value))
    with pytest.raises(LoweringError, match=attribute):
        lower_pair(m, m.graph.node[0])


@needs_host
def test_group_query_attention_with_every_default_written_matches_ort():
    """onnxruntime's quantiser writes every attribute of the schema, smooth_softmax=-1 (its default,
    run as 0) among them: a QDQ decoder's GQA was refused for it."""
    m, feeds = gqa_case(np.random.default_rng(9), b=1, s=1, past=5, seqlens=[5])
    body = m.functions[0].node[1]
    for name, value in [("smooth_softmax", -1), ("causal", 1), ("sliding_window_cache", 0), ("k_quant_type", "NONE")]:
        body.attribute.append(helper.make_attribute(name, value))
    assert_matches_ort(m, feeds)


# ---- RotaryEmbedding


def rotary_case(domain: str, interleaved: int, four_d: bool = False, positions: int = 32):
    """3-D [B, S, N*H] with num_heads, or 4-D [B, N, S, H]; a cache of `positions` rows."""
    rng = np.random.default_rng(9)
    b, s, heads, h = 2, 3, 2, 8
    angles = np.arange(positions)[:, None] * (10000.0 ** (-np.arange(h // 2) / (h // 2)))[None]
    inits = {"cos": np.cos(angles).astype(np.float32), "sin": np.sin(angles).astype(np.float32)}
    shape = [b, heads, s, h] if four_d else [b, s, heads * h]
    last = positions - 1
    feeds = {"x": rand(rng, *shape), "pos": np.array([[4, 5, 6], [0, last - 1, last]], np.int64)}
    inputs = ["x", "pos", "cos", "sin"] if domain else ["x", "cos", "sin", "pos"]
    heads_attr = {} if four_d else {"num_heads": heads}
    node = helper.make_node("RotaryEmbedding", inputs, ["y"], domain=domain, interleaved=interleaved, **heads_attr)
    return fused_pair(node, feeds, {"y": shape}, inits, opset=23), feeds


@needs_host
@pytest.mark.parametrize("four_d", [False, True])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("domain", ["", MS])
def test_rotary_embedding_at_run_time_positions_matches_ort(domain, interleaved, four_d):
    assert_matches_ort(*rotary_case(domain, interleaved, four_d))


@needs_host
@pytest.mark.parametrize("domain", ["", MS])
def test_rotary_embedding_reads_a_long_cache_by_gathered_rows(domain):
    """A 131072-row cache (an LLM's 128k context) read at positions up to its last row: GATHER_ROWS
    picks the rows, no one-hot [positions x rows] GEMM."""
    m, feeds = rotary_case(domain, 0, positions=131072)
    assert_matches_ort(m, feeds)
    ops = {struct.unpack_from("<H", r, 0)[0] for r in _op_records(lower_pair(m, m.graph.node[0]))}
    assert Opcode.GATHER_ROWS in ops and Opcode.GEMM not in ops


@needs_host
def test_group_query_attention_rotary_rows_past_4096_positions_match_ort():
    """Decode at position 5000 of a 8192-row rotary cache (rows picked at float positions)."""
    m, feeds = gqa_case(np.random.default_rng(8), b=1, s=1, past=5001, seqlens=[5001], positions=8192)
    assert_matches_ort(m, feeds)


@needs_host
def test_rotary_embedding_without_positions_reads_per_token_caches():
    rng = np.random.default_rng(10)
    feeds = {"x": rand(rng, 1, 2, 3, 8), "cos": rand(rng, 1, 3, 4), "sin": rand(rng, 1, 3, 4)}
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin"], ["y"])
    assert_matches_ort(fused_pair(node, feeds, {"y": [1, 2, 3, 8]}, opset=23), feeds)


# ---- ONNX Attention (opset 23)


ATTENTION_23_CASES = {
    "gqa+mask+past": {"past": 4},
    "mha+mask+past": {"past": 4, "kv": 4},
    "causal": {"past": 0, "causal": 1},
    "4-D": {"past": 0, "four_d": True},
    "no mask": {"past": 2, "mask": False},
    # a prefill (past of length 0) whose batch row 0 pads its first token: query 0 sees no key
    "empty past+padded first": {"past": 0, "empty": True, "pad": LOWEST},
    "empty past+padded first, -inf": {"past": 0, "empty": True, "pad": -np.inf},
    "empty past+padded first+causal": {"past": 0, "empty": True, "pad": LOWEST, "causal": 1},
    "padded first, -1e30": {"past": 0, "pad": -1e30},  # not LOWEST: ORT gives the row the mean of V
}


def attention_23_case(case: dict):
    rng = np.random.default_rng(11)
    b, s, heads, h = 2, 3, 4, 8
    kv, past, causal = case.get("kv", 2), case["past"], case.get("causal", 0)
    total = past + s
    four_d = case.get("four_d", False)
    shape = (lambda n: [b, n, s, h]) if four_d else (lambda n: [b, s, n * h])
    feeds = {"q": rand(rng, *shape(heads)), "k": rand(rng, *shape(kv)), "v": rand(rng, *shape(kv))}
    inputs = ["q", "k", "v", "", "", ""]
    if "pad" in case:  # batch row 0 pads its first token (key 0); without is_causal the mask is causal too
        hidden = np.zeros((b, 1, s, total), bool) if causal else np.triu(np.ones((s, total), bool), 1)[None, None]
        hidden = hidden | (np.arange(b)[:, None, None, None] == 0) & (np.arange(total) == 0)
        feeds["mask"] = np.where(hidden, case["pad"], 0).astype(np.float32)
        inputs[3] = "mask"
    elif case.get("mask", True) and not causal:
        feeds["mask"] = np.where(rng.random((b, 1, s, total)) < 0.2, -np.inf, 0).astype(np.float32)
        feeds["mask"][..., 0] = 0
        inputs[3] = "mask"
    outputs = {"y": shape(heads)}
    if past or case.get("empty"):  # empty: past K/V of length 0, a prefill's
        feeds["pk"], feeds["pv"] = rand(rng, b, kv, past, h), rand(rng, b, kv, past, h)
        inputs[4:6] = ["pk", "pv"]
        outputs |= {"present_k": [b, kv, total, h], "present_v": [b, kv, total, h]}
    heads_attrs = {} if four_d else {"q_num_heads": heads, "kv_num_heads": kv}
    node = helper.make_node("Attention", inputs, list(outputs), is_causal=causal, **heads_attrs)
    return fused_pair(node, feeds, outputs, opset=23), feeds


@needs_host
@pytest.mark.parametrize("case", ATTENTION_23_CASES.values(), ids=ATTENTION_23_CASES.keys())
def test_attention_23_matches_ort(case):
    assert_matches_ort(*attention_23_case(case))


def test_attention_23_row_masked_whole_is_zero():
    """The padded-first cases are real: ORT writes 0 for query 0 of batch row 0 (scores all LOWEST)
    and the mean of V for it with -1e30, so a lowering that ignores such rows fails them."""
    for pad, zero in ((LOWEST, True), (-np.inf, True), (-1e30, False)):
        m, feeds = attention_23_case({"past": 0, "empty": True, "pad": pad})
        y = run_both(m, feeds)[0][1]
        assert (np.abs(y[0, 0]).max() == 0) == zero, pad


def test_attention_23_boolean_mask_is_refused():
    rng = np.random.default_rng(12)
    feeds = {
        "q": rand(rng, 1, 2, 16),
        "k": rand(rng, 1, 2, 16),
        "v": rand(rng, 1, 2, 16),
        "mask": np.ones((2, 2), bool),
    }
    node = helper.make_node("Attention", ["q", "k", "v", "mask"], ["y"], q_num_heads=2, kv_num_heads=2)
    m = fused_pair(node, feeds, {"y": [1, 2, 16]}, opset=23)
    with pytest.raises(LoweringError, match="not a boolean one"):  # the attention lowering says so
        lower_pair(m, m.graph.node[0])


# ---- the cost profile counts the program ops


PROFILED_CASES = {
    "skip_norm": lambda: skip_norm_case(False, True),
    "skip_simplified": lambda: skip_norm_case(True, False),
    "mha": lambda: mha_case(np.random.default_rng(3)),
    "mha_attention_bias": lambda: mha_case(np.random.default_rng(3), attn_bias=True, bias=False),
    "mha_no_past": lambda: mha_case(np.random.default_rng(3), past=0, s=5, mask=False),
    "gqa_chunk": lambda: gqa_case(np.random.default_rng(5), b=1, s=3, past=5, seqlens=[7], interleaved=1),
    "gqa_decode": lambda: gqa_case(np.random.default_rng(6), b=2, s=1, past=6, seqlens=[6, 3], packed=False),
    "gqa_first_prompt": lambda: gqa_case(np.random.default_rng(7), b=2, s=4, past=0, seqlens=[3, 2]),
    "rotary": lambda: rotary_case("", 1),
    "rotary_contrib": lambda: rotary_case(MS, 0),
    "rotary_4d": lambda: rotary_case("", 0, four_d=True),
    "rotary_contrib_4d": lambda: rotary_case(MS, 1, four_d=True),
    **{f"attention_{k}": (lambda c=c: attention_23_case(c)) for k, c in ATTENTION_23_CASES.items()},
}
KERNEL_ENGINE = {"matrix": Engine.MATRIX, "vector": Engine.VECTOR, "memory": Engine.COPY}


@pytest.mark.parametrize("case", PROFILED_CASES.values(), ids=PROFILED_CASES.keys())
def test_profile_counts_each_program_op_on_its_engine(case):
    """fused_work lists the fused op's program ops as its lowering emits them: one entry per op of
    task B, on the same engine, in the same order (the cost model charges each its dispatch)."""
    m, _ = case()
    program = lower_pair(m, m.graph.node[0])
    engines = [Engine(struct.unpack_from("<B", r, 2)[0]) for r in _op_records(program) if r[3] == Task.B]
    g = graph.index_model(plain(m))
    node = next(n for n in g.nodes if n.op_type != "Relu")
    assert [KERNEL_ENGINE[e] for e, _, _, _ in fused_work(g, node)] == engines


@needs_host
@pytest.mark.parametrize("name", ["llama_attention23", "llama_gqa_contrib", "gpt2_mha_contrib"])
def test_fused_op_decoders_keep_their_symbolic_shapes(tmp_path, name):
    """Without --shape the fused-op decoders pair (the opset-23 Llama its rotary embeddings: their
    scratch tensors get shape expressions; GPT-2 its embedding lookups, GATHER_ROWS), and the
    written model, its dims still symbolic, generates the original's tokens with a growing KV
    cache (prompt of 5, then 1 token a step) on the plugin and on stock ORT."""
    from hexfuse_onnx import pipeline, runtime
    from models.exported import MODELS, decoder_spec, generate

    path = MODELS[name].path
    result = pipeline.rewrite(path, tmp_path / "fused.onnx", verify_plugin=True)
    assert result.output is not None, [r.reason for r in result.analysis.rejected]
    fused = onnx.load(result.output)
    paired = {n.op_type for fn in fused.functions for n in fn.node}
    assert {"llama_attention23": "RotaryEmbedding", "gpt2_mha_contrib": "Gather"}.get(name, "MatMul") in paired
    original = onnx.load(path)
    assert [i.type for i in fused.graph.input] == [i.type for i in original.graph.input]
    spec = decoder_spec(path)
    prompt = np.array([[5, 17, 42, 7, 99], [1, 2, 3, 4, 5]], np.int64)
    want = generate(verify.session(path), spec, prompt, 4)
    plugin = runtime.InferenceSession(result.output, backend="host")
    np.testing.assert_array_equal(generate(plugin, spec, prompt, 4), want)
    np.testing.assert_array_equal(generate(verify.session(result.output), spec, prompt, 4), want)


def with_symbolic_dims(m: onnx.ModelProto, axes: dict[str, dict[int, str]]) -> onnx.ModelProto:
    """`m` with the named graph inputs', outputs' and body value_info's axes made symbolic."""
    values = [*m.graph.input, *m.graph.output, *(v for f in m.functions for v in f.value_info)]
    for v in values:
        for axis, name in axes.get(v.name, {}).items():
            v.type.tensor_type.shape.dim[axis].dim_param = name
    return m


def attention_23_at(b: int, s: int, past: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(b * 100 + s * 10 + past)
    mask = np.where(rng.random((b, 1, s, past + s)) < 0.2, -np.inf, 0).astype(np.float32)
    mask[..., 0] = 0
    kv = {k: rand(rng, b, 2, past, 8) for k in ("pk", "pv")}
    return {"q": rand(rng, b, s, 32), "k": rand(rng, b, s, 16), "v": rand(rng, b, s, 16), "mask": mask, **kv}


@needs_host
def test_attention_23_lowers_once_for_every_batch_and_length():
    """With batch, sequence and past symbolic, the expansion's scratch tensors get shape
    expressions (one v2 program), which runs at other shapes than the representative one and
    matches ORT there."""
    m, _ = attention_23_case({"past": 5})
    bs, cache = {0: "B", 1: "S"}, {0: "B", 2: "P"}
    present = {0: "B", 2: "P + S"}
    axes = {"q": bs, "k": bs, "v": bs, "y": bs, "mask": {0: "B", 2: "S", 3: "P + S"}, "pk": cache, "pv": cache}
    m = with_symbolic_dims(m, axes | {"present_k": present, "present_v": present})
    program = lower_pair(m, m.graph.node[0])
    assert struct.unpack_from("<H", program, 4)[0] == 2  # format v2: carries a shape section
    ra = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    session = ort.InferenceSession(plain(m).SerializeToString(), providers=["CPUExecutionProvider"])
    for b, s, past in ((1, 1, 9), (3, 4, 2)):
        feeds = attention_23_at(b, s, past)
        ref = session.run(None, {"ra": ra, **feeds})
        inputs = [ra, *(feeds[n] for n in ("q", "k", "v", "mask", "pk", "pv"))]
        got = HostKernel().run(specialize(program, [list(x.shape) for x in inputs]), inputs)
        for r, g in zip(ref, got):
            assert r.shape == g.shape
            assert verify.relative_error(r, g) <= TOL


@needs_host
def test_multi_head_attention_with_padding_mask_lowers_once_for_every_batch_and_length():
    """MultiHeadAttention (not unidirectional) with a key padding mask and a past, batch, sequence
    and past symbolic: one v2 program, matching ORT at two other shapes."""
    m, _ = mha_case(np.random.default_rng(1), causal=0, b=2, s=3, past=5)
    bs, cache, present = {0: "B", 1: "S"}, {0: "B", 2: "P"}, {0: "B", 2: "P + S"}
    axes = {"q": bs, "k": bs, "v": bs, "y": bs, "mask": {0: "B", 1: "P + S"}, "pk": cache, "pv": cache}
    m = with_symbolic_dims(m, axes | {"present_k": present, "present_v": present})
    program = lower_pair(m, m.graph.node[0])
    ra = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    bias = numpy_helper.to_array(m.graph.initializer[0])
    session = ort.InferenceSession(plain(m).SerializeToString(), providers=["CPUExecutionProvider"])
    for b, s, past in ((1, 1, 9), (3, 4, 2)):
        rng = np.random.default_rng(b)
        feeds = {n: rand(rng, b, s, 16) for n in ("q", "k", "v")}
        feeds["mask"] = np.ones((b, past + s), np.int32)
        feeds["mask"][0, 0] = 0
        feeds |= {n: rand(rng, b, 2, past, 8) for n in ("pk", "pv")}
        ref = session.run(None, {"ra": ra, **feeds})
        inputs = [ra, *(bias if n == "bias" else feeds[n] for n in m.graph.node[0].input[1:])]
        got = HostKernel().run(specialize(program, [list(x.shape) for x in inputs]), inputs)
        for r, g in zip(ref, got):
            assert r.shape == g.shape
            assert verify.relative_error(r, g) <= TOL
