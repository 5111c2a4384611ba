"""What a QDQ model asks of a quantized kernel: its QDQ groups, the ops inside them, their integer
widths, and what `python -m hexfuse_onnx inspect` makes of the model today.

A QDQ group is one compute node whose every tensor input comes from a DequantizeLinear (of an
activation, or of a constant: a weight or an int32 bias) and whose every output goes only to
QuantizeLinear nodes: the unit a quantized task runs, and that a pair must never split.

    python -m models quantized analyse [NAMES...|--all] [--cache-dir DIR]
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import onnx
from onnx import numpy_helper

QDQ_OPS = ("QuantizeLinear", "DequantizeLinear")
_SHORT = {"uint8": "u8", "int8": "i8", "uint16": "u16", "int16": "i16", "int32": "i32"}


@dataclass
class Analysis:
    nodes: int
    ops: Counter[str]  # op type -> count, every node
    groups: Counter[str]  # "Conv u8 x w:u8 b:i32 -> u8" -> count
    ungrouped: Counter[str]  # compute op types outside any group
    per_channel_weights: int
    qdq_domains: set[str]  # "ai.onnx", or "com.microsoft" (16-bit Q/DQ below opset 21)
    candidates: int = 0
    pairs: int = 0
    rejected: Counter[str] = field(default_factory=Counter)  # reason, first clause -> count

    @property
    def group_count(self) -> int:
        return sum(self.groups.values())


def _width(model_inits: dict[str, onnx.TensorProto], node: onnx.NodeProto) -> str:
    """The integer type of a Q or DQ node: its zero point's, or its quantized input's."""
    zp = node.input[2] if len(node.input) > 2 and node.input[2] else None
    if zp and zp in model_inits:
        dtype = onnx.helper.tensor_dtype_to_np_dtype(model_inits[zp].data_type)
        return _SHORT.get(str(dtype), str(dtype))
    if node.op_type == "DequantizeLinear" and node.input[0] in model_inits:
        dtype = onnx.helper.tensor_dtype_to_np_dtype(model_inits[node.input[0]].data_type)
        return _SHORT.get(str(dtype), str(dtype))
    return "u8"  # QuantizeLinear's default output type without a zero point


def _constant_kind(inits: dict[str, onnx.TensorProto], dq: onnx.NodeProto) -> str:
    """'w:' a weight (a constant of rank >= 2), 'b:' an int32 bias, 'c:' another constant, '' an activation."""
    const = inits.get(dq.input[0])
    if const is None:
        return ""
    if len(const.dims) >= 2:
        return "w:"
    return "b:" if const.data_type == onnx.TensorProto.INT32 else "c:"


def analyse_model(model: onnx.ModelProto) -> Analysis:
    inits = {t.name: t for t in model.graph.initializer}
    producer = {out: n for n in model.graph.node for out in n.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for n in model.graph.node:
        for name in n.input:
            consumers.setdefault(name, []).append(n)
    outputs = {o.name for o in model.graph.output}
    constants = {n.output[0] for n in model.graph.node if n.op_type == "Constant"}  # axes, shapes: not data
    groups: Counter[str] = Counter()
    ungrouped: Counter[str] = Counter()
    per_channel = 0
    for n in model.graph.node:
        if (
            n.op_type == "DequantizeLinear"
            and n.input[0] in inits
            and numpy_helper.to_array(inits[n.input[1]]).size > 1
        ):
            per_channel += 1
        if n.op_type in QDQ_OPS or n.op_type == "Constant":
            continue
        feeds = [producer.get(i) for i in n.input if i and i not in inits and i not in constants]
        takers = [c for o in n.output for c in consumers.get(o, [])]
        grouped = (
            feeds
            and all(f is not None and f.op_type == "DequantizeLinear" for f in feeds)
            and takers
            and all(t.op_type == "QuantizeLinear" for t in takers)
            and not any(o in outputs for o in n.output)
        )
        if not grouped:
            ungrouped[n.op_type] += 1
            continue
        ins = []
        for f in feeds:
            ins.append(_constant_kind(inits, f) + _width(inits, f))
        out = sorted({_width(inits, t) for t in takers})
        groups[f"{n.op_type} {' x '.join(ins)} -> {'/'.join(out)}"] += 1
    ops = Counter(n.op_type for n in model.graph.node)
    domains = {n.domain or "ai.onnx" for n in model.graph.node if n.op_type in QDQ_OPS}
    return Analysis(len(model.graph.node), ops, groups, ungrouped, per_channel, domains)


def add_inspect(analysis: Analysis, path: Path) -> None:
    """Runs `python -m hexfuse_onnx inspect --json` on `path` and records candidates, pairs, rejections."""
    with tempfile.TemporaryDirectory(prefix="hexfuse-qdq-") as folder:
        report = Path(folder) / "inspect.json"
        cmd = [sys.executable, "-m", "hexfuse_onnx", "inspect", "-q", str(path), "--json", str(report)]
        done = subprocess.run(cmd, check=False, capture_output=True, text=True)
        if done.returncode != 0:
            analysis.rejected[f"inspect exits {done.returncode}: {done.stderr.strip().splitlines()[-1:]}"] += 1
            return
        doc = json.loads(report.read_text())
    analysis.candidates = doc["candidates"]
    analysis.pairs = len(doc["pairs"])
    for r in doc["rejected"]:
        analysis.rejected[_reason(r["reason"])] += 1


def _reason(reason: str) -> str:
    """A rejection reason without its node's name.

    "does not lower: QuantizeLinear: op is outside the kernel's op set" stays as it is.
    """
    match = re.match(r"(.*?)cannot lower (\S+) node '[^']*': (.*)", reason)
    return f"{match[1]}{match[2]}: {match[3]}" if match else reason


def lines(name: str, a: Analysis) -> list[str]:
    compute = {k: v for k, v in a.ops.items() if k not in QDQ_OPS}
    out = [
        (
            f"## {name}: {a.nodes} nodes, QuantizeLinear {a.ops['QuantizeLinear']}, DequantizeLinear "
            f"{a.ops['DequantizeLinear']}, QLinear* {sum(v for k, v in a.ops.items() if k.startswith('QLinear'))}, "
            f"Q/DQ domains {'/'.join(sorted(a.qdq_domains))}, per-channel weight DQ {a.per_channel_weights}"
        ),
        f"compute ops: {', '.join(f'{k} {v}' for k, v in sorted(compute.items(), key=lambda kv: -kv[1]))}",
        f"QDQ groups: {a.group_count}; outside groups: "
        + (", ".join(f"{k} {v}" for k, v in a.ungrouped.most_common()) or "none"),
    ]
    out += [f"  {v:4d}  {k}" for k, v in sorted(a.groups.items(), key=lambda kv: (-kv[1], kv[0]))]
    out.append(
        f"inspect: {a.candidates} candidate(s), {a.pairs} pair(s); rejected: "
        + (", ".join(f"{v} {k}" for k, v in a.rejected.most_common()) or "none")
    )
    return out


def steps_of(model: onnx.ModelProto) -> dict[str, float]:
    """The quantization step of every tensor a DequantizeLinear with a per-tensor scale makes."""
    inits = {t.name: t for t in model.graph.initializer}
    steps = {}
    for n in model.graph.node:
        if n.op_type == "DequantizeLinear" and n.input[1] in inits:
            s = numpy_helper.to_array(inits[n.input[1]])
            if s.size == 1:
                steps[n.output[0]] = float(s.reshape(()))
    return steps
