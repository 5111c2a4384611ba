"""Every cached real model, exported decoder/speech model and quantized model through the user's
plain commands, each in a child process with a wall-time limit: what crashes, what exits with a
code the README does not document, what refuses without a reason, what is slow. No timing claims.

    python -m models real fetch --all
    nice -n 19 python benchmarks/sweep.py --json build/sweep.jsonl          # every model, ~40 min
    python benchmarks/sweep.py --models ppocr_cls,gpt2_dynamo --timeout 120
    python benchmarks/sweep.py --table build/sweep.jsonl                    # the table of an earlier run
    nice -n 19 python benchmarks/sweep.py --sets qdq --emulate               # needs dsp/scripts/build_hexagon.sh

Per model, as a user types them (model files, no zoo name, so no zoo shapes; no --shape):
`inspect M`, `rewrite M -o T`, `rewrite M -o T --verify plugin` at HEXFUSE_CALL_OVERHEAD_US=0, and
`colocate M --requests 2 -o T`; with --emulate also `emulate T --arch v73` on the plugin step's output
when it has pairs (pairs bit-exact against the host kernel, the largest pair's fused packets). Per
command: exit code, wall seconds, pairs, the pairs' share of the modelled serial time
(inspect/rewrite: of the graph's node-after-node time, `modelled_us` in --json; colocate: its own
coverage), the last line of stderr. A cell is flagged `!` when the command printed a traceback,
exited with a code not in the README (or 70, an internal error), ran out of time, or took over 3
minutes; a refusal (2, 3, 4, 5) is fine when it says why in one line
(emulate: any exit but 0 is flagged, 4 being a pair that differs from the host kernel).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from subprocess import PIPE

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from hexfuse_onnx.costmodel import CALL_OVERHEAD_ENV  # noqa: E402
from models import quantized, real  # noqa: E402

DOCUMENTED = {0, 2, 3, 4, 5}  # README "Exit codes"; 70 is documented too, but it is a bug
SLOW_S = 180.0
COMMANDS = ("inspect", "rewrite", "plugin", "colocate", "emulate")  # emulate: only with --emulate
EMULATED = "plugin"  # the step whose output emulate runs: overhead 0, the most pairs


@dataclass
class Step:
    code: int | None  # None: timed out
    seconds: float
    pairs: int | None = None
    share: float | None = None  # of the modelled serial time inside pairs
    last: str = ""  # last line of stderr
    traceback: bool = False
    exact: int | None = None  # emulate: pairs bit-exact against the host kernel
    floats: int | None = None  # emulate: pairs with an fp32 output (held to --rtol, not to bit-exact)
    packets: int | None = None  # emulate: the largest pair's fused packets under qemu

    @property
    def bad(self) -> bool:
        refused = self.code not in DOCUMENTED or (self.exact is not None and self.code != 0)
        return self.code is None or refused or self.traceback or self.seconds > SLOW_S


@dataclass
class Row:
    model: str
    group: str
    path: str
    steps: dict[str, Step] = field(default_factory=dict)


def zoo(groups: set[str], qdq: str) -> list[tuple[str, str, Path]]:
    """(name, group, file) of every cached model of the groups, smallest file first per group."""
    out: list[tuple[str, str, Path]] = []
    if "real" in groups:
        out += [(n, "real", p) for n in real.MODELS if (p := real.cached_path(n)) is not None]
    if "exported" in groups:
        out += [(p.stem, "exported", p) for p in sorted((ROOT / "models" / "exported").glob("*.onnx"))]
    if "qdq" in groups:  # the ones the zoo makes (a folder of the cache may be older than SKIPPED)
        for n in quantized.MODELS:
            if (qdq == "all" or n.endswith(qdq)) and (p := quantized.cached_path(n)) is not None:
                out.append((n, "qdq", p))
    return sorted(out, key=lambda m: (("real", "exported", "qdq").index(m[1]), m[2].stat().st_size))


def run(args: list[str], timeout: float, overhead_zero: bool) -> tuple[int | None, float, str, str]:
    """Exit code (None: timed out), wall seconds, stdout, stderr of `python -m hexfuse_onnx ARGS`."""
    env = {k: v for k, v in os.environ.items() if k != CALL_OVERHEAD_ENV}
    if overhead_zero:
        env[CALL_OVERHEAD_ENV] = "0"
    cmd = [sys.executable, "-m", "hexfuse_onnx", *args]
    t0 = time.perf_counter()
    with subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=PIPE, stderr=PIPE, text=True, start_new_session=True) as p:
        try:
            stdout, stderr = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            return None, time.perf_counter() - t0, "", ""
    return p.returncode, time.perf_counter() - t0, stdout, stderr


def figures(report: Path, colocated: bool) -> tuple[int | None, float | None]:
    """Pairs and their share of the modelled serial time, from a --json report (If branches too)."""
    if not report.is_file():
        return None, None
    doc = json.loads(report.read_text())
    if colocated:
        modelled = (doc.get("colocate") or {}).get("modelled") or {}
        return len(doc["pairs"]), modelled.get("coverage")
    scopes = [doc, *doc.get("branches", [])]
    pairs = [p for s in scopes for p in s["pairs"]]
    total = sum(s.get("modelled_us", 0.0) for s in scopes)
    inside = sum(p["predicted_us"]["serial"] for p in pairs)
    return len(pairs), inside / total if total > 0 else None


def emulated(report: Path) -> tuple[int, int, int, int | None]:
    """Pairs, pairs bit-exact, pairs with an fp32 output and the largest pair's fused packets, from an
    `emulate --json` report."""
    pairs = json.loads(report.read_text())["pairs"] if report.is_file() else []
    floats = sum(any(o["tolerance"].startswith("rtol") for o in p["outputs"]) for p in pairs)
    packets = [p["stats"]["runs"]["fused"]["call_packets"] for p in pairs]
    return len(pairs), sum(p["bit_exact"] for p in pairs), floats, max(packets, default=None)


def step(name: str, model: Path, tmp: Path, timeout: float) -> Step:
    report, out = tmp / f"{name}.json", tmp / f"{name}.onnx"
    report.unlink(missing_ok=True)
    args = {
        "inspect": ["inspect", str(model)],
        "rewrite": ["rewrite", str(model), "-o", str(out)],
        "plugin": ["rewrite", str(model), "-o", str(out), "--verify", "plugin"],
        "colocate": ["colocate", str(model), "--requests", "2", "-o", str(out)],
        "emulate": ["emulate", str(tmp / f"{EMULATED}.onnx"), "--arch", "v73"],
    }[name]
    code, seconds, _, stderr = run([*args, "--json", str(report)], timeout, name == "plugin")
    lines = [line for line in stderr.splitlines() if line.strip()]
    last = lines[-1][:240] if lines else ""
    s = Step(code, round(seconds, 1), last=last, traceback="Traceback (most recent call last)" in stderr)
    if name == "emulate":
        s.pairs, s.exact, s.floats, s.packets = emulated(report)
    elif code == 0:
        s.pairs, s.share = figures(report, name == "colocate")
    return s


def sweep(models: list[tuple[str, str, Path]], timeout: float, jsonl: Path | None, emulate: bool) -> list[Row]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="sweep-") as tmp:
        for name, group, path in models:
            row = Row(name, group, str(path))
            for command in COMMANDS[:-1]:
                row.steps[command] = step(command, path, Path(tmp), timeout)
            if emulate and row.steps[EMULATED].code == 0 and row.steps[EMULATED].pairs:
                row.steps["emulate"] = step("emulate", path, Path(tmp), timeout)
            print(line(row), flush=True)
            rows.append(row)
            if jsonl is not None:
                with jsonl.open("a") as f:
                    f.write(json.dumps(asdict(row)) + "\n")
    return rows


def cell(s: Step | None) -> str:
    if s is None:
        return "-"
    if s.code is None:
        return f"! timeout {s.seconds:.0f}s"
    figure = f"{s.pairs}p {s.share:.0%}" if s.pairs is not None and s.share is not None else f"{s.pairs or 0}p"
    if s.exact is not None:
        fp32 = f" ({s.floats} with fp32 outputs)" if s.floats else ""
        figure = f"{s.exact}/{s.pairs} exact{fp32}, {s.packets or 0:,} pk"
    text = f"{figure} {s.seconds:.0f}s" if s.code == 0 else f"exit {s.code} {s.seconds:.0f}s"
    if s.exact is not None and s.code == 4:
        text = f"{figure}, exit 4 {s.seconds:.0f}s"
    return ("! " if s.bad else "") + text


def line(row: Row) -> str:
    cells = " | ".join(cell(row.steps.get(c)) for c in COMMANDS)
    notes = "; ".join(f"{c}: {s.last}" for c, s in row.steps.items() if s.bad or (s.code not in (0, None) and s.last))
    return f"| {row.model} | {row.group} | {cells} | {notes or '-'} |"


def load(jsonl: Path) -> list[Row]:
    rows = []
    for text in jsonl.read_text().splitlines():
        d = json.loads(text)
        rows.append(Row(d["model"], d["group"], d["path"], {k: Step(**v) for k, v in d["steps"].items()}))
    return rows


def table(rows: list[Row]) -> str:
    head = (
        "| model | set | inspect | rewrite | rewrite --verify plugin (overhead 0) | colocate --requests 2 "
        "| emulate --arch v73 (plugin's output) | notes |"
    )
    out = [head, "|---" * 8 + "|", *(line(r) for r in rows)]
    bad = sum(s.bad for r in rows for s in r.steps.values())
    out.append(f"{len(rows)} models, {sum(len(r.steps) for r in rows)} commands, {bad} flagged (!)")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", help="comma-separated names (default: every cached model of --sets)")
    ap.add_argument("--sets", default="real,exported,qdq", help="real, exported, qdq (default: all three)")
    ap.add_argument("--qdq", default="u8u8", help="u8u8, u16u8 or all (default u8u8: u16u8 has the same graphs)")
    ap.add_argument("--timeout", type=float, default=240, help="wall seconds per command (default 240)")
    ap.add_argument("--json", type=Path, help="append one JSON line per model here")
    ap.add_argument("--emulate", action="store_true", help="also emulate the plugin step's output when it has pairs")
    ap.add_argument("--table", type=Path, help="print the table of an earlier --json run, run nothing")
    args = ap.parse_args(argv)
    if args.table:
        print(table(load(args.table)))
        return 0
    models = zoo(set(args.sets.split(",")), args.qdq)
    if args.models:
        wanted = args.models.split(",")
        models = [m for w in wanted for m in models if m[0] == w]
    print(table(sweep(models, args.timeout, args.json, args.emulate)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
