"""Run a computation in a forked child process, so that native code that aborts refuses that computation
with one line instead of killing the pass: onnx 1.23's shape inference asserts (std::clamp with hi < lo,
SIGABRT) on a Slice whose bounds pass a map made small (colocate's share bucket at 1/8 of waifu2x's
image, 16 px, beside a Siamese CNN). The child shares the parent's memory as it was at the fork and sends
its result back pickled; where fork is missing the computation runs in the process.

The child has only the forking thread. Its garbage collector is off: a collection there freed an ONNX
Runtime session left in an old traceback, whose destructor waited forever for pool threads the child does
not have (a CI worker hung so). A child that sends nothing for TIMEOUT_S is killed."""

from __future__ import annotations

import faulthandler
import gc
import os
import pickle
import select
import signal
import time
from collections.abc import Callable
from typing import TypeVar

from .errors import ModelError, first_line

T = TypeVar("T")
TIMEOUT_S = 900.0


def call(compute: Callable[[], T], what: str, timeout_s: float = TIMEOUT_S) -> T:
    """compute()'s result, or its exception; ModelError naming `what` if the child dies or takes too long."""
    if not hasattr(os, "fork"):
        return compute()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, send, leave without the parent's exit handlers or buffers
        gc.disable()
        os.close(read_end)
        faulthandler.disable()  # its death is the parent's one line, not a traceback nor an assertion's text
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
        with os.fdopen(write_end, "wb") as out:
            out.write(_outcome(compute))
        os._exit(0)
    os.close(write_end)
    data = _received(read_end, timeout_s)
    if data is None:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if data is None:
        raise ModelError(f"{what}: no result in {timeout_s:.0f} s")
    if not data:
        raise ModelError(f"{what}: {_death(status)}")
    ok, value = pickle.loads(data)
    if ok:
        return value
    raise value


def _received(fd: int, timeout_s: float) -> bytes | None:
    """Everything the child writes, until it closes its end; None when that takes over timeout_s."""
    deadline, parts = time.monotonic() + timeout_s, list[bytes]()
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([pipe], [], [], left)[0]:
                return None
            part = pipe.read(1 << 20)
            if not part:
                return b"".join(parts)
            parts.append(part)


def _outcome(compute: Callable[[], T]) -> bytes:
    try:
        return pickle.dumps((True, compute()))
    except Exception as exc:  # noqa: BLE001 - sent to the parent, which raises it
        try:
            return pickle.dumps((False, exc))
        except Exception:  # noqa: BLE001 - an exception that does not pickle: its first line
            return pickle.dumps((False, ModelError(first_line(exc))))


def _death(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        name = signal.Signals(number).name if number in signal.Signals._value2member_map_ else str(number)
        return f"native code died there ({name})"
    return f"the child process ended without a result (exit status {os.waitstatus_to_exitcode(status)})"
