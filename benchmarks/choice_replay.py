"""The run-time ORT mode choice's rule in this tree (hexfuse_onnx/mode_choice.chosen_mode) applied again to the
explorations a `host_pairs.py --defaults` run recorded, against what each session chose then (issue 13):

    python benchmarks/choice_replay.py RUN.json [--all] [--by-total]

Every drop-in session of the run that chose its mode at run time recorded what its exploration saw (each
mode's blocks' means round by round; runs before RULE 11 recorded blocks' medians, replayed as they are). For
each, this prints the mode it chose then and the mode the rule chooses now from the same figures, each as the
run's timed figure of the original in that mode over the best ORT mode's (the rested, interleaved rounds the
verdicts are made of): a rule change judged on the calls already timed, in seconds, before a run of hours.
The modes still in the rotation at the end are recorded from this tree on; in earlier runs they are taken as
those within DROP_RATIO of the lowest typical call (mode_choice.typical_calls). Only a rule's final step is
replayed: the exploration's blocks, drops and rounds stay as they were. --by-total times each mode by its summed
visits in place of its median visit (host_pairs_table.py --by-total: where a share of a mode's visits stall, only
the sum sees it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from host_pairs import DEFAULTS_TARGET  # noqa: E402  (a choice slower than this times the best mode misses)

from hexfuse_onnx import mode_choice, ort_modes  # noqa: E402

SESSIONS = ("hexfuse defaults", "hexfuse tuned defaults")


def live_modes(explored: dict[str, Any]) -> list[str]:
    """The modes left in the rotation: recorded, or those within DROP_RATIO of the lowest typical call."""
    if "live" in explored:
        return list(explored["live"])
    typical = mode_choice.typical_calls(explored["rounds"])
    return [m for m in typical if typical[m] <= mode_choice.DROP_RATIO * min(typical.values())]


def replay(row: dict[str, Any], by_total: bool = False) -> list[dict[str, Any]]:
    """One model's choosing sessions: the mode chosen then and now, each timed (its median visit, or with
    `by_total` its summed visits) over the best mode."""
    configs = row.get("configs") or {}
    timed = {
        m: sum(configs[m]["samples_us"]) if by_total else configs[m]["median_us"]
        for m in ort_modes.MODES
        if m in configs
    }
    found = []
    for label in SESSIONS:
        explored = configs.get(label, {}).get("explored")
        if not timed or not explored:
            continue
        then = configs[label]["ort_mode_chosen"]
        now = mode_choice.chosen_mode(explored["rounds"], live_modes(explored))
        best = min(timed.values())
        found.append(
            {
                "model": row["model"],
                "session": label,
                "then": then,
                "now": now,
                "then_over_best": timed[then] / best,
                "now_over_best": timed[now] / best,
            }
        )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a host_pairs.py --defaults --json file")
    parser.add_argument("--all", action="store_true", help="print every session, not only those whose choice changes")
    parser.add_argument("--by-total", action="store_true", help="time each mode by its summed visits")
    args = parser.parse_args(argv)
    with open(args.run) as f:
        rows = [s for row in json.load(f)["defaults"] for s in replay(row, args.by_total)]
    changed = [s for s in rows if s["then"] != s["now"]]
    for s in rows if args.all else changed:
        print(
            f"{s['model']:28} {s['session']:24} then {s['then']:11} {s['then_over_best']:.3f}x   "
            f"now {s['now']:11} {s['now_over_best']:.3f}x the best mode"
        )
    better = sum(s["now_over_best"] < s["then_over_best"] for s in changed)
    over = {when: sum(s[f"{when}_over_best"] > DEFAULTS_TARGET for s in rows) for when in ("then", "now")}
    print(
        f"{len(rows)} choosing sessions; the rule now changes {len(changed)} choices: {better} to a faster mode, "
        f"{len(changed) - better} to a slower one; over {DEFAULTS_TARGET}x the best mode: {over['then']} then, "
        f"{over['now']} now "
        f"(timed {'summed visits' if args.by_total else 'medians'} of the same run)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
