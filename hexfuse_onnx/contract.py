"""The FusedHexPair contract between the graph pass and the kernel (docs/DESIGN.md).

One place for every name both sides agree on, so the pass, `unfuse`, the lowering and the
custom-op library cannot drift apart.
"""

from __future__ import annotations

DOMAIN = "hexfuse"
OP_TYPE = "FusedHexPair"
DOMAIN_VERSION = 1

# Node attributes. The function body stays the source of truth; these describe it.
ATTR_KIND = "kind"  # string: the pair kind (a name in hexfuse_onnx.kinds.KINDS)
ATTR_NUM_INPUTS_A = "num_inputs_a"  # int: inputs [0, n) belong to task A, the rest to B
ATTR_NUM_OUTPUTS_A = "num_outputs_a"  # int: outputs [0, n) belong to task A, the rest to B
ATTR_NUM_NODES_A = "num_nodes_a"  # int: nodes [0, n) of the program's function (PairKind.program_function) are A
ATTR_SHARE_A = "share_a"  # float in (0, 1): task A's share of the vector workers
ATTR_ONCHIP_A = "onchip_bytes_a"  # int: on-chip (VTCM) budget of task A
ATTR_ONCHIP_B = "onchip_bytes_b"  # int: on-chip (VTCM) budget of task B
ATTR_TARGET = "target"  # string: the cost-model target the estimates are for
ATTR_EST_SERIAL_US = "est_serial_us"  # float: predicted A then B, microseconds
ATTR_EST_FUSED_US = "est_fused_us"  # float: predicted fused time at share_a
ATTR_MICROBATCH_SIZES = "microbatch_sizes"  # ints [a, b]: rows of the batch axis per task
ATTR_PROGRAM = "program"  # bytes (string attr): the task program, filled by hexfuse_onnx/lowering/
ATTR_PROGRAM_VERSION = "program_version"  # int: format version of `program`
# Optional, together: shares per shape bucket (buckets.py). Keys: the node's input elements per
# bucket, ascending; the kernel runs a call at the share of the nearest key (log scale).
ATTR_SHARE_BUCKETS = "share_buckets"  # ints
ATTR_SHARE_TABLE = "share_table"  # floats in [0, 1], one per key

# Model metadata of a rewrite over symbolic dims: JSON {"analysed": {input: dims}, "proven":
# {input: dims}}, the bindings its v2 programs were lowered and proven at, so they lower again there.
METADATA_BINDINGS = "hexfuse.bindings"
# Model metadata of a written rewrite: JSON of what it was verified against (verify.Comparison.as_json)
# with the stock bar `rtol`; a float model's plugin run says its error and bar (pipeline._within_spread).
METADATA_VERIFICATION = "hexfuse.verification"
# Model metadata of a rewrite: the main graph's node order as read, which unfuse restores (node_order.py).
METADATA_NODE_ORDER = "hexfuse.node_order"

# Version of the task program format the pass writes (dsp/README.md documents it).
PROGRAM_VERSION = 1

NODE_ATTRIBUTES = (
    ATTR_KIND,
    ATTR_NUM_INPUTS_A,
    ATTR_NUM_OUTPUTS_A,
    ATTR_NUM_NODES_A,
    ATTR_SHARE_A,
    ATTR_ONCHIP_A,
    ATTR_ONCHIP_B,
    ATTR_TARGET,
    ATTR_EST_SERIAL_US,
    ATTR_EST_FUSED_US,
    ATTR_MICROBATCH_SIZES,
    ATTR_PROGRAM,
    ATTR_PROGRAM_VERSION,
    ATTR_SHARE_BUCKETS,
    ATTR_SHARE_TABLE,
)
