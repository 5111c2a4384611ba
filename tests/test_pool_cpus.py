"""The CPUs ORT's default pool pins its threads to, found as a real session is made (hexfuse_onnx/pool_cpus.py)."""

from __future__ import annotations

import os
import threading
import time

import onnxruntime as ort
import pytest

from hexfuse_onnx import mode_choice, ort_modes, pool_cpus

LINUX_SMP = hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) >= 2 and pool_cpus.TASKS.is_dir()


def made(mode: str) -> frozenset[int]:
    """The CPUs the threads of a new session in `mode` are pinned to, once ORT has pinned them (READ_FOR_S)."""
    opts = ort_modes.options(mode)
    session, pool = pool_cpus.made_pinning(lambda: ort.InferenceSession(mode_choice._one_node(), opts))
    for _ in range(pool_cpus.READS):  # the session held: its threads live
        if not session or pool.cpus():
            break
        time.sleep(pool_cpus.READ_EVERY_S)
    return pool.cpus()


def test_cpu_lists_read_as_linux_writes_them():
    assert pool_cpus.parse_cpu_list("0-2,5\n") == {0, 1, 2, 5}
    assert pool_cpus.parse_cpu_list("3") == {3}
    assert pool_cpus.allowed_cpus("Name:\tx\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\n") == {0, 1}
    assert pool_cpus.allowed_cpus("Name:\tx\n") == frozenset()


@pytest.mark.skipif(not LINUX_SMP, reason="needs Linux's /proc and two CPUs at least")
def test_orts_defaults_pin_their_pool_and_a_set_thread_count_pins_nothing():
    pinned = made(ort_modes.DEFAULT)
    assert pinned and pinned < pool_cpus.process_cpus()
    for mode in ("ort-seq", "ort-seq-2t", "ort-par"):
        assert made(mode) == frozenset(), mode


@pytest.mark.skipif(not LINUX_SMP, reason="needs Linux's /proc and two CPUs at least")
def test_a_thread_the_application_pins_itself_is_not_a_pool_thread_unless_started_meanwhile():
    cpu = min(pool_cpus.process_cpus())
    started = threading.Event()
    done = threading.Event()

    def pinned_app_thread() -> None:
        os.sched_setaffinity(0, {cpu})
        started.set()
        done.wait(10)

    app = threading.Thread(target=pinned_app_thread)
    app.start()
    started.wait(10)
    try:
        assert pool_cpus.made_pinning(lambda: None)[1].threads == frozenset()  # started before: not the made thing's
        assert pool_cpus.pinned_among(pool_cpus.thread_ids(), pool_cpus.process_cpus()) >= {cpu}
    finally:
        done.set()
        app.join()


@pytest.mark.skipif(not LINUX_SMP, reason="needs Linux's /proc and two CPUs at least")
def test_the_current_cpu_is_the_one_the_thread_is_held_on():
    seen = []

    def held(cpu: int) -> None:
        os.sched_setaffinity(0, {cpu})
        seen.append((cpu, pool_cpus.current_cpu()))

    for cpu in sorted(pool_cpus.process_cpus())[:2]:
        thread = threading.Thread(target=held, args=(cpu,))
        thread.start()
        thread.join()
    assert seen and all(cpu == found for cpu, found in seen)


@pytest.mark.skipif(not LINUX_SMP, reason="needs Linux's /proc and two CPUs at least")
def test_a_pool_is_read_until_pinned_at_most_once_per_interval_and_at_most_reads_times():
    """ORT 1.32 pins a pool thread from inside it: right after the session is made it may not be pinned yet."""
    cpu = max(pool_cpus.process_cpus())
    ready, pin, done = threading.Event(), threading.Event(), threading.Event()
    tid: list[str] = []

    def pool_thread() -> None:
        tid.append(str(threading.get_native_id()))
        ready.set()
        pin.wait(10)
        os.sched_setaffinity(0, {cpu})
        done.wait(10)

    thread = threading.Thread(target=pool_thread)
    thread.start()
    ready.wait(10)
    now = [0.0]
    try:
        pool = pool_cpus.PinnedPool(frozenset(tid), clock=lambda: now[0])
        assert pool.cpus() == frozenset()  # read: not pinned yet
        pin.set()
        time.sleep(0.05)
        assert pool.cpus() == frozenset()  # within READ_EVERY_S: not read again
        now[0] += pool_cpus.READ_EVERY_S
        assert pool.cpus() == {cpu}
        assert pool_cpus.PinnedPool(frozenset(tid), clock=lambda: now[0] + 3600).cpus() == {cpu}  # asked late: read
    finally:
        pin.set()
        done.set()
        thread.join()


@pytest.mark.skipif(not LINUX_SMP, reason="needs Linux's /proc and two CPUs at least")
def test_a_pool_found_unpinned_reads_times_is_read_no_more():
    """A pool ORT never pins (one of a set size) costs READS reads, then none."""
    now = [0.0]
    pool = pool_cpus.PinnedPool(frozenset({str(threading.get_native_id())}), clock=lambda: now[0])
    allowed = os.sched_getaffinity(0)
    for _ in range(pool_cpus.READS):
        assert pool.cpus() == frozenset()
        now[0] += pool_cpus.READ_EVERY_S
    os.sched_setaffinity(0, {max(allowed)})
    try:
        assert pool.cpus() == frozenset()
    finally:
        os.sched_setaffinity(0, allowed)
