"""Resource profile of each node and of a task (a set of nodes).

Engine class says which engine an op keeps busy on a Hexagon NPU: the matrix engine (HMX),
the vector engines (HVX) or the memory/DMA path. `engine_of` is the one table of it: the
lowering emits each op on the kernel engine of its class (lowering/lowerer.py). FLOPs and bytes are counted from static
shapes; a node whose shapes are not known is reported, not guessed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING

import onnx

from . import qdq
from .fused_work import Work, fused_work
from .graph import ModelGraph, TensorInfo, attribute

if TYPE_CHECKING:
    from .lowering.qeltwise import KernelPlan


class Engine(str, Enum):
    MATRIX = "matrix"
    VECTOR = "vector"
    MEMORY = "memory"
    NONE = "none"  # shape-only ops that move no data at run time


# Recurrent layers (speech models: Silero VAD, VoiceFilter-Lite): a matrix product per time step.
RECURRENT_OPS = ("LSTM", "GRU", "RNN", "DynamicQuantizeLSTM")
MATRIX_OPS = {
    "MatMul",
    "Gemm",
    "Conv",
    "ConvTranspose",
    "MatMulInteger",
    "QLinearMatMul",
    "QLinearConv",
    "ConvInteger",
    "Einsum",
    "Attention",
    "MultiHeadAttention",
    "GroupQueryAttention",
    "FusedMatMul",
    "FusedConv",
    "QAttention",
    "MatMulNBits",
    *RECURRENT_OPS,
}
MEMORY_OPS = {
    "Transpose",
    "Concat",
    "Slice",
    "Split",
    "Gather",
    "GatherElements",
    "GatherND",
    "Pad",
    "Resize",
    "Upsample",
    "Tile",
    "DepthToSpace",
    "SpaceToDepth",
    "ScatterND",
    "ScatterElements",
    "Copy",
    # The kernel has no aliasing view: inside a pair these are a real COPY, and cost one.
    "Reshape",
    "Squeeze",
    "Unsqueeze",
    "Flatten",
    "Identity",
}
# Ops that read only the part of their data input (input 0) they return: an embedding lookup reads
# the rows of its token ids, not the whole table.
GATHER_OPS = {"Gather", "GatherElements", "GatherND"}
# Not memory: Expand runs on the kernel as a broadcasting MUL by ones (lowering/layout.py), a vector op.
# Pure metadata: no data moves when these run (constants, shapes, inference-time no-ops).
NO_COST_OPS = {
    "Shape",
    "Size",
    "Constant",
    "ConstantOfShape",
    "Dropout",
}

# Vector FLOPs per output element, by op: transcendental ops cost more per element.
_VECTOR_FLOPS_PER_ELEMENT = {
    "Exp": 8,
    "Log": 8,
    "Sigmoid": 10,
    "Tanh": 10,
    "Erf": 10,
    "Gelu": 14,
    "FastGelu": 12,
    "Softmax": 12,
    "LogSoftmax": 14,
    "LayerNormalization": 8,
    "SimplifiedLayerNormalization": 6,
    "SkipLayerNormalization": 9,
    "RMSNormalization": 6,
    "BatchNormalization": 2,
    "InstanceNormalization": 8,
    "GroupNormalization": 8,
    "Sqrt": 4,
    "Reciprocal": 4,
    "Pow": 10,
    "HardSigmoid": 3,
    "HardSwish": 4,
    "Mish": 20,
    "Softplus": 10,
    "Elu": 8,
    "Selu": 8,
    "Div": 4,
    "Mod": 4,  # a division and a sign fix
    "QuantizeLinear": 3,  # divide, round, add the zero point (and saturate)
    "DequantizeLinear": 2,  # subtract the zero point, multiply
    "DynamicQuantizeLinear": 5,  # the range (2 compares), then QuantizeLinear's 3
}

# Vector FLOPs per output element of an interpolating Resize of the last two axes (the kernels' case): linear
# blends 2x2 taps by 3 lerps of 3 FLOPs (a + t * (b - a)), cubic 4x4 taps by 5 blends of 4 multiply-adds.
# Counted as 1 (an Add's), convnet_heads' seg_head/resize took 14.2 us of kernel item time for 8192 outputs
# where the calibrated fit predicted 2.0 us.
_RESIZE_FLOPS_PER_ELEMENT = {b"linear": 9, b"cubic": 40}


@dataclass(frozen=True)
class NodeProfile:
    node: int
    engine: Engine
    flops: float
    bytes_in: int
    bytes_out: int
    weight_bytes: int  # bytes of initializer inputs (streamed once)
    footprint: int  # on-chip working set: activations in and out of this op
    ddr_bytes: int = -1  # bytes to/from DDR; within a task, intermediates stay on chip
    int_bits: int = 0  # the op of a QDQ group: the integer width its work runs at (8, 16); 0 float
    op_type: str = ""  # the ONNX op type (the cost model's op class: costmodel.op_class)
    # A fused op's work as the program ops it lowers to run it, one engine each (attention: the
    # GEMMs on the matrix engine, softmax and rotary on the vectors, head layout on memory); a
    # task's ops list these in its place. Empty for an op of one engine.
    parts: tuple[NodeProfile, ...] = ()
    # The matrices of a batched MatMul (its output's batch elements): the kernel runs a GEMM call and at
    # least one work item per matrix (gpt_decode_step's decode scores, 16 heads' 1x32 @ 32x33: 16 items of
    # 0.3-0.5 us where one GEMM of its FLOPs would take 0.3 us in all)
    gemm_calls: int = 1

    def __post_init__(self) -> None:
        if self.ddr_bytes < 0:
            object.__setattr__(self, "ddr_bytes", self.bytes_in + self.bytes_out)

    @property
    def bytes(self) -> int:
        return self.bytes_in + self.bytes_out


@dataclass
class TaskProfile:
    """A task's aggregate: per-engine FLOPs and bytes, and its on-chip footprint."""

    nodes: list[int]
    ops: list[NodeProfile]
    flops: dict[Engine, float] = field(default_factory=dict)
    bytes: dict[Engine, float] = field(default_factory=dict)
    footprint: int = 0

    @classmethod
    def of(cls, ops: list[NodeProfile]) -> TaskProfile:
        """The task of these nodes' profiles (a fused op's parts stand in its place)."""
        nodes = [p.node for p in ops]
        ops = [part for p in ops for part in (p.parts or (p,))]
        t = cls(nodes=nodes, ops=ops)
        for e in Engine:
            t.flops[e] = sum(p.flops for p in ops if p.engine == e)
            t.bytes[e] = float(sum(p.bytes for p in ops if p.engine == e))
        t.footprint = max((p.footprint for p in ops), default=0)
        return t

    @property
    def total_flops(self) -> float:
        return sum(self.flops.values())

    @property
    def total_bytes(self) -> float:
        return sum(self.bytes.values())

    def scaled(self, fraction: float) -> TaskProfile:
        """The same task on a fraction of the batch (activations and FLOPs scale, weights do not)."""
        ops = [
            NodeProfile(
                p.node,
                p.engine,
                p.flops * fraction,
                int((p.bytes_in - p.weight_bytes) * fraction) + p.weight_bytes,
                int(p.bytes_out * fraction),
                p.weight_bytes,
                int(p.footprint * fraction),
                int((p.ddr_bytes - p.weight_bytes) * fraction) + p.weight_bytes,
                p.int_bits,
                p.op_type,
                gemm_calls=max(1, round(p.gemm_calls * fraction)),
            )
            for p in self.ops
        ]
        scaled = TaskProfile.of(ops)
        scaled.nodes = list(self.nodes)
        return scaled

    def dominant_engine(self) -> Engine:
        return max((Engine.MATRIX, Engine.VECTOR, Engine.MEMORY), key=lambda e: (self.flops[e], self.bytes[e]))


@dataclass
class GraphProfile:
    graph: ModelGraph
    nodes: dict[int, NodeProfile]
    unprofiled: dict[int, str]  # node id -> why it could not be profiled

    def task(self, node_ids: list[int]) -> TaskProfile | None:
        """The task's profile, or None when any of its nodes could not be profiled.

        Tensors made and used inside the task live in the on-chip arena, so an op's DDR
        traffic is its weights, the task's inputs it reads and the outputs that leave the task;
        a node lowered to nothing (`KernelPlan.absorbed`) moves its integer op's.
        """
        if any(i in self.unprofiled for i in node_ids):
            return None
        g, inside = self.graph, set(node_ids)
        ddr = {i: self._ddr(i, inside) for i in node_ids}
        for i, op in kernel_plan(g).absorbed.items():
            if i in inside and op in inside:
                ddr[op] += ddr.pop(i)
        return TaskProfile.of([_with_ddr(self.nodes[i], ddr.get(i, 0)) for i in node_ids])

    def shared_footprint(self, a: list[int], b: list[int]) -> int:
        """The on-chip bytes the footprints of tasks a and b both count for one tensor (`fits` counts
        them once): a run-time tensor both read is resident once. Fused, any op of one task may run
        beside any of the other; the two tasks' joint working set is the most, over such pairs, of
        their footprints less the bytes both read, and this is its shortfall from the sum."""
        reads_a, reads_b = self._activation_reads(a), self._activation_reads(b)
        both = {t for r in reads_a.values() for t in r} & {t for r in reads_b.values() for t in r}
        if not both:
            return 0
        most_a = max((self.nodes[i].footprint for i in reads_a), default=0)
        most_b = max((self.nodes[i].footprint for i in reads_b), default=0)
        joint = 0
        for i, ra in reads_a.items():
            for j, rb in reads_b.items():
                common = sum(min(ra[t], rb[t]) for t in both if t in ra and t in rb)
                joint = max(joint, self.nodes[i].footprint + self.nodes[j].footprint - common)
        return max(0, most_a + most_b - joint)

    def _activation_reads(self, nodes: list[int]) -> dict[int, dict[str, int]]:
        """Of each working node, the bytes of each run-time input its footprint counts (`profile_node`)."""
        g, out = self.graph, {}
        for i in nodes:
            if i not in self.nodes or self.nodes[i].footprint <= 0:
                continue
            n = g.nodes[i]
            out[i] = {
                t: int((g.info(t).nbytes or 0) * read_fraction(g, n, k))
                for k, t in enumerate(n.input)
                if t and t not in g.initializers and not _integer_constant(g, t)
            }
        return out

    def _ddr(self, i: int, inside: set[int]) -> int:
        """Node i's DDR traffic in a task of the nodes `inside`."""
        g, n = self.graph, self.graph.nodes[i]
        read = sum(
            int(_integer_bytes(g, t) * read_fraction(g, n, k))
            for k, t in enumerate(n.input)
            if t and t not in g.initializers and g.producer.get(t) not in inside
        )
        written = sum(
            g.info(t).nbytes or 0
            for t in n.output
            if t and (t in g.graph_outputs or any(c not in inside for c in g.consumers.get(t, ())))
        )
        return self.nodes[i].weight_bytes + read + written


def _integer_bytes(g: ModelGraph, t: str) -> int:
    """The bytes an op reads of tensor t: of a DequantizeLinear the lowering runs as nothing (one
    the task shares with the outside, `kinds.base.with_dequantize_copies`), its integer input's (an
    integer constant's are the op's weight bytes)."""
    d = g.producer.get(t)
    if d is None or d not in kernel_plan(g).absorbed or not qdq.is_dq(g, d):
        return g.info(t).nbytes or 0
    x = g.nodes[d].input[0]
    return 0 if x in g.initializers else g.info(x).nbytes or 0


def _with_ddr(p: NodeProfile, ddr: int) -> NodeProfile:
    """The profile with its DDR traffic in a task (a fused op's parts share it: `_share_ddr`)."""
    if not p.parts:
        return replace(p, ddr_bytes=ddr)
    return replace(p, ddr_bytes=ddr, parts=_share_ddr(p.parts, ddr))


def _share_ddr(parts: tuple[NodeProfile, ...], ddr: int) -> tuple[NodeProfile, ...]:
    """A fused op's DDR traffic over its parts by the bytes each moves (its copies read the op's
    inputs and write its outputs), all on the first when none moves any (GEMMs and vector ops)."""
    total = sum(part.bytes for part in parts)
    if not total:
        return tuple(replace(part, ddr_bytes=ddr if k == 0 else 0) for k, part in enumerate(parts))
    return tuple(replace(part, ddr_bytes=ddr * part.bytes // total) for part in parts)


def engine_of(node: onnx.NodeProto) -> Engine:
    if node.op_type in NO_COST_OPS:
        return Engine.NONE
    if node.op_type in MATRIX_OPS:
        return Engine.MATRIX
    if node.op_type == "Resize" and attribute(node, "mode", b"nearest") in (b"linear", b"cubic"):
        return Engine.VECTOR  # interpolation is arithmetic; nearest only moves data
    if node.op_type in MEMORY_OPS:
        return Engine.MEMORY
    return Engine.VECTOR


def engine_at_width(node: onnx.NodeProto, int_bits: int) -> Engine:
    """The engine class of a node computed at an integer width (0: in float). The Hexagon build runs
    8-bit matrix groups (QMATMUL, QCONV2D) on HVX with vrmpy: there is no HMX code (clang-19 has no
    public HMX ISA), so their work is vector work until there is. The lowering places them by it."""
    engine = engine_of(node)
    return Engine.VECTOR if engine == Engine.MATRIX and int_bits == 8 else engine


def _qoperator_bits(g: ModelGraph, n: onnx.NodeProto) -> int:
    """The integer width of a QLinearConv / QLinearMatMul (QOperator models) or a MatMulInteger /
    ConvInteger (dynamically quantised models): its input's."""
    if (
        n.op_type not in ("QLinearConv", "QLinearMatMul", "MatMulInteger", "ConvInteger")
        or g.info(n.input[0]).elem_type not in qdq.NARROW_INTS
    ):
        return 0
    return 8 * g.info(n.input[0]).itemsize


def profile_graph(g: ModelGraph) -> GraphProfile:
    nodes: dict[int, NodeProfile] = {}
    unprofiled: dict[int, str] = {}
    for i in range(len(g.nodes)):
        p = profile_node(g, i)
        if isinstance(p, str):
            unprofiled[i] = p
        else:
            nodes[i] = p
    return GraphProfile(g, nodes, unprofiled)


def unknown_shape_origins(g: ModelGraph, node_ids: list[int]) -> list[int]:
    """The nodes, among `node_ids`' producers, where unknown shapes start: every input's shape is
    known and an output's is not (an If's branches of two shapes, NonZero, a Reshape to computed
    dims). Input dims bound by --shape do not reach past them."""
    origins: list[int] = []
    seen: set[int] = set()
    todo = list(node_ids)
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        unknown_in = [t for t in g.nodes[i].input if t and not g.info(t).is_static]
        if unknown_in:
            todo += [g.producer[t] for t in unknown_in if t in g.producer]
        elif any(t and not g.info(t).is_static for t in g.nodes[i].output):
            origins.append(i)
    return sorted(origins)


def profile_node(g: ModelGraph, i: int) -> NodeProfile | str:
    """The node's profile, or a string saying why it cannot be profiled. The op of a QDQ group the
    lowering runs in integers counts its work at the group's integer width and its bytes at the
    integer tensors' widths (`kernel_widths`; the others: in f32, as lowered); its
    footprint stays in f32, since the kernel computes a group's op in f32 between its Q/DQ ops.
    A node the lowering runs as nothing (`kernel_plan`: the DequantizeLinear and QuantizeLinear
    nodes of a group it runs as one integer op, and a Relu/Clip QADD folds) costs nothing, fused or
    serial: its integer op reads and writes the integers, requantizing (QNN on the HTP folds them too)."""
    n = g.nodes[i]
    if i in kernel_plan(g).absorbed:  # lowered to nothing: its work is its integer op's
        return NodeProfile(i, Engine.NONE, 0.0, 0, 0, 0, 0, op_type=n.op_type)
    group = kernel_widths(g, i)
    int_bits = 8 * max(group.values(), default=0) or _qoperator_bits(g, n)
    engine = engine_at_width(n, int_bits)
    ins = [g.info(t) for t in n.input if t]
    # an optional output nobody reads (SkipLayerNormalization's mean) costs nothing, known shape or not
    outs = [g.info(t) for t in n.output if t and (g.consumers.get(t) or t in g.graph_outputs)]
    for t in ins + outs:
        if not t.is_static:
            return f"shape of '{t.name}' unknown ({_fmt_shape(t.shape)})"
    read = [read_fraction(g, n, k) for k, t in enumerate(n.input) if t]
    weights = [t.name in g.initializers or _integer_constant(g, t.name) for t in ins]
    weight_bytes = sum(int(_bytes(t, group) * f) for t, f, w in zip(ins, read, weights) if w)
    bytes_in = sum(int(_bytes(t, group) * f) for t, f in zip(ins, read))
    bytes_out = sum(_bytes(t, group) for t in outs)
    # the on-chip working set as today's kernel holds it: a group's float tensors in f32, except the
    # dequantized constants of integer ops, which QMATMUL/QCONV2D/QADD/... read from the program
    in_bytes = sum(int((t.nbytes or 0) * f) for t, f, w in zip(ins, read, weights) if not w)
    activation = in_bytes + sum(t.nbytes or 0 for t in outs)
    if engine == Engine.NONE or not outs:  # not outs: nothing reads it (a dead Conv the quantiser left)
        return NodeProfile(i, Engine.NONE, 0.0, 0, 0, 0, 0, op_type=n.op_type)
    flops = _flops(n, ins, outs)
    if flops is None:
        return f"FLOPs of {n.op_type} unknown"
    if i in kernel_plan(g).matrix:  # QMATMUL/QCONV2D requantize each output: its QuantizeLinear's work
        flops += sum(t.numel or 0 for t in outs) * _VECTOR_FLOPS_PER_ELEMENT["QuantizeLinear"]
    # Memory ops read and write every byte; matrix/vector ops stream weights once.
    node = NodeProfile(
        i,
        engine,
        float(flops),
        bytes_in,
        bytes_out,
        weight_bytes,
        activation,
        int_bits=int_bits,
        op_type=n.op_type,
        gemm_calls=_gemm_calls(n, outs),
    )
    work = fused_work(g, n)
    if not work:
        return node
    return replace(node, flops=sum(f for _, _, f, _ in work), parts=_parts(node, work))


def _gemm_calls(n: onnx.NodeProto, outs: list) -> int:
    """The matrices a MatMul multiplies (1 for any other op): its output's elements over one matrix's."""
    if n.op_type not in ("MatMul", "FusedMatMul", "MatMulInteger", "QLinearMatMul") or len(outs[0].shape) < 3:
        return 1
    return max(1, math.prod(outs[0].shape[:-2]))


def kernel_widths(g: ModelGraph, i: int) -> dict[str, int]:
    """`qdq.group_widths` as the lowering runs the group: in integers only where it lowers to one
    integer op (`kernel_plan`: QMATMUL/QCONV2D, a float weight there ORT's int8 of it; QADD, QLUT,
    the pools, a move on u16, ...); any other group's op in f32, between the DEQUANTIZE_LINEAR and
    QUANTIZE_LINEAR it pays (empty: a 16-bit Conv, Gemm, Add or Sigmoid, LayerNormalization,
    ConvTranspose, a MatMul's float weight, types ORT leaves)."""
    group = qdq.group_widths(g, i)
    plan = kernel_plan(g)
    if not group or i in plan.elementwise:
        return group
    if i not in plan.matrix:
        return {}
    n = g.nodes[i]
    return {**group, n.input[1]: 1} if n.input[1] in g.initializers else group


def kernel_plan(g: ModelGraph) -> KernelPlan:
    """How the lowering runs the model's QDQ groups (`qeltwise.model_plan`), made once per graph."""
    from .lowering.qeltwise import model_plan  # the lowering imports this module

    return model_plan(g)


def _integer_constant(g: ModelGraph, t: str) -> bool:
    """A DequantizeLinear's output of an initializer that only integer ops read (`kernel_plan`): an
    8-bit matrix group's weight or bias, which QMATMUL/QCONV2D read in integers as program constants
    (the DequantizeLinear lowers to nothing), so no f32 copy of it is on chip, and the op streams
    it (captcha_crnn_qdq_u8u8's LSTM input weights: 6.5 MB each in f32, which kept the two
    directions, 3.5 MB of scratch together, from pairing)."""
    d = g.producer.get(t)
    return d in kernel_plan(g).absorbed and all(x in g.initializers for x in g.nodes[d].input if x)


def read_fraction(g: ModelGraph, n: onnx.NodeProto, k: int) -> float:
    """The share of input k's bytes node n reads: a gather's data input as many elements as it
    returns (at most all of them); every other input all."""
    if n.op_type not in GATHER_OPS or k != 0:
        return 1.0
    data, out = g.info(n.input[0]).numel, g.info(n.output[0]).numel
    return min(1.0, out / data) if data and out is not None else 1.0


def _parts(node: NodeProfile, work: Work) -> tuple[NodeProfile, ...]:
    """NodeProfiles of a fused op's program ops (fused_work.py), each with the bytes it moves (a
    copy's work) and a share of the node's input and output bytes as its DDR traffic
    (`_share_ddr`): the node's inputs are read by its program ops, not copied once more."""
    parts = tuple(
        NodeProfile(node.node, Engine(name), flops, int(m) // 2, int(m) - int(m) // 2, 0, node.footprint, op_type=op)
        for name, op, flops, m in work
    )
    return _share_ddr(parts, node.ddr_bytes)


def _bytes(t: TensorInfo, group: dict[str, int]) -> int:
    """A tensor's bytes; a float tensor of a QDQ group at its integer width."""
    return (t.numel or 0) * group[t.name] if t.name in group else t.nbytes or 0


def _fmt_shape(shape: tuple | None) -> str:
    if shape is None:
        return "rank unknown"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _flops(n: onnx.NodeProto, ins: list, outs: list) -> float | None:
    op = n.op_type
    out_numel = sum(t.numel for t in outs)
    if op in ("MatMul", "MatMulInteger", "FusedMatMul", "QLinearMatMul", "MatMulNBits"):
        a = ins[0].shape
        k = a[-1] if len(a) >= 1 else 1
        if op == "QLinearMatMul":
            k = ins[0].shape[-1]
        return 2.0 * outs[0].numel * k
    if op == "Gemm":
        a = ins[0].shape
        k = a[0] if attribute(n, "transA", 0) else a[-1]
        return 2.0 * outs[0].numel * k + (outs[0].numel if len(ins) > 2 else 0)
    if op in ("Conv", "ConvInteger", "QLinearConv", "FusedConv"):
        w = ins[3].shape if op == "QLinearConv" else ins[1].shape
        per_output = math.prod(w[1:])  # (Cin/group) * kernel size
        return 2.0 * outs[0].numel * per_output
    if op == "ConvTranspose":
        w = ins[1].shape  # [Cin, Cout/group, k...]
        return 2.0 * ins[0].numel * math.prod(w[1:])
    if op == "Einsum":
        return 2.0 * max(out_numel, 1) * max(t.numel for t in ins) ** 0.5
    if op == "QAttention" or op == "Attention" and n.domain == "com.microsoft":
        return _projected_attention_flops(ins)
    if op in RECURRENT_OPS:  # every step of every sequence multiplies by W (input) and R (hidden state)
        x, w, r = ins[0], ins[1], ins[2]
        return 2.0 * (x.numel // max(1, x.shape[-1])) * (w.numel + r.numel)
    if engine_of(n) == Engine.MEMORY:
        return 0.0
    if op in ("MaxPool", "AveragePool", "LpPool"):  # one step per window element of every output
        return float(outs[0].numel * math.prod(attribute(n, "kernel_shape", [1])))
    if op == "Resize":  # an interpolating one (a nearest Resize is a memory op)
        return float(out_numel * _RESIZE_FLOPS_PER_ELEMENT[attribute(n, "mode", b"nearest")])
    # Vector ops: element count of the larger side times a per-element cost.
    elements = max(out_numel, max((t.numel for t in ins), default=0))
    return float(elements * _VECTOR_FLOPS_PER_ELEMENT.get(op, 1))


def _projected_attention_flops(ins: list) -> float:
    """com.microsoft Attention and QAttention (not lowered): QK^T and AV plus the QKV projection."""
    b, s, hidden = ins[0].shape[0], ins[0].shape[1], ins[0].shape[-1]
    w = ins[1].shape  # [hidden, 3*hidden]
    return 4.0 * b * s * s * hidden + 2.0 * b * s * w[0] * w[-1]
