"""The drop-in table of a `host_pairs.py --defaults --json RUN.json` run, in markdown, with its totals:
what docs/DROPIN.md shows, made from the run's own figures (a resumed run's too, while it goes on).

    python benchmarks/host_pairs_table.py RUN.json [--models a,b] [--by-total]

One line of its totals lists the models with an unresolved or NOT met verdict, comma-separated: a later run
`host_pairs.py --defaults --models <them> --defaults-rounds N` times them again with more rounds.

A verdict: "met (same graph, best mode)" where stock ORT runs the original's graph in the ORT mode that
measured best (the ratio is then an A/A comparison), "met" where the whole 95% interval is at or under
the target, "NOT met" where it is all above, else "unresolved" (host_pairs.interval_verdict, against its
targets: 1.02x untuned; tuned, 1.00x where a pair was kept, else 1.02x). A row timed with `--resolve-rounds`
gives its interval's level (95% split over its looks) and the rounds it took after its ratios.

--by-total judges the same rounds again by the time they took in all (not judged by host_pairs; evidence): the best
ORT mode is the one whose visits took least in sum, a ratio is of the summed visits (`total_ratio`, rounds
resampled for the interval at the row's level). The median of per-round ratios sees the rounds most visits were
in; where some of a mode's visits stall (ORT's defaults from the CPU their pool thread is pinned to:
benchmarks/visit_positions.py), only the total sees what an application waited for.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from host_pairs import DEFAULTS_TARGET, interval_verdict, mode_run, tuned_target_of  # noqa: E402

from hexfuse_onnx import ort_modes  # noqa: E402
from hexfuse_onnx.tools.interleaved import BOOTSTRAP  # noqa: E402

COLUMNS = (
    "model",
    "pairs",
    "best ORT mode",
    "untuned chose (rounds)",
    "untuned / best",
    "tuned: kept, mode",
    "tuned / best",
    "A/A",
    "others' CPU",
    "wall s",
)


def verdict(ratio: list[float] | None, by_construction: bool, target: float) -> str:
    if ratio is not None and by_construction:
        return "met (same graph, best mode)"
    return interval_verdict(None if ratio is None else (ratio[0], ratio[1], ratio[2]), target)


def _ratio(r: list[float] | None) -> str:
    return "-" if r is None else f"{r[0]:.3f} [{r[1]:.3f}, {r[2]:.3f}]"


def _looked(row: dict[str, Any]) -> str:
    """`(98.75%, 60 rounds)` for a row timed with several looks (--resolve-rounds), else nothing."""
    return f" ({100 * row['interval_level']:.2f}%, {row['rounds']} rounds)" if len(row.get("looks", [])) > 1 else ""


def _chose(row: dict[str, Any]) -> str:
    extra = row["configs"]["hexfuse defaults"]
    if extra.get("too_large_to_choose"):
        return f"{extra['ort_mode_chosen']} (too large to choose)"
    return f"{extra.get('ort_mode_chosen', '?')} ({extra.get('warm_up_rounds', '?')}){_at_end(extra)}"


def _at_end(extra: dict[str, Any]) -> str:
    """`, then ort-par` where the session ran another mode by the timing's end (`mode_choice.ChallengedSession`)."""
    return f", then {extra['ort_mode_at_end']}" if "ort_mode_at_end" in extra else ""


def _tuned(row: dict[str, Any]) -> str:
    kept = row["tuned"]["kept"]
    extra = row["configs"]["hexfuse tuned defaults"]
    mode = extra.get("ort_mode_chosen")
    recorded = (row["tuned"].get("ort_mode") or {}).get("mode")
    how = f"chose {mode} at run time{_at_end(extra)} (tune's: {recorded})" if mode else f"{recorded}"
    return f"{len(kept)} kept{' (' + ', '.join(kept) + ')' if kept else ''}, {how}"


def verdicts(row: dict[str, Any]) -> tuple[str, str]:
    """The untuned and tuned verdicts of one timed row."""
    same, tuned_target = row["same_graph_and_mode_as_best"], tuned_target_of(row["tuned"]["kept"])
    return (
        verdict(row["defaults_over_best_ort"], same["hexfuse defaults"], DEFAULTS_TARGET),
        verdict(row["tuned_defaults_over_best_ort"], same["hexfuse tuned defaults"], tuned_target),
    )


def line(row: dict[str, Any]) -> str:
    if "defaults_over_best_ort" not in row:
        why = row.get("skipped") or f"FAILED: {row.get('failed', '?')}"
        return f"| {row['model']} | - | no pair: {why[:120]} |" + " |" * (len(COLUMNS) - 3)
    untuned, tuned = verdicts(row)
    best = row["best_ort"]
    twin = row["aa_twin"]["ratio"]
    cells = (
        row["model"],
        str(row["pairs"]),
        f"{best}, {row['configs'][best]['median_us']:.0f} us",
        _chose(row),
        f"{_ratio(row['defaults_over_best_ort'])} {untuned}{_looked(row)}",
        _tuned(row),
        f"{_ratio(row['tuned_defaults_over_best_ort'])} {tuned}",
        f"{twin[0]:.3f}" if twin else "-",
        f"{row['cpu_use']['other_cpus']:.2f}" if row.get("cpu_use") else "-",
        f"{row['wall_s']:.0f}" if "wall_s" in row else "-",
    )
    return "| " + " | ".join(cells) + " |"


def totals(rows: list[dict[str, Any]]) -> list[str]:
    timed = [r for r in rows if "defaults_over_best_ort" in r]
    out = [f"{len(rows)} models: {len(timed)} timed, {len(rows) - len(timed)} with no pair to time or not timed"]
    for k, label in ((0, "untuned"), (1, "tuned")):
        counts = Counter(verdicts(r)[k] for r in timed)
        out.append(f"{label}: " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    kept = [f"{r['model']} ({', '.join(r['tuned']['kept'])})" for r in timed if r["tuned"]["kept"]]
    out.append(f"pairs kept by tune: {', '.join(kept) or 'none'}")
    doubtful = [r["model"] for r in timed if any(not v.startswith("met") for v in verdicts(r))]
    out.append(f"unresolved or NOT met (for host_pairs --models, with more rounds): {','.join(doubtful) or 'none'}")
    commits = Counter(r.get("commit", "not recorded") for r in rows)
    out.append("timed on: " + ", ".join(f"{c} ({n})" for c, n in commits.most_common()))
    return out


def total_ratio(samples: list[float], base: list[float], level: float, seed: int = 0) -> tuple[float, float, float]:
    """(ratio, low, high): the summed visits of `samples` over `base`'s in the rounds both ran, with its bootstrap
    interval at `level` (rounds resampled with replacement)."""
    n = min(len(samples), len(base))
    a, b = np.asarray(samples[:n]), np.asarray(base[:n])
    picks = np.random.default_rng(seed).integers(0, n, size=(BOOTSTRAP, n))
    tail = 50.0 * (1.0 - level)
    low, high = np.percentile(a[picks].sum(axis=1) / b[picks].sum(axis=1), [tail, 100.0 - tail])
    return float(a.sum() / b.sum()), float(low), float(high)


def by_total(row: dict[str, Any]) -> tuple[str, list[tuple[tuple[float, float, float], str]]]:
    """A timed row judged by its summed visits: the best ORT mode so, and each session's ratio and verdict."""
    configs = row["configs"]
    sums = {m: sum(configs[m]["samples_us"]) for m in ort_modes.MODES if configs.get(m, {}).get("samples_us")}
    best = min(sums, key=sums.__getitem__)
    targets = {"hexfuse defaults": DEFAULTS_TARGET, "hexfuse tuned defaults": tuned_target_of(row["tuned"]["kept"])}
    recorded = (row["tuned"].get("ort_mode") or {}).get("mode")
    judged = []
    for label, target in targets.items():
        ratio = total_ratio(configs[label]["samples_us"], configs[best]["samples_us"], row["interval_level"])
        same = row["ort_graph_difference"][label] is None and mode_run(configs[label], recorded, label) == best
        judged.append((ratio, verdict(list(ratio), same, target)))
    return best, judged


def total_cell(ratio: tuple[float, float, float], judged: str) -> str:
    return f"{_ratio(list(ratio))} {judged}"


def print_by_total(rows: list[dict[str, Any]]) -> None:
    timed = [r for r in rows if "defaults_over_best_ort" in r and r["configs"]["hexfuse defaults"].get("samples_us")]
    judged = {r["model"]: by_total(r) for r in timed}
    print("\nBy the summed visits (not judged; the rows with a session not met):")
    for model, (best, sessions) in judged.items():
        if any(not v.startswith("met") for _, v in sessions):
            untuned, tuned = (total_cell(*s) for s in sessions)
            print(f"  {model}: best {best}; untuned {untuned}; tuned {tuned}")
    for k, label in ((0, "untuned"), (1, "tuned")):
        counts = Counter(sessions[k][1] for _, sessions in judged.values())
        print(f"  {label}: " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="the JSON of a host_pairs.py --defaults run")
    ap.add_argument("--models", default=None, help="comma-separated: only these rows (default every row)")
    ap.add_argument("--by-total", action="store_true", help="also judge the rows by their summed visits")
    args = ap.parse_args(argv)
    try:
        doc = json.loads(args.run.read_text())
        rows = doc["defaults"]
    except (OSError, ValueError, KeyError) as exc:
        print(f"host_pairs_table: {args.run}: not a host_pairs --defaults JSON ({exc})", file=sys.stderr)
        return 2
    if args.models:
        wanted = {m.strip() for m in args.models.split(",")}
        rows = [r for r in rows if r["model"] in wanted]
    print(f"settings {json.dumps(doc.get('settings', {}))}; complete: {doc.get('complete')}\n")
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for row in rows:
        print(line(row))
    print()
    for text in totals(rows):
        print(text)
    if args.by_total:
        print_by_total(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
