"""How long does `rewrite --verify plugin` spend verifying, and on what? One rewrite of a model.

    python benchmarks/verify_speed.py MODEL [--rtol 0] [--overhead-us 0]

MODEL is a file or a quantized zoo name (`models.quantized`). The rewrite runs as
`HEXFUSE_CALL_OVERHEAD_US=0 python -m hexfuse_onnx rewrite MODEL --verify plugin --rtol 0` does,
writing to a temporary folder, and prints its wall time, the verifications of a whole rewritten
model (`pipeline._verify` calls), the ONNX Runtime sessions made (of the original, of a whole
rewritten model, of a small model of pairs alone: `hexfuse_onnx/alone.py`), the pairs kept and the
rejections by reason. Counts, not seconds, are what to compare across machines.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import onnx  # noqa: E402

from hexfuse_onnx import contract as C  # noqa: E402
from hexfuse_onnx import pipeline, verify  # noqa: E402


def _source(name: str) -> Path:
    if Path(name).is_file():
        return Path(name)
    from models import quantized

    return quantized.fetch(name)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--rtol", type=float, default=0.0)
    p.add_argument("--overhead-us", default="0", help="HEXFUSE_CALL_OVERHEAD_US (default 0, as the zoo rows)")
    args = p.parse_args(argv)
    os.environ["HEXFUSE_CALL_OVERHEAD_US"] = args.overhead_us
    src = _source(args.model)
    half = len(onnx.load(str(src), load_external_data=False).graph.node) // 2  # fewer nodes: pairs alone
    sessions: Counter[str] = Counter()
    verified = 0
    real_session, real_verify = verify.session, pipeline._verify

    def session(model: Any, extra: Any = None) -> Any:
        proto = onnx.load_from_string(model) if isinstance(model, bytes) else onnx.load(str(model))
        nodes = proto.graph.node
        kind = "original" if not any(n.domain == C.DOMAIN for n in nodes) else "rewritten"
        sessions[f"{kind} (pairs alone)" if kind == "rewritten" and len(nodes) < half else kind] += 1
        return real_session(model, extra)

    def counted(*a: Any, **k: Any) -> Any:
        nonlocal verified
        verified += 1
        return real_verify(*a, **k)

    verify.session = session  # type: ignore[assignment]
    pipeline.ort_session = session
    pipeline._verify = counted  # type: ignore[assignment]
    with tempfile.TemporaryDirectory(prefix="hexfuse_verify_speed_") as tmp:
        t0 = time.perf_counter()
        r = pipeline.rewrite(src, Path(tmp) / "fused.onnx", rtol=args.rtol, verify_plugin=True)
        wall = time.perf_counter() - t0
    kept = sorted(f"{x.kind} ({x.candidate.note})" for x in r.analysis.all_pairs()) if r.output else []
    reasons = Counter(x.reason.split(":")[0] for x in r.analysis.all_rejected())
    made = dict(sorted(sessions.items()))
    print(f"{args.model}: {wall:.1f} s, {verified} verifications of a whole model, sessions {made}")
    print(f"kept {len(kept)}: " + "; ".join(kept))
    print("rejected: " + "; ".join(f"{n} {why}" for why, n in reasons.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
