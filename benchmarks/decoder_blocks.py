"""Which attention and MLP blocks of the exported decoders fuse, and what blocks the rest?

    python benchmarks/decoder_blocks.py [--prefill-past 4] [--plugin] [--models gpt2_dynamo,...]

For each decoder in models/exported/ (at a request of 8 tokens after 16 cached): the attention
and MLP blocks `kinds.blocks` recognises and the ops inside them outside the kernel's op set.
Then its prefill+decode graph (`models.exported.prefill_decode_model`: a prefill of 8 tokens
after --prefill-past cached ones, and a one-token decode after 16) is rewritten with the
prefill_decode kind alone: the pairs fused (verified on stock ORT, and with the plugin on the
host kernel with --plugin), and why each other candidate was refused. No timing.

The decoders are miniatures (hidden 64): a pair saves tens of microseconds, less than a Hexagon
kernel call (100 us), so at the target's own call overhead every pair is refused for it. To see
what lowers, count the call as free: HEXFUSE_CALL_OVERHEAD_US=0 python benchmarks/decoder_blocks.py
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import onnx  # noqa: E402

from hexfuse_onnx import graph, pipeline  # noqa: E402
from hexfuse_onnx.errors import HexfuseError  # noqa: E402
from hexfuse_onnx.kinds.blocks import layer_blocks  # noqa: E402
from hexfuse_onnx.kinds.dag import dag_facts  # noqa: E402
from hexfuse_onnx.lowering import op_outside_kernel  # noqa: E402
from models.exported import MODELS, decoder_spec, input_shapes, prefill_decode_model, prefill_decode_shapes  # noqa: E402

SEQ, PAST = 8, 16


def blocks_line(name: str) -> str:
    path = MODELS[name].path
    g = graph.load(path, input_shapes(decoder_spec(path), SEQ, PAST))
    blocks = layer_blocks(g, dag_facts(g))
    kinds = Counter(b.kind for b in blocks)
    refused = Counter(g.nodes[i].op_type for b in blocks for i in b.nodes if op_outside_kernel(g.nodes[i]))
    ops = ", ".join(f"{op} {n}" for op, n in refused.most_common()) or "none"
    return f"{name}: {kinds['attention']} attention + {kinds['mlp']} MLP blocks; ops outside the kernel: {ops}"


def pairs_lines(name: str, prefill_past: int, plugin: bool, folder: Path) -> list[str]:
    path = folder / f"{name}.prefill_decode.onnx"
    onnx.save(prefill_decode_model(MODELS[name].path), path)
    shapes = prefill_decode_shapes(decoder_spec(MODELS[name].path), SEQ, PAST, prefill_past)
    try:
        result = pipeline.rewrite(
            path, folder / f"{name}.fused.onnx", kinds=["prefill_decode"], shapes=shapes, verify_plugin=plugin
        )
    except HexfuseError as exc:
        return [f"  rewrite failed: {exc}"]
    fused = sorted(p.candidate.note.split(":")[0] for p in result.analysis.pairs)
    lines = [f"  fused {len(fused)}/{len(result.analysis.candidates)}: {', '.join(fused) or 'none'}"]
    lines += [f"  refused {r.candidate.note.split(':')[0]}: {r.reason}" for r in result.analysis.rejected]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prefill-past", type=int, default=4, help="cached tokens before the prefill (0: empty cache)")
    ap.add_argument("--plugin", action="store_true", help="also verify with the plugin on the host kernel")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated decoder names")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            print(blocks_line(name))
            print("\n".join(pairs_lines(name, args.prefill_past, args.plugin, Path(tmp))))


if __name__ == "__main__":
    main()
