"""Attention and MLP blocks of the exported decoders (models/exported/) are recognised along the
data path, and a graph holding a prefill copy and a decode copy of one decoder gets
prefill_decode candidates layer by layer."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_support import run_cli

from hexfuse_onnx import graph, pipeline, runtime
from hexfuse_onnx.kinds.blocks import Block, layer_blocks
from hexfuse_onnx.kinds.dag import DagFacts, dag_facts
from hexfuse_onnx.runtime import HOST_NAME, LIB_DIR
from hexfuse_onnx.select import CYCLE, acyclic_with
from hexfuse_onnx.verify import session
from models.exported import (
    MODELS,
    decoder_inputs,
    decoder_spec,
    input_shapes,
    prefill_decode_model,
    prefill_decode_shapes,
)

SEQ, PAST = 8, 16
needs_host = pytest.mark.skipif(not (LIB_DIR / HOST_NAME).is_file(), reason=f"{HOST_NAME} not built")
LAYERS = 2

# Op types each attention block must hold: its projections, its core, and what the exporter
# writes between them (fused QKV Split, rotary, repeat_kv, the present Concat).
ATTENTION_OPS = {
    "gpt2_torchscript": {"Gemm", "Split", "Concat", "MatMul", "Softmax"},
    "gpt2_dynamo": {"Gemm", "Split", "Concat", "MatMul", "Softmax"},
    "llama_torchscript": {"MatMul", "Neg", "Slice", "Concat", "Expand", "Softmax"},
    "llama_dynamo": {"MatMul", "Neg", "Slice", "Concat", "Expand", "Softmax"},
    "gpt2_mha_contrib": {"MatMul", "Split", "MultiHeadAttention"},
    "llama_gqa_contrib": {"MatMul", "GroupQueryAttention"},
    "llama_attention23": {"MatMul", "RotaryEmbedding", "Attention"},
}
MLP_OPS = {
    "gpt2_torchscript": {"Gemm", "Tanh", "Pow"},
    "gpt2_dynamo": {"Gemm", "Tanh", "Pow"},
    "gpt2_mha_contrib": {"MatMul", "FastGelu"},
}
LLAMA_MLP_OPS = {"MatMul", "Sigmoid", "Mul"}
SHARED_MASK_OPS = {"LessOrEqual", "Range", "Cos", "Sin", "ReduceSum"}  # built once, read by every layer


def _blocks(name: str) -> tuple[graph.ModelGraph, DagFacts, list[Block]]:
    path = MODELS[name].path
    g = graph.load(path, input_shapes(decoder_spec(path), SEQ, PAST))
    facts = dag_facts(g)
    return g, facts, layer_blocks(g, facts)


def _convex(facts: DagFacts, nodes: frozenset[int]) -> bool:
    """No path leaves the set and comes back."""
    left: set[int] = set()  # nodes outside the set reached from it
    for i in range(min(nodes), max(nodes) + 1):
        if i in nodes:
            if any(p in left for p in facts.preds[i]):
                return False
        elif any(p in nodes or p in left for p in facts.preds[i]):
            left.add(i)
    return True


@pytest.mark.parametrize("name", list(MODELS))
def test_one_attention_and_one_mlp_block_per_layer(name: str) -> None:
    g, facts, blocks = _blocks(name)
    kinds = Counter(b.kind for b in blocks)
    assert kinds == {"attention": LAYERS, "mlp": LAYERS}
    assert all(b.positions == SEQ for b in blocks)
    seen: set[int] = set()
    for b in blocks:
        assert _convex(facts, b.nodes), f"{b.kind} block of {name} is not convex"
        assert not seen & b.nodes, "a node in two blocks"
        seen |= b.nodes
        ops = {g.nodes[i].op_type for i in b.nodes}
        assert not ops & SHARED_MASK_OPS, f"{b.kind} block took shared mask/rotary nodes: {ops & SHARED_MASK_OPS}"
        expected = ATTENTION_OPS[name] if b.kind == "attention" else MLP_OPS.get(name, LLAMA_MLP_OPS)
        assert expected <= ops, f"{b.kind} block of {name} lacks {expected - ops}"


@pytest.mark.parametrize("name", list(MODELS))
def test_attention_block_spans_projections_to_output_and_makes_the_present(name: str) -> None:
    g, _, blocks = _blocks(name)
    spec = decoder_spec(MODELS[name].path)
    attention = [b for b in blocks if b.kind == "attention"]
    for layer, block in enumerate(attention):
        for present in spec.present[layer]:
            assert g.producer[present] in block.nodes, f"{present} is made outside layer {layer}'s block"
        weights = {t for i in block.nodes for t in g.nodes[i].input if t in g.initializers}
        # every weight a projection of this layer reads (q/k/v or fused qkv, and the output projection)
        exported_name = {t for t in weights if ".layers." in t or ".h." in t}
        assert all(f".{layer}." in t for t in exported_name), f"layer {layer} block reads {exported_name}"
        projections = [
            i for i in block.nodes if g.nodes[i].op_type in ("MatMul", "Gemm") and g.nodes[i].input[1] in weights
        ]
        assert len(projections) >= 2  # at least a (fused) QKV projection and the output projection


def test_the_mask_is_an_input_of_every_score_add_not_part_of_a_block() -> None:
    g, _, blocks = _blocks("gpt2_dynamo")
    softmaxes = [i for i in range(len(g.nodes)) if g.nodes[i].op_type == "Softmax"]
    masks = {g.nodes[g.producer[g.nodes[s].input[0]]].input[1] for s in softmaxes}
    assert len(masks) == 1  # one mask subgraph, read by both layers
    mask_node = g.producer[masks.pop()]
    assert all(mask_node not in b.nodes for b in blocks)
    assert all(any(g.producer[g.nodes[s].input[0]] in b.nodes for b in blocks) for s in softmaxes)


@pytest.mark.parametrize("name", list(MODELS))
def test_prefill_and_decode_copies_pair_layer_by_layer(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.prefill_decode.onnx"
    onnx.save(prefill_decode_model(MODELS[name].path), path)
    a = pipeline.analyse(
        path, kinds=["prefill_decode"], shapes=prefill_decode_shapes(decoder_spec(MODELS[name].path), SEQ, PAST)
    )
    found = [c for c in a.candidates if c.kind == "prefill_decode"]
    notes = sorted(c.note.split(":")[0] for c in found)
    assert notes == sorted(f"layer {i} {kind}" for i in range(LAYERS) for kind in ("attention", "mlp"))
    for c in found:
        assert all(a.graph.nodes[i].name.startswith("prefill/") for i in c.task_a)
        assert all(a.graph.nodes[i].name.startswith("decode/") for i in c.task_b)
        layer = c.note.split()[1]
        a_ops = Counter(a.graph.nodes[i].op_type for i in c.task_a)
        assert a_ops == Counter(a.graph.nodes[i].op_type for i in c.task_b), f"layer {layer}: copies differ"


@pytest.mark.parametrize("name", ["gpt2_dynamo", "llama_gqa_contrib"])
def test_merged_copies_compute_what_the_decoder_computes(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.prefill_decode.onnx"
    onnx.save(prefill_decode_model(MODELS[name].path), path)
    prefill = decoder_inputs(MODELS[name].path, SEQ, 0, seed=1)
    decode = decoder_inputs(MODELS[name].path, 1, PAST, seed=2)
    feeds = {f"prefill/{k}": v for k, v in prefill.items()} | {f"decode/{k}": v for k, v in decode.items()}
    merged = session(path)
    got = dict(zip([o.name for o in merged.get_outputs()], merged.run(None, feeds)))
    alone = session(MODELS[name].path)
    for prefix, request in (("prefill/", prefill), ("decode/", decode)):
        want = dict(zip([o.name for o in alone.get_outputs()], alone.run(None, request)))
        for out, value in want.items():
            np.testing.assert_allclose(got[prefix + out], value, rtol=0, atol=1e-5)


TORCH_EXPORTS = ["gpt2_torchscript", "gpt2_dynamo", "llama_torchscript", "llama_dynamo"]


@needs_host
@pytest.mark.parametrize("name", TORCH_EXPORTS)
def test_rewritten_merged_decoder_fuses_every_layer_and_verifies_on_the_kernel(name: str, tmp_path: Path) -> None:
    # GPT-2: fused-QKV Split, tanh GELU's Pow(x, 3); Llama: rotary Neg/Slice/Concat, repeat_kv's
    # Expand to a shape computed from Shape(past); all reshape to computed shapes (TorchScript:
    # Shape/Gather/Concat chains inside the blocks, folded when lowering). The prefill
    # reads a short past: analysed at an empty one, the attention blocks do not lower (the
    # lowering refuses empty dims; the kernel runs them, tests/test_empty_cache_generation.py).
    path = tmp_path / f"{name}.prefill_decode.onnx"
    onnx.save(prefill_decode_model(MODELS[name].path), path)
    shapes = prefill_decode_shapes(decoder_spec(MODELS[name].path), SEQ, PAST, prefill_past=4)
    result = pipeline.rewrite(
        path,
        tmp_path / "fused.onnx",
        kinds=["prefill_decode"],
        shapes=shapes,
        verify_plugin=True,
    )
    notes = sorted(p.candidate.note.split(":")[0] for p in result.analysis.pairs)
    assert notes == sorted(f"layer {i} {kind}" for i in range(LAYERS) for kind in ("attention", "mlp"))
    assert result.output is not None and result.comparison is not None
    fused_ops = Counter(n.op_type for n in onnx.load(str(result.output)).graph.node)
    assert fused_ops["FusedHexPair"] == 2 * LAYERS


@needs_host
@pytest.mark.parametrize("name", TORCH_EXPORTS)
def test_merged_decoder_pairs_keep_the_lengths_symbolic(name: str, tmp_path: Path) -> None:
    # the Reshapes to shapes computed outside a pair (val_68 = Concat(Shape ...)) get their dims
    # from the whole model's inference, not the dims the body's inference invents for them; an
    # MLP pair reading [batch * length, 64] also reads input_ids (batch and length apart);
    # repeat_kv's Expand multiplies by ones that do not follow the lengths
    path = tmp_path / f"{name}.prefill_decode.onnx"
    onnx.save(prefill_decode_model(MODELS[name].path), path)
    shapes = prefill_decode_shapes(decoder_spec(MODELS[name].path), SEQ, PAST, prefill_past=4)
    result = pipeline.rewrite(
        path, tmp_path / "fused.onnx", kinds=["prefill_decode"], shapes=shapes, verify_plugin=True
    )
    assert result.output is not None, [r.reason for r in result.analysis.rejected]
    notes = sorted(p.candidate.note.split(":")[0] for p in result.analysis.pairs)
    assert notes == sorted(f"layer {i} {kind}" for i in range(LAYERS) for kind in ("attention", "mlp"))
    fused = onnx.load(str(result.output))
    ids = next(v for v in fused.graph.input if v.name == "prefill/input_ids")
    assert [d.dim_param for d in ids.type.tensor_type.shape.dim] == ["prefill_batch_size", "prefill_sequence_length"]
    feeds = {f"prefill/{k}": v for k, v in decoder_inputs(MODELS[name].path, 5, 3, seed=3, batch=2).items()}
    feeds |= {f"decode/{k}": v for k, v in decoder_inputs(MODELS[name].path, 1, 30, seed=4).items()}
    want = session(path).run(None, feeds)
    for options in (None, runtime.session_options("host")):
        got = session(result.output, options).run(None, feeds)
        for w, g in zip(want, got):
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-4)


def test_a_decode_batch_pairs_its_mlp_by_the_attention_query_length(tmp_path: Path) -> None:
    # GPT-2's MLP Gemm reads [batch x positions, 64]: 3 rows for a decode batch of 3, which alone
    # would read as a 3-position prefill; the MLP takes its layer's attention query length (1)
    name = "gpt2_dynamo"
    path = tmp_path / f"{name}.prefill_decode.onnx"
    onnx.save(prefill_decode_model(MODELS[name].path), path)
    spec = decoder_spec(MODELS[name].path)
    shapes = {f"prefill/{k}": v for k, v in input_shapes(spec, SEQ, 0).items()}
    shapes |= {f"decode/{k}": v for k, v in input_shapes(spec, 1, PAST, batch=3).items()}
    a = pipeline.analyse(path, kinds=["prefill_decode"], shapes=shapes)
    notes = sorted(c.note.split(":")[0] for c in a.candidates)
    assert notes == sorted(f"layer {i} {kind}" for i in range(LAYERS) for kind in ("attention", "mlp"))


def test_mlp_blocks_without_attention_are_not_decoder_layers(zoo_dir: Path, tmp_path: Path) -> None:
    # two_branch has an MLP over 64 rows, sequential_chain one over 1 row: side by side they
    # look like a prefill and a decode MLP, but neither follows an attention block
    wide, narrow = (onnx.load(str(zoo_dir / f"{n}.onnx")) for n in ("two_branch", "sequential_chain"))
    path = tmp_path / "two_mlps.onnx"
    onnx.save(onnx.compose.merge_models(wide, narrow, io_map=[], prefix1="a/", prefix2="b/"), path)
    g = graph.load(path)
    assert sorted(b.positions for b in layer_blocks(g, dag_facts(g)) if b.kind == "mlp") == [1, 64]
    assert pipeline.analyse(path, kinds=["prefill_decode"]).candidates == []


def test_contrib_attention_projecting_its_own_qkv_is_a_block_with_its_output_projection(tmp_path: Path) -> None:
    # com.microsoft Attention takes the hidden state and the QKV weight: the block is the op and
    # the output projection, never the previous layer it reads from
    rng = np.random.default_rng(0)
    hidden, nodes, inits = "x", [], []
    for layer in range(LAYERS):
        w = {
            "qkv": rng.standard_normal((64, 192)),
            "qkv_bias": rng.standard_normal(192),
            "out": rng.standard_normal((64, 64)),
            "scale": np.ones(64),
            "shift": np.zeros(64),
        }
        inits += [onnx.numpy_helper.from_array(v.astype(np.float32), f"l{layer}.{k}") for k, v in w.items()]
        p = f"l{layer}."
        nodes += [
            onnx.helper.make_node("LayerNormalization", [hidden, p + "scale", p + "shift"], [p + "ln"], name=p + "ln"),
            onnx.helper.make_node(
                "Attention",
                [p + "ln", p + "qkv", p + "qkv_bias"],
                [p + "att"],
                name=p + "attention",
                domain="com.microsoft",
                num_heads=4,
            ),
            onnx.helper.make_node("MatMul", [p + "att", p + "out"], [p + "proj"], name=p + "out_proj"),
            onnx.helper.make_node("Add", [hidden, p + "proj"], [p + "res"], name=p + "residual"),
        ]
        hidden = p + "res"
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, SEQ, 64])
    y = onnx.helper.make_tensor_value_info(hidden, onnx.TensorProto.FLOAT, [1, SEQ, 64])
    graph_proto = onnx.helper.make_graph(nodes, "contrib_attention", [x], [y], inits)
    opsets = [onnx.helper.make_opsetid("", 17), onnx.helper.make_opsetid("com.microsoft", 1)]
    path = tmp_path / "contrib_attention.onnx"
    onnx.save(onnx.helper.make_model(graph_proto, opset_imports=opsets), path)
    g = graph.load(path)
    blocks = layer_blocks(g, dag_facts(g))
    attention = [sorted(g.nodes[i].name for i in b.nodes) for b in blocks if b.kind == "attention"]
    assert attention == [[f"l{i}.attention", f"l{i}.out_proj"] for i in range(LAYERS)]
    assert all(b.positions == SEQ for b in blocks)


def _qdq_layer() -> onnx.ModelProto:
    """One transformer layer as onnxruntime's QDQ quantiser writes it: every op's output through
    QuantizeLinear/DequantizeLinear, every weight a DequantizeLinear of uint8 values."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes: list[onnx.NodeProto] = []
    inits = [
        numpy_helper.from_array(np.array(0.05, np.float32), "s"),
        numpy_helper.from_array(np.array(128, np.uint8), "z"),
    ]

    def qdq(t: str) -> str:
        nodes.append(helper.make_node("QuantizeLinear", [t, "s", "z"], [f"{t}_q"], name=f"{t}_Q"))
        nodes.append(helper.make_node("DequantizeLinear", [f"{t}_q", "s", "z"], [f"{t}_dq"], name=f"{t}_DQ"))
        return f"{t}_dq"

    def weight(name: str) -> str:
        inits.append(numpy_helper.from_array(rng.integers(0, 255, (16, 16)).astype(np.uint8), name))
        nodes.append(helper.make_node("DequantizeLinear", [name, "s", "z"], [f"{name}_dq"], name=f"{name}_DQ"))
        return f"{name}_dq"

    def op(kind: str, inputs: list[str], out: str, **attrs: object) -> str:
        nodes.append(helper.make_node(kind, inputs, [out], name=out, **attrs))
        return qdq(out)

    x = qdq("x")
    q, k, v = (op("MatMul", [x, weight(f"w{c}")], c) for c in "qkv")
    scores = op("MatMul", [q, op("Transpose", [k], "kt", perm=[0, 2, 1])], "scores")
    context = op("MatMul", [op("Softmax", [scores], "probs", axis=-1), v], "context")
    h = op("Add", [x, op("MatMul", [context, weight("wo")], "attn_out")], "h")
    y = op("MatMul", [op("Relu", [op("MatMul", [h, weight("wu")], "up")], "act"), weight("wd")], "down")
    g = helper.make_graph(
        nodes,
        "qdq_layer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, SEQ, 16])],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, SEQ, 16])],
        inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def test_qdq_blocks_are_found_through_quantize_and_dequantize(tmp_path: Path) -> None:
    """Weights read through DequantizeLinear are projections and Q/DQ pairs are on the data path;
    each block ends with its output projection's QuantizeLinear (one QDQ group). Before, a QDQ
    decoder had no blocks: prefill_decode had no candidates."""
    onnx.save(_qdq_layer(), tmp_path / "layer.onnx")
    g = graph.load(tmp_path / "layer.onnx")
    blocks = layer_blocks(g, dag_facts(g))
    assert [(b.kind, b.positions) for b in blocks] == [("attention", SEQ), ("mlp", SEQ)]
    names = [{g.nodes[i].name for i in b.nodes} for b in blocks]
    assert {"q", "k", "v", "scores", "probs", "context", "attn_out", "attn_out_Q"} <= names[0]
    assert {"up", "act", "down", "down_Q"} <= names[1] and "h" not in names[1]


def _speech_blocks(path: Path, shapes: dict[str, list[int]] | None = None) -> Counter:
    g = graph.load(path, shapes)
    return Counter((b.kind, b.positions) for b in layer_blocks(g, dag_facts(g)))


def test_whisper_self_attention_behind_its_nan_guard() -> None:
    """optimum's Whisper decoder zeroes masked rows after the Softmax, Where(IsNaN(p), 0, p): the
    self-attention blocks were missed (2 of 4 attention blocks found, the cross-attention ones)."""
    from models.exported import SPEECH, speech_shapes

    for name, positions in (("whisper_decoder", 4), ("whisper_decoder_with_past", 1)):
        blocks = _speech_blocks(SPEECH[name].path, speech_shapes(name))
        assert blocks == {("attention", positions): 4, ("mlp", positions): 2}, name


def test_qdq_attention_reaches_its_output_projection_through_q_dq(tmp_path: Path) -> None:
    """In a QDQ Whisper the context reaches o_proj's Gemm through Transpose, Reshape and Reshape, each
    with a Q/DQ pair after it: 9 nodes, past the 8 the search took, so no attention was found (and
    prefill_decode had no attention pairs)."""
    for name, positions, attention in (
        ("whisper_encoder_qdq_u8u8", 64, 2),
        ("whisper_decoder_with_past_qdq_u8u8", 1, 4),
    ):
        blocks = _speech_blocks(_made(name, tmp_path))
        assert blocks == {("attention", positions): attention, ("mlp", positions): 2}, name


def _made(name: str, folder: Path) -> Path:
    from models import quantized

    out = folder / name
    out.mkdir()
    return quantized.generate(name, out)


def _chains() -> graph.ModelGraph:
    """Two independent chains x -> a1 -> a2 and y -> b1 -> b2."""
    h = onnx.helper
    nodes = [
        h.make_node("Relu", ["x"], ["a1"], name="a1"),
        h.make_node("Relu", ["a1"], ["a2"], name="a2"),
        h.make_node("Relu", ["y"], ["b1"], name="b1"),
        h.make_node("Relu", ["b1"], ["b2"], name="b2"),
    ]
    vi = [h.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [4]) for n in ("x", "y", "a2", "b2")]
    model = h.make_model(h.make_graph(nodes, "chains", vi[:2], vi[2:]), opset_imports=[h.make_opsetid("", 18)])
    return graph.index_model(model)


def test_pairs_that_wait_on_each_other_are_not_chosen_together() -> None:
    g = _chains()
    ids = {n.name: i for i, n in enumerate(g.nodes)}
    a1, a2, b1, b2 = (ids[k] for k in ("a1", "a2", "b1", "b2"))
    assert acyclic_with(g, [{a1, b1}, {a2, b2}])
    assert not acyclic_with(g, [{a1, b2}, {a2, b1}])  # a2 waits on (a1, b2), which waits on b1 in (a2, b1)


def test_a_group_reading_a_dequantize_outside_it_waits_on_what_that_reads() -> None:
    """x -> q (Q) -> dq (DQ) -> c (Relu), dq -> d (Relu) too: a pair holding q and c reads its own copy
    of dq (with_dequantize_copies), so it does not wait on dq; counted as waiting on it, the pair
    looked circular alone (ppocr_cls u16u8 x2). A plain node left outside still closes a cycle."""
    g = _qdq_graph()
    ids = {n.name: i for i, n in enumerate(g.nodes)}
    assert acyclic_with(g, [{ids["q"], ids["c"]}])
    assert not acyclic_with(g, [{ids["q"], ids["e"]}])  # q -> r -> e: r outside waits on q and e on r


def _qdq_graph() -> graph.ModelGraph:
    """x -> q (Q) -> dq (DQ) -> c, d (Relu); q -> r (Relu); e = c + r; y -> b1 -> b2 (Relu) beside them."""
    h = onnx.helper
    f, u16 = onnx.TensorProto.FLOAT, onnx.TensorProto.UINT16
    nodes = [
        h.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q"),
        h.make_node("DequantizeLinear", ["q", "s", "z"], ["dq"], name="dq"),
        h.make_node("Relu", ["dq"], ["c"], name="c"),
        h.make_node("Relu", ["dq"], ["d"], name="d"),
        h.make_node("Relu", ["q"], ["r"], name="r"),
        h.make_node("Add", ["c", "r"], ["e"], name="e"),
        h.make_node("Relu", ["y"], ["b1"], name="b1"),
        h.make_node("Relu", ["b1"], ["b2"], name="b2"),
    ]
    vi = [h.make_tensor_value_info(n, f, [4]) for n in ("x", "y", "d", "e", "b2")]
    inits = [h.make_tensor("s", f, [], [0.1]), h.make_tensor("z", u16, [], [0])]
    graph_ = h.make_graph(nodes, "qdq", vi[:2], vi[2:], inits)
    return graph.index_model(h.make_model(graph_, opset_imports=[h.make_opsetid("", 21)]))


def test_groupings_known_acyclic_or_cyclic_answer_as_acyclic_with(monkeypatch) -> None:
    """Every grouping of up to three disjoint node pairs, in a shuffled order, each known acyclic one kept:
    what a grouping within a known acyclic one or holding a known cyclic one is said to be is what acyclic_with
    finds, a DequantizeLinear read from outside a group included ({dq, e} waits on c, which {c, d} cuts)."""
    from itertools import combinations

    from hexfuse_onnx import select
    from hexfuse_onnx.select import _groupings, _known_acyclic

    asked = []
    monkeypatch.setattr(select, "acyclic_with", lambda g, groups: asked.append(groups) or acyclic_with(g, groups))
    g = _qdq_graph()
    twos = [frozenset(p) for p in combinations(range(len(g.nodes)), 2)]
    groupings = [list(c) for k in (1, 2, 3) for c in combinations(twos, k) if len(frozenset().union(*c)) == 2 * k]
    random.Random(0).shuffle(groupings)
    answers = []
    for groups in groupings:
        answers.append(_known_acyclic(g, groups))
        assert answers[-1] == acyclic_with(g, groups), groups
        if answers[-1]:
            _groupings(g).acyclic.append(frozenset(groups))
    assert 0 < sum(answers) < len(answers) and _groupings(g).cyclic
    assert len(asked) < 0.75 * len(groupings)  # the rest (199 of 658) answered from what is known


def test_encoder_beside_a_decode_step_pairs_layers_without_a_cycle(tmp_path: Path) -> None:
    """prefill_decode over a Whisper encoder and a decoder step: the i-th attention of the decoder
    (two per layer) met the encoder's layer i, and at 0 us two pairs waited on each other: the
    rewrite failed ("the rewritten graph is not a DAG", nothing written)."""
    from models.exported import speech_feeds

    enc, dec = _made("whisper_encoder_qdq_u8u8", tmp_path), _made("whisper_decoder_with_past_qdq_u8u8", tmp_path)
    feeds = {f"enc/{k}": v for k, v in speech_feeds("whisper_encoder", 0).items()}
    feeds |= {f"dec/{k}": v for k, v in speech_feeds("whisper_decoder_with_past", 1).items()}
    np.savez(tmp_path / "r.npz", **feeds)
    out, report = tmp_path / "x.onnx", tmp_path / "x.json"
    args = ["colocate", enc, dec, "--names", "enc,dec", "--kinds", "prefill_decode", "--inputs", tmp_path / "r.npz"]
    proc = run_cli(*args, "-o", out, "--json", report, "-q")  # at 0 us (conftest)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(report.read_text())
    assert len(doc["pairs"]) == 3
    assert [r["reason"] for r in doc["rejected"]] == [CYCLE]


@pytest.mark.parametrize("name", ["gpt2_dynamo_decode_qdq_u8u8", "llama_torchscript_decode_qdq_u8u8"])
def test_qdq_torch_decoders_scores_are_reached_through_q_dq(name: str, tmp_path: Path) -> None:
    """The torch exports' QDQ scores go MatMul, Mul (scale), Add (mask), Softmax, each with a Q/DQ
    pair after it: 9 nodes up from the Softmax, past the 6 the search took, so their attention was
    never found (only the MLPs)."""
    assert _speech_blocks(_made(name, tmp_path)) == {("attention", 1): 2, ("mlp", 1): 2}
