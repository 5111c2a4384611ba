"""Every cached real model, exported decoder/speech model and quantized model through the user's
plain commands, each in a child process with a wall-time limit: what crashes, what exits with a
code the README does not document, what refuses without a reason, what is slow. No timing claims.

    python -m models real fetch --all
    nice -n 19 python benchmarks/sweep.py --json build/sweep.jsonl          # every model, ~40 min
    python benchmarks/sweep.py --models ppocr_cls,gpt2_dynamo --timeout 120
    python benchmarks/sweep.py --table build/sweep.jsonl                    # the table of an earlier run
    nice -n 19 python benchmarks/sweep.py --sets qdq --emulate               # needs dsp/scripts/build_hexagon.sh
    nice -n 10 python benchmarks/sweep.py --sets qdq --commands plugin,emulate,ungrounded   # issue 12's figures

Per model, as a user types them (model files, no zoo name, so no zoo shapes; no --shape):
`inspect M`, `rewrite M -o T`, `rewrite M -o T --verify plugin` at HEXFUSE_CALL_OVERHEAD_US=0, and
`colocate M --requests 2 -o T`; with --emulate also `emulate T --arch v73` on the plugin step's output
when it has pairs (pairs bit-exact against the host kernel, serial and fused packets per pair), and
`inspect M --target T` at overhead 0 with T hexagon-v73 whose HVX rates are back at their values from
before qemu grounded them (ungrounded). Per command: exit code, wall seconds, pairs, the pairs' share of
the modelled serial time (inspect/rewrite: of the graph's node-after-node time, `modelled_us` in --json;
colocate: its own coverage), the last line of stderr; for rewrite and inspect also the refusals by
reason, the modelled graph and pairs (us), and whether stock ORT matched bit for bit and the plugin's
worst output in quantization steps (rewrite); --table adds issue 12's per-model table when emulate
ran. A cell is flagged `!` when the command printed a traceback, exited with a code not in the README
(or 70, an internal error), ran out of time, or took over 3 minutes; a refusal (2, 3, 4, 5) is fine
when it says why in one line (emulate: any exit but 0 is flagged, 4 being a pair that differs from
the host kernel).
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
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from subprocess import PIPE

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from hexfuse_onnx.costmodel import CALL_OVERHEAD_ENV, HEXAGON_V73, Param, Target  # noqa: E402
from models import quantized, real  # noqa: E402

DOCUMENTED = {0, 2, 3, 4, 5}  # README "Exit codes"; 70 is documented too, but it is a bug
SLOW_S = 180.0
COMMANDS = ("inspect", "rewrite", "plugin", "colocate", "emulate", "ungrounded")  # the last two: --emulate
EMULATED = "plugin"  # the step whose output emulate runs: overhead 0, the most pairs
# hexagon-v73's HVX integer rates before qemu grounded them (bcf3c31, 6c62ef4): the Hexagon V73 HVX
# Programmer's Reference peaks, every op class at its engine's rate.
DOCUMENT_RATES = {
    "vector_int8_ops_per_context": Param(
        256e9, "op/s", "modelled (document): vrmpy, 32 lanes x 4 8-bit multiply-adds per cycle per context, 1 GHz"
    ),
    "vector_int16_ops_per_context": Param(
        128e9, "op/s", "modelled (document): vmpyh-class, 64 16-bit multiply-adds per cycle per context, 1 GHz"
    ),
}


@dataclass
class Step:
    code: int | None  # None: timed out
    seconds: float
    pairs: int | None = None
    share: float | None = None  # of the modelled serial time inside pairs
    last: str = ""  # last line of stderr
    traceback: bool = False
    exact: int | None = None  # emulate: pairs bit-exact against the host kernel
    floats: int | None = None  # emulate: pairs with an fp32 output (bit-exact since branch f32bits)
    int_off: int | None = None  # emulate: pairs with an integer output not bit-exact (a quantized one may be 1 off)
    packets: int | None = None  # emulate: the largest pair's fused packets under qemu
    serial_packets: int | None = None  # emulate: qemu packets summed over pairs, each pair's tasks one after the other
    fused_packets: int | None = None  # emulate: the same, the pair's tasks fused (the coop scheduler interleaving)
    pair_packets: list[list[int]] | None = None  # emulate: [serial, fused] packets of each pair
    busiest_packets: int | None = None  # emulate: the fused runs' busiest worker's packets, summed over pairs
    serialized: int | None = None  # emulate: pairs whose fused run fell back to serial
    fused_differs: int | None = None  # emulate: pairs whose fused run's outputs are not its serial run's
    ort_exact: bool | None = None  # rewrite, plugin: on stock ORT the rewrite equals the original bit for bit
    steps: float | None = None  # plugin: the worst quantized graph output's distance from the original, in steps
    plugin_error: float | None = None  # plugin: a model without quantized outputs: their worst relative error
    refused: dict[str, int] | None = None  # candidates not fused, by reason (and the op or check that stopped them)
    modelled_us: float | None = None  # the graph's modelled time node after node (and its If branches)
    pairs_us: list[float] | None = None  # [serial, fused + call] modelled time summed over the pairs

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
        coverage = ((doc.get("colocate") or {}).get("modelled") or {}).get("coverage")
        return len(doc["pairs"]), coverage
    total, (inside, _) = modelled(doc)
    return len(pairs_of(doc)), inside / total if total > 0 else None


def pairs_of(doc: dict) -> list[dict]:
    return [p for s in [doc, *doc.get("branches", [])] for p in s["pairs"]]


def modelled(doc: dict) -> tuple[float, tuple[float, float]]:
    """The graph's modelled time node after node, and the pairs' serial and fused (+ call) times, in us."""
    total = sum(s.get("modelled_us", 0.0) for s in [doc, *doc.get("branches", [])])
    predicted = [p["predicted_us"] for p in pairs_of(doc)]
    return total, (sum(p["serial"] for p in predicted), sum(p["fused"] + p.get("call", 0.0) for p in predicted))


def refusals(doc: dict) -> dict[str, int]:
    """The candidates not fused, counted by reason as `rewrite` prints them (the op or check that stopped them)."""
    counts: dict[str, int] = {}
    for r in [r for s in [doc, *doc.get("branches", [])] for r in s["rejected"]]:
        reason = r["reason"].split(":")[0]
        where = r.get("blocker") or ("with the plugin" if "FusedHexPair plugin" in r["reason"] else "")
        key = f"{reason}: {where}" if where else reason
        counts[key] = counts.get(key, 0) + 1
    return counts


def accounted(s: Step, report: Path) -> None:
    """What issue 12's note needs from a rewrite/inspect report: stock ORT bit for bit, the plugin's
    worst output in quantization steps, the refusals, the modelled graph and pairs."""
    if not report.is_file():
        return
    doc = json.loads(report.read_text())
    verification = doc.get("verification") or {}
    if verification:
        s.ort_exact = verification["worst_relative_error"] == 0.0
        steps = verification.get("plugin_output_steps")
        s.steps = max(steps.values()) if steps else None  # {}: no graph output is quantized
        s.plugin_error = verification.get("plugin_relative_error")
    s.refused = refusals(doc)
    total, pairs = modelled(doc)
    s.modelled_us, s.pairs_us = round(total, 3), [round(t, 3) for t in pairs]


def emulated(s: Step, report: Path) -> None:
    """Pairs, pairs bit-exact, pairs with an fp32 output, the largest pair's fused packets and every
    pair's serial and fused packets, from an `emulate --json` report."""
    pairs = json.loads(report.read_text())["pairs"] if report.is_file() else []
    runs = [p["stats"]["runs"] for p in pairs]
    s.pairs, s.exact = len(pairs), sum(p["bit_exact"] for p in pairs)
    fp32 = [[o["tolerance"].startswith("rtol") for o in p["outputs"]] for p in pairs]
    s.floats = sum(any(f) for f in fp32)
    s.int_off = sum(any(not f and not o["bit_exact"] for f, o in zip(fs, p["outputs"])) for fs, p in zip(fp32, pairs))
    s.pair_packets = [[r["serial"]["call_packets"], r["fused"]["call_packets"]] for r in runs]
    s.packets = max((f for _, f in s.pair_packets), default=None)
    s.serialized = sum(r["fused"]["serialized"] for r in runs)
    s.busiest_packets = sum(max(r["fused"]["worker_packets"], default=0) for r in runs) if pairs else None
    s.fused_differs = sum(not p["stats"]["serial_equals_fused"] for p in pairs)
    s.serial_packets = sum(serial for serial, _ in s.pair_packets) if pairs else None
    s.fused_packets = sum(fused for _, fused in s.pair_packets) if pairs else None


def ungrounded() -> Target:
    """hexagon-v73 with the HVX rates it had before they were grounded in qemu packets: each
    'emulated (qemu packets)' figure back at its document value, no emulated per-class rate."""
    emulated_params = {k for k, p in HEXAGON_V73.params().items() if p.source.startswith("emulated")}
    if emulated_params - DOCUMENT_RATES.keys():  # a newly grounded figure: its older value is not known here
        raise ValueError(f"no pre-qemu value for {sorted(emulated_params - DOCUMENT_RATES.keys())}")
    return replace(
        HEXAGON_V73,
        name="hexagon-v73-ungrounded",
        description="hexagon-v73 with its HVX integer rates before qemu grounded them (document peaks)",
        class_rates=tuple((k, p) for k, p in HEXAGON_V73.class_rates if not p.source.startswith("emulated")),
        **{k: p for k, p in DOCUMENT_RATES.items() if k in emulated_params},
    )


def step(name: str, model: Path, tmp: Path, timeout: float) -> Step:
    report, out = tmp / f"{name}.json", tmp / f"{name}.onnx"
    report.unlink(missing_ok=True)
    older = tmp / "hexagon-v73-ungrounded.json"
    if name == "ungrounded" and not older.is_file():
        older.write_text(ungrounded().to_json())
    args = {
        "inspect": ["inspect", str(model)],
        "rewrite": ["rewrite", str(model), "-o", str(out)],
        "plugin": ["rewrite", str(model), "-o", str(out), "--verify", "plugin"],
        "colocate": ["colocate", str(model), "--requests", "2", "-o", str(out)],
        "emulate": ["emulate", str(tmp / f"{EMULATED}.onnx"), "--arch", "v73"],
        "ungrounded": ["inspect", str(model), "--target", str(older)],  # at overhead 0, as the plugin step
    }[name]
    code, seconds, _, stderr = run([*args, "--json", str(report)], timeout, name in ("plugin", "ungrounded"))
    lines = [line for line in stderr.splitlines() if line.strip()]
    last = lines[-1][:240] if lines else ""
    s = Step(code, round(seconds, 1), last=last, traceback="Traceback (most recent call last)" in stderr)
    if name == "emulate":
        emulated(s, report)
    elif code == 0:
        s.pairs, s.share = figures(report, name == "colocate")
        if name != "colocate":
            accounted(s, report)
    return s


def sweep(models: list[tuple[str, str, Path]], timeout: float, jsonl: Path | None, commands: list[str]) -> list[Row]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="sweep-") as tmp:
        for name, group, path in models:
            row = Row(name, group, str(path))
            for command in commands:
                plugin = row.steps.get(EMULATED)
                if command != "emulate" or (plugin is not None and plugin.code == 0 and plugin.pairs):
                    row.steps[command] = step(command, path, Path(tmp), timeout)
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


def line(row: Row, commands: list[str] | tuple[str, ...] = COMMANDS[:-1]) -> str:
    cells = " | ".join(cell(row.steps.get(c)) for c in commands)
    notes = "; ".join(f"{c}: {s.last}" for c, s in row.steps.items() if s.bad or (s.code not in (0, None) and s.last))
    return f"| {row.model} | {row.group} | {cells} | {notes or '-'} |"


def load(jsonl: Path) -> list[Row]:
    rows = []
    for text in jsonl.read_text().splitlines():
        d = json.loads(text)
        rows.append(Row(d["model"], d["group"], d["path"], {k: Step(**v) for k, v in d["steps"].items()}))
    return rows


HEADS = {
    "inspect": "inspect",
    "rewrite": "rewrite",
    "plugin": "rewrite --verify plugin (overhead 0)",
    "colocate": "colocate --requests 2",
    "emulate": "emulate --arch v73 (plugin's output)",
    "ungrounded": "inspect, pre-qemu HVX rates (overhead 0)",
}


def table(rows: list[Row]) -> str:
    shown = [c for c in COMMANDS if c in HEADS and (c != "ungrounded" or any(c in r.steps for r in rows))]
    out = [f"| model | set | {' | '.join(HEADS[c] for c in shown)} | notes |", "|---" * (len(shown) + 3) + "|"]
    out += [line(r, shown) for r in rows]
    bad = sum(s.bad for r in rows for s in r.steps.values())
    out.append(f"{len(rows)} models, {sum(len(r.steps) for r in rows)} commands, {bad} flagged (!)")
    if any("emulate" in r.steps for r in rows):
        out += ["", *issue_table(list({r.model: r for r in rows}.values()))]  # a model's re-run replaces its row
    return "\n".join(out)


def graph_us(s: Step | None) -> str:
    """The graph's modelled time node after node -> with its pairs fused, and the pairs (count)."""
    if s is None or s.modelled_us is None or s.pairs_us is None:
        return "-"
    serial, fused = s.pairs_us
    return f"{s.modelled_us:,.0f} -> {s.modelled_us - serial + fused:,.0f} ({s.pairs}p)"


def off(s: Step) -> str:
    """The plugin's worst graph output from the original: in quantization steps (`!` over 1), or
    relative when no graph output is quantized."""
    if s.steps is not None:
        return ("! " if s.steps > 1 else "") + f"{s.steps:.3g}"
    return f"rel {s.plugin_error:.1e}" if s.plugin_error is not None else "-"


def issue_table(rows: list[Row]) -> list[str]:
    """Issue 12's note, per model: pairs and refusals (by reason where none is fused), stock ORT, the
    plugin's worst output in quantization steps, emulate's pairs bit-exact and packets, the modelled
    hexagon-v73 time of the graph (us, node after node -> pairs fused) with the HVX rates grounded in
    qemu packets and before."""
    out = [
        "| model | pairs (refused) | stock ORT bit for bit | plugin, worst output (steps) | emulate: bit-exact "
        "| packets serial -> fused (fused/serial) | v73 us, grounded HVX rates | v73 us, pre-qemu rates |",
        "|---" * 8 + "|",
    ]
    for r in rows:
        plugin, emulate = r.steps.get(EMULATED), r.steps.get("emulate")
        if plugin is None:
            continue
        refused = str(sum((plugin.refused or {}).values()))
        if plugin.code != 0 or not plugin.pairs:  # why none: every refusal, or how the step ended
            why = "; ".join(f"{k} {n}" for k, n in (plugin.refused or {}).items()) if plugin.code == 0 else cell(plugin)
            refused = f"{refused}: {why}" if why else "no candidate"
        ort = {True: "yes", False: "! no", None: "-"}[plugin.ort_exact]
        steps = off(plugin)
        exact, packets = "-", "-"
        if emulate is not None:
            exact = f"{emulate.exact}/{emulate.pairs}" if emulate.code == 0 else cell(emulate)
            exact += f" ({emulate.floats} fp32)" if emulate.floats else ""
            exact += f", ! {emulate.int_off} with an integer output off" if emulate.int_off else ""
            exact += f", ! {emulate.fused_differs} fused != serial" if emulate.fused_differs else ""
            if emulate.serial_packets and emulate.fused_packets is not None:
                ratio = emulate.fused_packets / emulate.serial_packets
                packets = f"{emulate.serial_packets:,} -> {emulate.fused_packets:,} ({ratio:.2f})"
        grounded, older = graph_us(plugin), graph_us(r.steps.get("ungrounded"))
        out.append(
            f"| {r.model} | {plugin.pairs} ({refused}) | {ort} | {steps} | {exact} | {packets} | {grounded} | {older} |"
        )
    return out + totals(rows)


def totals(rows: list[Row]) -> list[str]:
    """The table's sums: pairs, emulate's bit-exact pairs and packets, and the refusals by reason."""
    plugins = [p for r in rows if (p := r.steps.get(EMULATED)) is not None]
    emulates = [e for r in rows if (e := r.steps.get("emulate")) is not None and e.code == 0]
    refused: dict[str, int] = {}
    for p in plugins:
        for reason, n in (p.refused or {}).items():
            reason = re.sub(r"[\d.]+ and [\d.]+ MiB", "x and y MiB", reason.split(" (dead nodes")[0])  # not which
            refused[reason] = refused.get(reason, 0) + n
    serial, fused = sum(e.serial_packets or 0 for e in emulates), sum(e.fused_packets or 0 for e in emulates)
    lines = [
        f"{len(plugins)} models, {sum(bool(p.pairs) for p in plugins)} with pairs, "
        f"{sum(p.pairs or 0 for p in plugins)} pairs; emulate exit 0 on "
        f"{len(emulates)}: {sum(e.exact or 0 for e in emulates)} of {sum(e.pairs or 0 for e in emulates)} pairs "
        f"bit-exact ({sum(e.floats or 0 for e in emulates)} with an fp32 output), packets serial {serial:,} -> "
        f"fused {fused:,}",
        f"refused ({sum(refused.values())}): "
        + "; ".join(f"{reason} {n}" for reason, n in sorted(refused.items(), key=lambda kv: -kv[1])),
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", help="comma-separated names (default: every cached model of --sets)")
    ap.add_argument("--sets", default="real,exported,qdq", help="real, exported, qdq (default: all three)")
    ap.add_argument("--qdq", default="u8u8", help="u8u8, u16u8 or all (default u8u8: u16u8 has the same graphs)")
    ap.add_argument("--timeout", type=float, default=240, help="wall seconds per command (default 240)")
    ap.add_argument("--json", type=Path, help="append one JSON line per model here")
    ap.add_argument(
        "--emulate",
        action="store_true",
        help="also emulate the plugin step's output when it has pairs, and price the model with the HVX "
        "rates from before qemu grounded them (ungrounded)",
    )
    ap.add_argument("--commands", help=f"comma-separated, of {','.join(COMMANDS)} (default: all; emulate needs plugin)")
    ap.add_argument("--table", type=Path, help="print the table of an earlier --json run, run nothing")
    args = ap.parse_args(argv)
    if args.table:
        print(table(load(args.table)))
        return 0
    models = zoo(set(args.sets.split(",")), args.qdq)
    if args.models:
        wanted = args.models.split(",")
        models = [m for w in wanted for m in models if m[0] == w]
    commands = args.commands.split(",") if args.commands else list(COMMANDS if args.emulate else COMMANDS[:-2])
    if unknown := [c for c in commands if c not in COMMANDS]:
        ap.error(f"unknown command(s) {','.join(unknown)} (known: {','.join(COMMANDS)})")
    print(table(sweep(models, args.timeout, args.json, commands)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
