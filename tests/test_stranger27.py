"""What a twenty-seventh stranger hit with new real models (models/real.py's ppocrv5_det_mobile and
the rest): a small builder reproducing each."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from hexfuse_onnx import pipeline
from hexfuse_onnx.rewrite import unfuse

RNG = np.random.default_rng(27)


def _upsampled_branches() -> onnx.ModelProto:
    """Two branches from x, each a Conv then a nearest Resize by scales reading an empty `roi`
    initializer: paddle2onnx's FPN upsampling in PP-OCRv5's text detector."""
    c = 8
    inits = [
        numpy_helper.from_array(np.zeros([0], np.float32), "roi"),
        numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
    ]
    nodes, outputs = [], []
    for t in "ab":
        inits.append(numpy_helper.from_array((RNG.standard_normal([c, c, 3, 3]) * 0.1).astype(np.float32), f"w{t}"))
        nodes += [
            helper.make_node("Conv", ["x", f"w{t}"], [f"c{t}"], pads=[1, 1, 1, 1], name=f"conv_{t}"),
            helper.make_node("Resize", [f"c{t}", "roi", "scales"], [f"y{t}"], mode="nearest", name=f"up_{t}"),
        ]
        outputs.append(helper.make_tensor_value_info(f"y{t}", TensorProto.FLOAT, [1, c, 64, 64]))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 32, 32])
    g = helper.make_graph(nodes, "upsampled", [x], outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def _unread_initializers(m: onnx.ModelProto) -> list[str]:
    read = {t for n in m.graph.node for t in n.input}
    return [t.name for t in m.graph.initializer if t.name not in read]


def test_rewrite_leaves_no_unread_empty_initializer_and_unfuse_restores_it(tmp_path: Path) -> None:
    """v5det.fused.onnx kept the six empty Resize roi initializers its pair bodies had copied into
    Constants, read by no node: ONNX Runtime warned 'Removing initializer' six times at every load."""
    src, out = tmp_path / "m.onnx", tmp_path / "m.fused.onnx"
    model = _upsampled_branches()
    onnx.save(model, src)
    result = pipeline.rewrite(src, out, kinds=["branches"])
    assert result.output == out, result.analysis
    fused = onnx.load(out)
    assert any(n.op_type == "FusedHexPair" for n in fused.graph.node)
    assert _unread_initializers(fused) == []
    restored = unfuse(fused)
    assert [(n.op_type, list(n.input)) for n in restored.graph.node] == [
        (n.op_type, list(n.input)) for n in model.graph.node
    ]
    assert "roi" in {t.name for t in restored.graph.initializer}
    x = RNG.standard_normal([1, 8, 32, 32]).astype(np.float32)
    want = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for m in (fused, restored):
        got = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
        for w, g in zip(want, got):
            np.testing.assert_array_equal(w, g)
