"""Where the run-time choices of ONNX Runtime's mode are remembered (mode_choice.py chooses).

A small JSON file (HEXFUSE_ORT_MODE_CACHE, default $XDG_CACHE_HOME/hexfuse_onnx/ort_modes.json), written
atomically, maps a model and this machine to the modes its explorations chose: the key is the model's digest
(the file's or the bytes'), this machine's fingerprint (tuning.fingerprint: CPU, CPU count, ORT and
hexfuse-onnx versions) and RULE, so a choice made by an earlier rule is not reused. One exploration on a busy
machine can choose wrong, so later sessions of the model choose again until CONFIRM choices in a row agree
(or, after HISTORY, the most frequent stands: `settled`). A cache that cannot be read is ignored with one log
line.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import itertools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import modelio, ort_modes, tuning

ENV_CACHE = "HEXFUSE_ORT_MODE_CACHE"
CONFIRM = 2  # choices in a row that must agree before later sessions stop choosing (one made on
# a busy machine is not kept for good: 3 explorations of mha_encoder in one run chose 2 modes)
HISTORY = 4  # choices remembered; after this many the most frequent stands
RULE = 12  # in the cache key: choices made by an earlier rule are not reused (before 51e37ff ort-par was
# explored on every model; a remembered choice of it ran silero_decoder_v5 at up to 285x ort-seq; before RULE 4
# another mode had to beat the defaults in every one of up to 4 rounds; before RULE 5 pooled modes were timed
# in twins that spun 1 ms; before RULE 6 calls of other input sizes were compared as timed; before RULE 7 calls
# of two sizes were scaled wrong, which could keep ort-par out; before RULE 8 ort-seq needed LEAVE_GAIN too;
# before RULE 9 ort-par joined only on calls of 0.5 ms or more, not for work in subgraphs, and a pooled
# mode's mean was not weighed; before RULE 10 ort-seq's rounds needed only a median ratio under 1; before RULE 11
# modes were compared by their median call; before RULE 12 ORT's defaults ran the calls made from their pool's CPU
# too, not ort-seq)

Log = Callable[[str], None]


def cache_path() -> Path:
    given = os.environ.get(ENV_CACHE)
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hexfuse_onnx" / "ort_modes.json"


def model_key(model: str | os.PathLike[str] | bytes) -> str:
    """The cache key: the model file's (or bytes') digest, this machine's fingerprint and RULE."""
    if isinstance(model, bytes):
        digest = hashlib.sha256(model).hexdigest()
    else:
        stat = os.stat(model)
        digest = _file_digest(os.fspath(model), stat.st_size, stat.st_mtime_ns)
    return f"{digest[:32]}@{tuning.fingerprint()}/{RULE}"


@functools.lru_cache(maxsize=16)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    """SHA-256 of the file, once per (path, size, mtime): a session looks the cache up, then keys
    its choice by the same digest, and a model may be up to mode_choice.EXPLORE_MAX_BYTES."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def read_cache(path: Path, log: Log) -> dict[str, Any]:
    """The cache's entries; {} when there is none, or (logged once) when it cannot be read."""
    try:
        entries = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log(f"hexfuse: the ORT mode cache {path} cannot be read ({type(exc).__name__}); ignored")
        return {}
    if not isinstance(entries, dict):
        log(f"hexfuse: the ORT mode cache {path} is not a JSON object; ignored")
        return {}
    return entries


def cached_mode(key: str, log: Log) -> tuple[str, dict[str, Any]] | None:
    entry = read_cache(cache_path(), log).get(key)
    if isinstance(entry, dict) and entry.get("mode") in ort_modes.MODES:
        return str(entry["mode"]), entry
    return None


def history(entry: dict[str, Any] | None) -> list[str]:
    """The modes the model's explorations chose here, oldest first (an entry without a history: its mode)."""
    if not isinstance(entry, dict):
        return []
    chosen = entry.get("history", [entry.get("mode")])
    return [m for m in chosen if m in ort_modes.MODES] if isinstance(chosen, list) else []


def settled(chosen: list[str]) -> str | None:
    """The mode later sessions take without choosing: the last CONFIRM choices agree, or after
    HISTORY choices the most frequent (of equals, the latest); None while to be confirmed."""
    if len(chosen) >= CONFIRM and len(set(chosen[-CONFIRM:])) == 1:
        return chosen[-1]
    if len(chosen) >= HISTORY:
        return max(reversed(chosen), key=chosen.count)
    return None


def remember(key: str, entry: dict[str, Any], log: Log) -> Path:
    """Add the entry to the cache, written atomically (a temporary file beside it, then renamed)."""
    path = cache_path()
    entries = read_cache(path, log) | {key: entry}
    path.parent.mkdir(parents=True, exist_ok=True)
    modelio.write_text(path, json.dumps(entries, indent=1, sort_keys=True))
    return path


def agreeing(chosen: list[str]) -> int:
    """How many of the latest choices agree with the last one ([a, a, b]: 1)."""
    return len(list(itertools.takewhile(lambda mode: mode == chosen[-1], reversed(chosen))))


def remember_choice(key: str, mode: str, log: Log, **figures: Any) -> tuple[list[str], str, str]:
    """Add `mode` to the model's choices in the cache with the choice's `figures` (an exploration's medians
    and `Watch.record`; an earlier entry's watch is kept where none is given): the choices, what later
    sessions do, and where it went."""
    earlier = read_cache(cache_path(), log).get(key)
    chosen = (history(earlier) + [mode])[-HISTORY:]
    kept = settled(chosen)
    watch = earlier.get("watch") if isinstance(earlier, dict) else None
    entry = {"mode": kept or mode, "history": chosen, **({"watch": watch} if watch else {}), **figures}
    entry["date"] = _today()
    try:
        where = f"remembered in {remember(key, entry, log)}"
    except OSError as exc:
        where = f"not remembered: {exc}"
    return chosen, (f"later sessions take {kept}" if kept else "the next session chooses again to confirm"), where


def _today() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
