"""Per quantized model: two requests of it side by side (`colocate --requests 2`) at the default
hexagon-v73 target (its 100 us call overhead counted), the plugin verified, then every pair under qemu.

    python benchmarks/quantized_requests.py                   # every cached quantized model, smallest first
    python benchmarks/quantized_requests.py --models ppocr_cls_qdq_u8u8 --timeout 900

Each model runs the CLI as a user would, one subprocess per step, each time-boxed by --timeout:
`colocate M --requests 2 --verify plugin -o M.x2.onnx` then `emulate M.x2.onnx --arch v73 --seed 3`.
Columns: pairs; the modelled gain of the two streams co-located over one after the other and the
share of their serial time inside pairs (`colocate`'s own figures); the plugin's worst pair output
against ORT running the merged model as written (verify.exact_qdq_options), in quantization steps
(quantized_pairs.worst_steps, seed 3, at the shapes the pass analysed); every pair bit-exact under
qemu against the host kernel, and qemu's executed packets serial / fused summed over the pairs; why
candidates were refused (`colocate`'s lines) or why a step failed (its error line). No timing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from subprocess import PIPE

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from quantized_pairs import DERIVED, model_paths, worst_steps  # noqa: E402

from hexfuse_onnx import colocate, costmodel, graph, verify  # noqa: E402
from hexfuse_onnx.lowering import attach_programs  # noqa: E402
from hexfuse_onnx.qdq import split_group  # noqa: E402
from hexfuse_onnx.tools.zoo import list_models  # noqa: E402

# shipped int8 models of the zoo (its entry fixes their symbolic dims), beside quantized_pairs' models
SHIPPED = ("ddddocr_ocr_int8", "t5_small_int8_encoder", "t5_small_int8_decoder")

REPO = Path(__file__).resolve().parents[1]


def cli(args: list[str], timeout: float) -> tuple[int | None, str, str]:
    """Exit code (None: timed out), stdout and stderr of `python -m hexfuse_onnx ARGS` at nice 19,
    with the target's own call overhead (not the tests' 0)."""
    env = {k: v for k, v in os.environ.items() if k != costmodel.CALL_OVERHEAD_ENV}
    cmd = ["nice", "-n", "19", sys.executable, "-m", "hexfuse_onnx", *args, "-q"]
    # its own process group: a timeout ends qemu-hexagon too, not only the Python that started it
    with subprocess.Popen(cmd, cwd=REPO, env=env, stdout=PIPE, stderr=PIPE, text=True, start_new_session=True) as p:
        try:
            stdout, stderr = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            return None, "", ""
    return p.returncode, stdout, stderr


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def plugin_steps(merged: onnx.ModelProto, fused_path: Path, binding: dict | None, tmp: Path) -> float:
    """The plugin's worst pair output, in steps, against ORT running the merged model as written."""
    fused, failed = attach_programs(onnx.load(fused_path))
    if failed:
        raise RuntimeError(f"no program: {failed}")
    typed = onnx.ModelProto()
    typed.CopyFrom(merged)
    typed.graph.value_info.extend(fused.graph.value_info)
    onnx.save(typed, tmp / "typed.onnx")
    feeds = verify.random_inputs(verify.session(tmp / "typed.onnx"), (binding or {}).get("inputs"), seed=3)
    return worst_steps(fused, typed, feeds)["matmulnbits f32"]


def split_groups(merged: onnx.ModelProto, pairs: list[dict], tmp: Path) -> list[str]:
    """Why any task of the chosen pairs splits a QDQ group of the merged model (none should)."""
    onnx.save(merged, tmp / "merged.onnx")
    g = graph.load(tmp / "merged.onnx")
    index = {n.name or n.output[0]: i for i, n in enumerate(g.nodes)}
    tasks = [[index[n] for n in p[side]["nodes"]] for p in pairs for side in ("task_a", "task_b")]
    return [why for t in tasks if (why := split_group(g, t))]


def best_refused(doc: dict) -> list[str]:
    """The largest saving a pair refused for its call would have made, as the pass put it."""
    savings = [m for r in doc["rejected"] if (m := re.search(r"fusing saves ([\d.]+) us of ([\d.]+) us", r["reason"]))]
    if not savings:
        return []
    best = max(savings, key=lambda m: float(m[1]))
    return [f"best refused pair saves {best[1]} us of {best[2]} us (a call: 100 us)"]


def run(name: str, src: Path, tmp: Path, timeout: float, emulate: bool, freeze: bool = False) -> dict:
    row: dict = {"model": name}
    out, report = tmp / f"{name}.x2.onnx", tmp / f"{name}.json"
    model = name if name in DERIVED + SHIPPED else str(src)  # a zoo name: with the zoo's input dims
    args = ["colocate", model, "--requests", "2", "--verify", "plugin", "-o", str(out), "--json", str(report)]
    code, stdout, stderr = cli(args + (["--freeze-shapes"] if freeze else []), timeout)
    if code is None:
        return {**row, "notes": [f"colocate timed out after {timeout:.0f} s"]}
    if code != 0:
        return {**row, "notes": [f"colocate exit {code}: {last_line(stderr)}"]}
    doc = json.loads(report.read_text())
    modelled = doc["colocate"]["modelled"] or {}
    row.update(pairs=len(doc["pairs"]), gain=modelled.get("gain"), coverage=modelled.get("coverage"))
    row["serial_us"] = modelled.get("serial_us")
    row["refused"] = [line for line in stdout.splitlines() if line.startswith("rejected")] + best_refused(doc)
    if not doc["pairs"]:
        return row
    merged = colocate.merge([src], 2).model
    row["split"] = split_groups(merged, doc["pairs"], tmp)
    try:
        row["steps"] = plugin_steps(merged, out, doc.get("binding"), tmp)
    except Exception as exc:  # noqa: BLE001 - one model's failure is a row of the table, not the end of it
        row["notes"] = [f"plugin steps not measured: {type(exc).__name__}: {str(exc)[:120]}"]
    if not emulate:
        return row
    em = tmp / f"{name}.emulate.json"
    code, _, stderr = cli(["emulate", str(out), "--arch", "v73", "--seed", "3", "--json", str(em)], timeout)
    if code is None or not em.is_file():
        why = f"emulate timed out after {timeout:.0f} s" if code is None else f"emulate exit {code}"
        return {**row, "notes": row.get("notes", []) + [why]}
    pairs = json.loads(em.read_text())["pairs"]
    row["bit_exact"] = all(p["bit_exact"] for p in pairs)
    row["packets"] = [sum(p["stats"]["runs"][r]["call_packets"] for p in pairs) for r in ("serial", "fused")]
    if code != 0:
        row["notes"] = row.get("notes", []) + [f"emulate exit {code}: {last_line(stderr)}"]
    return row


def cell(row: dict) -> str:
    pct = lambda v: "-" if v is None else f"{v:.1%}"  # noqa: E731
    us = "-" if row.get("serial_us") is None else f"{row['serial_us']:.0f}"
    steps = "-" if "steps" not in row else f"{row['steps']:.0f}"
    exact = {True: "yes", False: "NO"}.get(row.get("bit_exact"), "-")  # type: ignore[arg-type]
    packets = "-" if "packets" not in row else " / ".join(f"{p / 1e6:.2f} M" for p in row["packets"])
    split = [f"SPLITS A QDQ GROUP: {why}" for why in row.get("split", [])]
    why = "; ".join(split + row.get("refused", []) + row.get("notes", [])) or "-"
    return (
        f"| {row['model']} | {us} | {row.get('pairs', '-')} | {pct(row.get('gain'))} | {pct(row.get('coverage'))} | "
        f"{steps} | {exact} | {packets} | {why} |"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", help="comma-separated names (default: every cached quantized model)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per step and model (default 600)")
    ap.add_argument("--no-emulate", action="store_true", help="skip qemu")
    ap.add_argument(
        "--freeze-shapes", action="store_true", help="colocate --freeze-shapes (a model with symbolic dims)"
    )
    args = ap.parse_args(argv)
    paths = model_paths()
    paths.update({m.name: m.path for m in list_models(None) if m.name in SHIPPED and m.path is not None})
    names = args.models.split(",") if args.models else sorted(paths, key=lambda n: paths[n].stat().st_size)
    print(
        "| model | 2 streams serial us | pairs | modelled gain | serial time in pairs | plugin vs ORT, steps "
        "| emulate v73 bit-exact | qemu packets serial / fused | refused, or why not |"
    )
    print("|---" * 9 + "|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            print(
                cell(run(name, paths[name], Path(tmp), args.timeout, not args.no_emulate, args.freeze_shapes)),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
