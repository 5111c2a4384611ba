"""Time configurations each in its own worker process: one session per process, as an application has.

Sessions with ORT's default thread pools (intra-op threads pinned to cores, spinning between
calls) slow each other down when several live in one process: on a 2-core VM mlp_chain under
ORT's defaults took 7172 us per call in a process holding 8 sessions and 3772 us alone. `bench`
therefore runs each configuration in a worker of its own, driven from the parent (`tune` and the
drop-in benchmark time sessions of one process instead, resting between visits: interleaved.py):

    with started(configs, feeds, names, reference) as workers:   # each config's `make` runs there
        bounds = workers.time(runs, rounds, warmup)               # alternating blocks, round by round

A worker builds its session with the configuration's `make` (a picklable callable: a module-level
function or a functools.partial of one, e.g. `ort_session`), checks its outputs against the
reference on the same inputs (`bench.verify_config`) and reports; a configuration that fails is
not timed and says why. A session that chooses its ORT mode at run time (`mode_choice`) is run
until it has chosen before anything is timed: the steady state an application sees.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from .bench import Config, first_line, timed_runs, verify_config

SETTLE_S_MAX = 10.0  # how long a run-time mode choice may run before timing starts (it takes >= 0.26 s)
# Idle time before each block: ORT's intra-op threads spin for a while after a call, and a worker
# whose threads still spin takes a core from the next worker's block. Blocks also start from a
# different configuration each round, so no configuration always follows the same one.
SETTLE_S = 0.05


def ort_session(model: str | bytes, mode: str) -> Any:
    """Stock ONNX Runtime (CPU) in one of ORT's modes (ort_modes)."""
    import onnxruntime as ort

    from .. import ort_modes

    return ort.InferenceSession(model, sess_options=ort_modes.options(mode), providers=["CPUExecutionProvider"])


def hexfuse_session(model: str | bytes, mode: str | None = None, **kwargs: Any) -> Any:
    """`hexfuse_onnx.InferenceSession(model, **kwargs)`; mode None: ORT's default session options
    (warnings off), as an application passes none."""
    import onnxruntime as ort

    from .. import ort_modes, runtime

    so = ort_modes.options(mode) if mode else ort.SessionOptions()
    so.log_severity_level = 3
    return runtime.InferenceSession(model, so=so, **kwargs)


class Workers:
    """One worker process per configuration; blocks of runs alternate over them."""

    def __init__(self, configs: list[Config]) -> None:
        self.configs = configs
        self.procs: dict[str, tuple[subprocess.Popen[bytes], IO[bytes], IO[bytes]]] = {}

    def start(self, feeds: dict[str, np.ndarray], names: list[str], reference: list[np.ndarray], steps: Any) -> None:
        for cfg in self.configs:  # one after another: a session choosing its mode must time it alone
            if cfg.make is not None and not cfg.check:
                self.procs[cfg.label] = _spawn()
                self._send(cfg, (cfg.make, feeds, names, reference, cfg.tol, steps))
                reply = self._receive(cfg)
                if reply is not None:
                    cfg.check, cfg.error, chosen = reply
                    if chosen:
                        cfg.extra["ort_mode_chosen"] = chosen

    def time(self, runs: int, rounds: int, warmup: int) -> list[int]:
        """Every live configuration once per round, `runs` spread over `rounds`; the sample count
        of each configuration after each round (0 first): round r is samples[b[r]:b[r+1]]."""
        rounds = max(1, min(rounds, runs))
        bounds = [0]
        gc_was = gc.isenabled()
        gc.disable()  # the parent's collections must not land in a worker's block
        try:
            for r in range(rounds):
                k = runs // rounds + (1 if r < runs % rounds else 0)
                live = self.live()
                for cfg in live[r % len(live) :] + live[: r % len(live)] if live else []:
                    time.sleep(SETTLE_S)  # the last block's worker threads stop spinning first
                    self._send(cfg, (k, warmup))
                    samples = self._receive(cfg)
                    if samples is not None:
                        cfg.samples.extend(samples)
                bounds.append(max((len(c.samples) for c in self.configs), default=0))
        finally:
            if gc_was:
                gc.enable()
        return bounds

    def live(self) -> list[Config]:
        return [c for c in self.configs if c.label in self.procs and not c.check]

    def close(self) -> None:
        for proc, to_worker, from_worker in self.procs.values():
            with contextlib.suppress(OSError):
                pickle.dump(None, to_worker)
                to_worker.close()
            from_worker.close()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()

    def _send(self, cfg: Config, message: Any) -> None:
        _, to_worker, _ = self.procs[cfg.label]
        try:
            pickle.dump(message, to_worker)
            to_worker.flush()
        except OSError as exc:
            cfg.check = f"worker gone: {first_line(exc)}"

    def _receive(self, cfg: Config) -> Any:
        """The worker's reply, or None with cfg.check saying why there is none."""
        if cfg.check:
            return None
        proc, _, from_worker = self.procs[cfg.label]
        try:
            status, value = pickle.load(from_worker)
        except (EOFError, OSError, pickle.UnpicklingError):
            cfg.check = f"worker exited (code {proc.wait()})"
            cfg.samples.clear()  # a configuration is timed in every round or not at all
            return None
        if status == "failed":
            cfg.check = value
            return None
        return value


@contextlib.contextmanager
def started(
    configs: list[Config],
    feeds: dict[str, np.ndarray],
    names: list[str],
    reference: list[np.ndarray],
    steps: dict[str, float] | None = None,
) -> Iterator[Workers]:
    """Workers for the configurations with a `make`, their sessions built and checked."""
    workers = Workers(configs)
    try:
        workers.start(feeds, names, reference, steps)
        yield workers
    finally:
        workers.close()


def _spawn() -> tuple[subprocess.Popen[bytes], IO[bytes], IO[bytes]]:
    to_read, to_write = os.pipe()
    from_read, from_write = os.pipe()
    package_root = str(Path(__file__).resolve().parents[2])  # this copy of hexfuse_onnx, not an installed one
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen(
        [sys.executable, "-m", __name__, str(to_read), str(from_write)],
        pass_fds=(to_read, from_write),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": path},
    )
    os.close(to_read)
    os.close(from_write)
    return proc, os.fdopen(to_write, "wb"), os.fdopen(from_read, "rb")


# ---- the worker ---------------------------------------------------------------------------------


def _serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    def reply(status: str, value: Any) -> None:
        pickle.dump((status, value), replies)
        replies.flush()

    make, feeds, names, reference, tol, steps = pickle.load(requests)
    try:
        session = make()
    except Exception as exc:  # noqa: BLE001 - reported as the configuration's check
        reply("failed", f"session fails: {first_line(exc)}")
        return
    cfg = Config("worker", session, tol=tol)
    verify_config(cfg, feeds, names, reference, steps=steps)
    settle(session, feeds)
    reply("ready", (cfg.check, cfg.error, getattr(session, "mode", None)))
    run: Callable[..., Any] = session.run
    gc.disable()  # a collection inside a timed run is noise
    while (request := pickle.load(requests)) is not None:
        runs, warmup = request
        reply("ok", timed_runs(run, feeds, runs, warmup))


def settle(session: Any, feeds: dict[str, np.ndarray]) -> None:
    """Run a session that is still choosing its ORT mode at run time until it has chosen."""
    deadline = time.monotonic() + SETTLE_S_MAX
    while getattr(session, "choosing", False) and time.monotonic() < deadline:
        session.run(None, feeds)


if __name__ == "__main__":
    with os.fdopen(int(sys.argv[1]), "rb") as requests, os.fdopen(int(sys.argv[2]), "wb") as replies:
        _serve(requests, replies)
