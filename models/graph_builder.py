"""A small helper that builds an ONNX graph node by node with the zoo's conventions.

Every zoo model is built with a `GraphBuilder`: it names node outputs after the node
(`"<node name>_out"`, or explicit names for graph outputs), draws weights from one seeded
`numpy.random.Generator` in a fixed order (so a seed gives byte-identical models), rejects
duplicate node and tensor names, and writes the model with the zoo's opsets and IR version.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 10
OPSET = 18  # default (ai.onnx) domain
MS_DOMAIN = "com.microsoft"
MS_OPSET = 1
PRODUCER = "hexfuse-onnx models"


class GraphBuilder:
    """Collects inputs, initializers, nodes and outputs, then makes the ModelProto.

    Lists are appended to and handed to the proto once at the end, so building a graph
    of n nodes costs O(n).
    """

    def __init__(self, name: str, seed: int, doc: str = "") -> None:
        self.name = name
        self.doc = doc
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self._node_names: set[str] = set()
        self._tensor_names: set[str] = set()
        self._domains: set[str] = set()

    # -- tensors -------------------------------------------------------------------
    def _claim_tensor(self, name: str) -> str:
        if not name:
            raise ValueError("tensor name must not be empty")
        if name in self._tensor_names:
            raise ValueError(f"duplicate tensor name {name!r}")
        self._tensor_names.add(name)
        return name

    def input(self, name: str, shape: Sequence[int]) -> str:
        """Declares an fp32 graph input with a static shape."""
        self.inputs.append(helper.make_tensor_value_info(self._claim_tensor(name), TensorProto.FLOAT, list(shape)))
        return name

    def output(self, name: str, shape: Sequence[int]) -> str:
        """Declares an existing tensor (a node output) as an fp32 graph output."""
        if name not in self._tensor_names:
            raise ValueError(f"graph output {name!r} is not produced by any node")
        self.outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
        return name

    def const(self, name: str, array: np.ndarray) -> str:
        """Adds an initializer holding `array` (its dtype is kept)."""
        self.initializers.append(numpy_helper.from_array(np.asarray(array), self._claim_tensor(name)))
        return name

    def ints(self, name: str, values: Sequence[int]) -> str:
        """Adds an int64 1-D initializer (shapes for Reshape, axes, ...)."""
        return self.const(name, np.asarray(values, dtype=np.int64))

    def scalar(self, name: str, value: float) -> str:
        """Adds an fp32 scalar initializer."""
        return self.const(name, np.asarray(value, dtype=np.float32))

    def weight(self, name: str, shape: Sequence[int], fan_in: int | None = None) -> str:
        """Adds an fp32 weight drawn from N(0, 1/fan_in): activations keep their scale.

        `fan_in` defaults to shape[0] for 2-D weights ([K, N] MatMul layout) and to
        prod(shape[1:]) otherwise (Conv [Cout, Cin, kh, kw] and Gemm transB [N, K]).
        """
        if fan_in is None:
            fan_in = shape[0] if len(shape) == 2 else int(np.prod(shape[1:]))
        w = self.rng.standard_normal(tuple(shape)).astype(np.float32) / np.float32(np.sqrt(fan_in))
        return self.const(name, w)

    def bias(self, name: str, shape: Sequence[int] | int, scale: float = 0.02) -> str:
        """Adds a small fp32 bias drawn from N(0, scale^2)."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return self.const(name, (self.rng.standard_normal(shape) * scale).astype(np.float32))

    # -- nodes ---------------------------------------------------------------------
    def op(
        self,
        op_type: str,
        inputs: Sequence[str],
        name: str,
        *,
        outputs: int | Sequence[str] = 1,
        domain: str = "",
        **attrs,
    ) -> str | list[str]:
        """Adds one node named `name`; returns its output name (or names if several).

        `outputs` is either a count (outputs are named `<name>_out`, `<name>_out1`, ...)
        or a list of explicit names (use it for graph outputs; "" skips an optional output).
        """
        if name in self._node_names:
            raise ValueError(f"duplicate node name {name!r}")
        self._node_names.add(name)
        if isinstance(outputs, int):
            outputs = [f"{name}_out" if i == 0 else f"{name}_out{i}" for i in range(outputs)]
        outs = [self._claim_tensor(o) if o else "" for o in outputs]
        if domain:
            self._domains.add(domain)
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=name, domain=domain, **attrs))
        return outs[0] if len(outs) == 1 else outs

    # -- result --------------------------------------------------------------------
    def model(self) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, self.name, self.inputs, self.outputs, self.initializers, doc_string=self.doc
        )
        opsets = [helper.make_opsetid("", OPSET)]
        if MS_DOMAIN in self._domains:
            opsets.append(helper.make_opsetid(MS_DOMAIN, MS_OPSET))
        unknown = self._domains - {MS_DOMAIN}
        if unknown:
            raise ValueError(f"unexpected op domains {sorted(unknown)}")
        model = helper.make_model(graph, opset_imports=opsets, producer_name=PRODUCER, ir_version=IR_VERSION)
        return model
