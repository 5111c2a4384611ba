"""What a fourteenth stranger hit with the models of models/README.md's "A fourteenth stranger's
models": the real models where they are cached (`python -m models real fetch NAME`; skipped when
not), and the zoo's listing of a real speech model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from cli_support import run_cli
from onnx import TensorProto, helper
from onnxruntime.quantization import quantize_dynamic
from real_support import cached_or_skip
from test_subgraphs import D_HID, D_IN, ROWS, if_model

from hexfuse_onnx import graph
from hexfuse_onnx.kinds.blocks import layer_blocks
from hexfuse_onnx.kinds.dag import dag_facts
from hexfuse_onnx.pipeline import analyse, rewrite
from hexfuse_onnx.report import pair_rows, places, summary
from hexfuse_onnx.subgraphs import branch_models
from hexfuse_onnx.tools.zoo import list_models
from models import real
from models.graph_builder import GraphBuilder


def test_zoo_says_a_real_speech_model_is_not_fetched_when_it_is_not(tmp_path: Path) -> None:
    # kind "speech" is shared by the committed exports and real models: only the exports are committed
    entries = {m.name: m for m in list_models(tmp_path)}  # an empty cache
    for name in ("silero_vad", "moonshine_tiny_encoder"):
        assert entries[name].status == f"not fetched: python -m models real fetch {name}"
    assert entries["whisper_encoder"].status == "ready (committed in models/exported)"


def test_a_graph_that_is_one_if_is_not_called_a_chain(tmp_path: Path) -> None:
    # a merged decoder's main graph is one If; its work lies in the branches, analysed on their own
    path = tmp_path / "one_if.onnx"
    onnx.save(if_model(rows=1, on_mean=True), path)
    a = analyse(path, target="host")
    assert a.branches and not a.candidates
    assert "no independent work" not in summary(a)


def test_merged_decoder_names_no_if_as_not_profiled() -> None:
    # the If's outputs are declared [batch, 8, past_decoder_sequence_length + 1, 36]: unknown at any
    # binding, frozen or not, while both branches are analysed; it was listed with a --freeze-shapes hint
    path = cached_or_skip("moonshine_tiny_decoder")
    a = analyse(path, shapes=real.get("moonshine_tiny_decoder").shapes, target="host")
    assert [b.analysis.graph.nodes and b.branch.attribute for b in a.branches] == ["then_branch", "else_branch"]
    assert list(a.profile.unprofiled) == [0]  # still in the profile (and --json): it is not costed
    text = summary(a)
    assert "not profiled" not in text and "no independent work" not in text


def _shape_of_the_matrix_chain_branch(g: GraphBuilder) -> onnx.GraphProto:
    """test_subgraphs' matrix chain and vector chain, the vector chain's Reshape shape taken from a
    Shape of the matrix chain's first MatMul: one chain at run time, two independent ones once the
    fold makes that shape a constant (Moonshine's decoder: a Shape of its embedding)."""
    start = len(g.nodes)
    h = g.op("MatMul", ["x", g.weight("w0", [D_IN, D_HID])], "matmul0")
    a = g.op("MatMul", [h, g.weight("w1", [D_HID, D_HID])], "matmul1")
    rows = g.op("Slice", [g.op("Shape", [h], "shape"), g.ints("zero", [0]), g.ints("one", [1])], "rows")
    v = g.op("Reshape", ["x", g.op("Concat", [rows, g.ints("cols", [D_IN])], "target", axis=0)], "reshape")
    for op in ("Sigmoid", "Tanh", "Exp"):
        v = g.op(op, [v], op.lower())
    y = g.op("Concat", [a, g.op("Softmax", [v], "softmax", axis=-1)], "concat", axis=1)
    nodes = g.nodes[start:]
    del g.nodes[start:]
    return helper.make_graph(nodes, "then", [], [helper.make_tensor_value_info(y, TensorProto.FLOAT, [ROWS, 768])])


def test_a_pair_in_a_branch_takes_shape_work_folded_from_inside_it(tmp_path: Path) -> None:
    # the Shape read the first MatMul, which the pair now makes inside its body: kept, it read a name no
    # node makes ("dangling input", exit 3 from `rewrite moonshine_tiny_decoder --freeze-shapes`)
    g = GraphBuilder("if_shape_of_pair", seed=0)
    g.inputs += [helper.make_tensor_value_info("x", TensorProto.FLOAT, [ROWS, D_IN])]
    g.inputs += [helper.make_tensor_value_info("fast", TensorProto.BOOL, [])]
    g._tensor_names |= {"x", "fast"}
    then_branch = _shape_of_the_matrix_chain_branch(g)
    thrice = helper.make_node("Concat", ["x", "x", "x"], ["ex"], axis=1)
    else_branch = helper.make_graph(
        [thrice], "else", [], [helper.make_tensor_value_info("ex", TensorProto.FLOAT, [ROWS, 768])]
    )
    g.op("If", ["fast"], "choose", outputs=["y"], then_branch=then_branch, else_branch=else_branch)
    g.outputs.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, [ROWS, 768]))
    path, out = tmp_path / "if_shape.onnx", tmp_path / "fused.onnx"
    onnx.save(g.model(), path)
    x = np.random.default_rng(14).standard_normal((ROWS, D_IN)).astype(np.float32)
    rewrite(path, out, target="host", inputs={"x": x, "fast": np.array(True)}, verify_plugin=True)
    fused = onnx.load(out)
    branch = next(a.g for a in fused.graph.node[0].attribute if a.name == "then_branch")
    assert "FusedHexPair" in [n.op_type for n in branch.node] and "Shape" not in [n.op_type for n in branch.node]
    onnx.checker.check_model(fused, full_check=True)


def test_dynamically_quantized_layers_are_blocks_as_the_float_ones(tmp_path: Path) -> None:
    # Moonshine's decoder ships as onnx.quantize writes it: DynamicQuantizeLinear -> MatMulInteger ->
    # Cast -> Mul by the scales; no projection was found, so prefill_decode had no candidate
    source = Path(__file__).parents[1] / "models" / "exported" / "whisper_decoder_with_past.onnx"
    quantize_dynamic(source, tmp_path / "dq.onnx")
    found = {}
    for name, path in (("float", source), ("dynamic", tmp_path / "dq.onnx")):
        g = graph.load(path)
        blocks = layer_blocks(g, dag_facts(g))
        found[name] = [b.kind for b in blocks]
        integer = [any(g.nodes[i].op_type == "MatMulInteger" for i in b.nodes) for b in blocks]
        assert all(integer) if name == "dynamic" else not any(integer)
    assert found["dynamic"] == found["float"] == ["attention"] * 4 + ["mlp"] * 2


def test_moonshine_decoder_phases_have_their_layers_as_blocks() -> None:
    # each If branch as a model (as a user deploying the phases apart writes them): 6 self- and 6
    # cross-attention blocks, and 6 MLPs whose one up projection is cut in two (Slice) for SiLU gating
    path = cached_or_skip("moonshine_tiny_decoder")
    branches, skipped = branch_models(graph.load(path, real.get("moonshine_tiny_decoder").shapes))
    assert not skipped and [b.attribute for b in branches] == ["then_branch", "else_branch"]
    for b in branches:
        g = graph.index_model(b.model)
        kinds = [block.kind for block in layer_blocks(g, dag_facts(g))]
        assert kinds == ["attention"] * 12 + ["mlp"] * 6


def test_a_graph_that_is_one_if_says_where_its_candidates_are(tmp_path: Path) -> None:
    # before: "1 nodes; candidates: none; chosen: 0", then the branches' lines and a table of their
    # pairs that did not say which branch each lies in (moonshine_tiny_decoder: 183 pairs, 2 branches)
    path = tmp_path / "one_if.onnx"
    onnx.save(if_model(rows=1, on_mean=True), path)
    done = run_cli("inspect", path, "--target", "host", "-q")
    assert done.returncode == 0, done.stderr
    found = "the main graph's 3 node(s) hold no candidate: its work lies inside If 'choose', whose 2 branch(es)"
    assert found in done.stdout and "candidate(s) there" in done.stdout
    a = analyse(path, target="host")
    rows = pair_rows(a.all_pairs(), places(a))
    assert rows[0][2] == "in" and {r[2] for r in rows[1:]} == {f"{b.branch.label}" for b in a.branches}
