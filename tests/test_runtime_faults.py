"""Faults around the FusedHexPair plugin (hexfuse_onnx/_lib/libhexfuse_ort.so) and its kernel.

- A corrupted `program` attribute (random bytes, truncated, version bumped, header fields that
  lie, the program of another pair, a wrong attribute type) and a few hundred random byte
  mutations: a clear error at session creation (or, where the bytes still form a valid program,
  a clean error or a run), never a crash. Sessions are created in a child process, so a crash
  shows up as a signal, not as a dead test run.
- Backends: `hexagon` without a cDSP is a clear error (`auto` without a cDSP: tests/test_tune.py).
- Workers: HEXFUSE_WORKERS out of range, or threads that cannot be created (address-space limit),
  is a clear error; a failed pool is not cached, a fixed setting works in the same process.
- Scratch: the plugin exposes no arena-size setting (hfx.rs Pool::shared keeps the kernel's
  default 8 MiB from hfx_pool_config_init; no environment variable). The kernel's C API refuses an
  impossible arena (HFX_ERR_NOMEM) and too many workers (HFX_ERR_ARG); a task whose scratch does
  not fit the plugin's arena fails at run with HFX_ERR_BUDGET, cleanly.
- Load: runs across 8 threads and 3 sessions of two zoo models, every result compared with the
  fallback (stock ORT on the same fused model), RSS growth after warm-up bounded.
  HEXFUSE_LOAD_RUNS (default 10000) sets the number of runs.

Tests marked `xfail(strict=True, reason="BUG: ...")` describe real defects.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from hexfuse_onnx import contract as C
from hexfuse_onnx import pipeline, runtime
from hexfuse_onnx.errors import VerificationError
from models.graph_builder import GraphBuilder

REPO = Path(__file__).resolve().parents[1]
PLUGIN_TOL = 1e-4
LOAD_RUNS = int(os.environ.get("HEXFUSE_LOAD_RUNS", "10000"))
RSS_GROWTH_LIMIT_MB = 50

pytestmark = [
    pytest.mark.slow,  # plugin sessions, ~0.5 s each: the runtime's tier, outside the pass's fast one
    pytest.mark.skipif(
        not (runtime.LIB_DIR / runtime.PLUGIN_NAME).is_file(),
        reason=f"{runtime.LIB_DIR / runtime.PLUGIN_NAME} not built: run `bash custom_ops/build.sh`",
    ),
]


# ---------------------------------------------------------------------------------------
# Models


def two_branch_like(rows: int, d_in: int = 256, hid: int = 512, name: str = "two_branch_like") -> onnx.ModelProto:
    """two_branch's shape (a matrix branch and a vector branch joined by a Concat), any size."""
    g = GraphBuilder(name, 0)
    x = g.input("x", [rows, d_in])
    h = g.op("MatMul", [x, g.weight("m/w0", [d_in, hid])], "m/mm0")
    h = g.op("Relu", [h], "m/relu")
    a = g.op("MatMul", [h, g.weight("m/w1", [hid, d_in])], "m/mm1")
    v = g.op("Sigmoid", [x], "v/sigmoid")
    v = g.op("Tanh", [v], "v/tanh")
    v = g.op("Softmax", [v], "v/softmax", axis=-1)
    g.op("Concat", [a, v], "join", outputs=["y"], axis=1)
    g.output("y", [rows, 2 * d_in])
    return g.model()


@pytest.fixture(scope="module")
def fused(zoo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Rewritten models (with task programs) by name."""
    out = tmp_path_factory.mktemp("faults")
    paths = {"two_branch": zoo_dir / "two_branch.onnx", "mha_encoder": zoo_dir / "mha_encoder.onnx"}
    onnx.save(two_branch_like(32), out / "rows32.onnx")
    paths["rows32"] = out / "rows32.onnx"
    onnx.save(two_branch_like(64), out / "rows64.onnx")
    paths["rows64"] = out / "rows64.onnx"
    result = {}
    for name, src in paths.items():
        r = pipeline.rewrite(src, out / f"{name}.fused.onnx")
        assert r.output is not None, name
        m = onnx.load(r.output)
        assert all(any(a.name == C.ATTR_PROGRAM for a in n.attribute) for n in m.graph.node if n.domain == C.DOMAIN)
        result[name] = r.output
        result[f"{name}.original"] = src
    return result


def program_of(path: Path) -> bytes:
    m = onnx.load(path)
    return next(a.s for n in m.graph.node if n.domain == C.DOMAIN for a in n.attribute if a.name == C.ATTR_PROGRAM)


def edited(path: Path, edit) -> bytes:
    """The model with `edit(node)` applied to its FusedHexPair node."""
    m = onnx.load(path)
    for n in m.graph.node:
        if n.domain == C.DOMAIN:
            edit(n)
    return m.SerializeToString()


def with_program(path: Path, program: bytes) -> bytes:
    def edit(n: onnx.NodeProto) -> None:
        for a in n.attribute:
            if a.name == C.ATTR_PROGRAM:
                a.s = program

    return edited(path, edit)


def with_attribute(path: Path, attr: onnx.AttributeProto) -> bytes:
    def edit(n: onnx.NodeProto) -> None:
        keep = [a for a in n.attribute if a.name != attr.name]
        del n.attribute[:]
        n.attribute.extend(keep + [attr])

    return edited(path, edit)


# The program header (lowering/program.py Program.encode): "<IHHIIII4HIIII" = magic, version, header bytes,
# total bytes, flags, n_tensors, n_ops, n_io[4], tensors offset, ops offset, data offset, data bytes.
HEADER = struct.Struct("<IHHIIII4HIIII")


def patch_header(program: bytes, **fields: int) -> bytes:
    names = [
        "magic",
        "version",
        "header_bytes",
        "total",
        "flags",
        "n_tensors",
        "n_ops",
        "in_a",
        "in_b",
        "out_a",
        "out_b",
        "tensors_off",
        "ops_off",
        "data_off",
        "data_bytes",
    ]
    values = dict(zip(names, HEADER.unpack_from(program)))
    values.update(fields)
    return HEADER.pack(*[values[n] for n in names]) + program[HEADER.size :]


# ---------------------------------------------------------------------------------------
# A child process that creates plugin sessions and reports each outcome as one JSON line.

SESSION_DRIVER = textwrap.dedent(r"""
    import json, sys
    import numpy as np, onnxruntime as ort
    from hexfuse_onnx import runtime, verify
    cases = json.load(open(sys.argv[1]))
    for case in cases:
        print(json.dumps({"start": case["id"]}), flush=True)
        res = {"id": case["id"]}
        try:
            so = runtime.session_options("host")
            so.log_severity_level = 4
            so.intra_op_num_threads = 1
            s = ort.InferenceSession(open(case["model"], "rb").read(), so, providers=["CPUExecutionProvider"])
            res["created"] = True
        except Exception as exc:
            res["created"] = False
            res["error"] = f"{type(exc).__name__}: {exc}"
        if res["created"] and case.get("run", True):
            ref = verify.session(case["reference"])
            feeds = verify.random_inputs(ref, seed=5)
            try:
                got = s.run(None, feeds)
                want = ref.run(None, feeds)
                res["ran"] = True
                res["match"] = bool(all(g.shape == w.shape and verify.relative_error(w, g) <= 1e-4
                                        for g, w in zip(got, want)))
            except Exception as exc:
                res["ran"] = False
                res["run_error"] = f"{type(exc).__name__}: {exc}"
        print(json.dumps(res), flush=True)
""")


def run_resuming(
    argv: list[str], cases: list, case_id, spec: Path, timeout: float, env: dict[str, str] | None = None
) -> dict[str, dict]:
    """Run `python -c argv... spec` on the cases (written to `spec` as JSON); the child prints a
    {"start": id} line before each case and the case's result after it. A case during which the
    child died gets {"crashed": exit status}, and the child is started again on the rest."""
    results: dict[str, dict] = {}
    pending = list(cases)
    while pending:
        spec.write_text(json.dumps(pending))
        proc = subprocess.run(
            [sys.executable, "-c", *argv, str(spec)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **(env or {})},
        )
        started = None
        for line in proc.stdout.splitlines():
            rec = json.loads(line)
            if "start" in rec:
                started = rec["start"]
            else:
                results[rec["id"]] = rec
                started = None
        if proc.returncode != 0:
            assert started is not None, f"child failed outside a case (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
            results[started] = {"id": started, "crashed": proc.returncode, "stderr": proc.stderr[-2000:]}
        pending = [c for c in pending if case_id(c) not in results]
    return results


def run_sessions(cases: list[dict], folder: Path, env: dict[str, str] | None = None) -> dict[str, dict]:
    """Each case's outcome; a case whose session crashed the child gets {"crashed": signal}."""
    return run_resuming([SESSION_DRIVER], cases, lambda c: c["id"], folder / "cases.json", 600, env)


def clear_error(message: str, *words: str, node: bool = True) -> None:
    """One ONNX Runtime error naming the FusedHexPair node (or, for the process-wide worker pool,
    the plugin) and the given words."""
    assert ("FusedHexPair node 'hexfuse/pair0'" if node else "hexfuse: ") in message, message
    for w in words:
        assert w in message, f"{w!r} not in: {message}"
    assert "panic" not in message.lower(), message
    assert len(message.strip().splitlines()) == 1, message


# ---------------------------------------------------------------------------------------
# Corrupted programs


def _corruptions(fused: dict[str, Path]) -> dict[str, tuple[bytes, tuple[str, ...]]]:
    """id -> (model bytes, words the session-creation error must contain)."""
    tb = fused["two_branch"]
    prog = program_of(tb)
    rng = np.random.default_rng(0)
    not_valid = "is not a valid task program"
    cases: dict[str, tuple[bytes, tuple[str, ...]]] = {
        "random_bytes": (with_program(tb, rng.bytes(len(prog))), (not_valid,)),
        "random_bytes_valid_magic": (with_program(tb, prog[:4] + rng.bytes(len(prog) - 4)), (not_valid,)),
        "truncated_to_header": (with_program(tb, prog[: HEADER.size]), (not_valid, "HFX_ERR_TRUNCATED")),
        "truncated_inside_header": (with_program(tb, prog[: HEADER.size - 1]), (not_valid, "HFX_ERR_TRUNCATED")),
        "truncated_one_byte": (with_program(tb, prog[:-1]), (not_valid,)),
        "empty": (with_program(tb, b""), (not_valid,)),
        "version_bumped": (with_program(tb, patch_header(prog, version=3)), (not_valid, "HFX_ERR_VERSION")),
        "version_zero": (with_program(tb, patch_header(prog, version=0)), (not_valid, "HFX_ERR_VERSION")),
        "total_bytes_too_large": (with_program(tb, patch_header(prog, total=len(prog) + 64)), (not_valid,)),
        "n_tensors_huge": (with_program(tb, patch_header(prog, n_tensors=0xFFFFFFFF)), (not_valid,)),
        "n_ops_huge": (with_program(tb, patch_header(prog, n_ops=0xFFFFFFFF)), (not_valid,)),
        "ops_offset_past_end": (with_program(tb, patch_header(prog, ops_off=len(prog) + 4096)), (not_valid,)),
        "io_counts_swapped": (with_program(tb, patch_header(prog, in_a=1, in_b=5)), ()),
        "appended_garbage": (with_program(tb, prog + b"\xff" * 100), ()),
        "from_another_pair": (with_program(tb, program_of(fused["mha_encoder"])), ("task program",)),
        "program_not_bytes": (with_attribute(tb, helper.make_attribute(C.ATTR_PROGRAM, 7)), ("'program'",)),
        "share_a_out_of_range": (with_attribute(tb, helper.make_attribute(C.ATTR_SHARE_A, 1.5)), ("share_a",)),
        "checksum_wrong": (
            with_program(tb, prog[:-4] + bytes(b ^ 0xFF for b in prog[-4:])),
            (not_valid, "checksum mismatch"),
        ),
        "checksum_flag_cleared": (with_program(tb, patch_header(prog, flags=0)), (not_valid,)),
    }
    return cases


@pytest.fixture(scope="module")
def corruption_results(fused, tmp_path_factory):
    folder = tmp_path_factory.mktemp("corrupt")
    cases, expected = [], {}
    for cid, (model, words) in _corruptions(fused).items():
        path = folder / f"{cid}.onnx"
        path.write_bytes(model)
        cases.append({"id": cid, "model": str(path), "reference": str(fused["two_branch"])})
        expected[cid] = words
    assert sorted(expected) == sorted(CORRUPTION_IDS), "CORRUPTION_IDS must list every case of _corruptions"
    return run_sessions(cases, folder), expected


CORRUPTION_IDS = [
    "random_bytes",
    "random_bytes_valid_magic",
    "truncated_to_header",
    "truncated_inside_header",
    "truncated_one_byte",
    "empty",
    "version_bumped",
    "version_zero",
    "total_bytes_too_large",
    "n_tensors_huge",
    "n_ops_huge",
    "ops_offset_past_end",
    "io_counts_swapped",
    "appended_garbage",
    "from_another_pair",
    "program_not_bytes",
    "share_a_out_of_range",
    "checksum_wrong",
    "checksum_flag_cleared",
]


@pytest.mark.parametrize("case", CORRUPTION_IDS)
def test_corrupt_program_fails_at_session_creation(case, corruption_results):
    results, expected = corruption_results
    r = results[case]
    assert "crashed" not in r, f"the session creation crashed the process (exit {r.get('crashed')}):\n{r.get('stderr')}"
    assert r["created"] is False, f"a corrupt program was accepted: {r}"
    clear_error(r["error"], *expected[case])


def test_program_of_same_arity_other_shapes_fails_cleanly(fused, tmp_path):
    """The program of a pair with the same inputs/outputs but another row count (32 vs 64):
    the counts match, so ORT creates the kernel; the first run must fail naming the shapes."""
    model = tmp_path / "swapped.onnx"
    model.write_bytes(with_program(fused["rows64"], program_of(fused["rows32"])))
    r = run_sessions([{"id": "swap", "model": str(model), "reference": str(fused["rows64"])}], tmp_path)["swap"]
    assert "crashed" not in r, r
    message = r.get("error") if not r["created"] else r.get("run_error")
    assert message, f"a program lowered for 32 rows ran on 64 rows: {r}"
    clear_error(message, "[64,256]", "[32,256]")


def test_program_version_attribute_must_match_the_program(fused, tmp_path):
    """`program_version` (the node attribute) and the version inside the program bytes must agree:
    a node whose attributes were edited apart is refused at session creation, naming both."""
    model = tmp_path / "attr_version.onnx"
    model.write_bytes(with_attribute(fused["two_branch"], helper.make_attribute(C.ATTR_PROGRAM_VERSION, 99)))
    r = run_sessions([{"id": "v", "model": str(model), "reference": str(fused["two_branch"])}], tmp_path)["v"]
    assert "crashed" not in r, r
    assert not r["created"], r
    clear_error(r["error"], "program_version = 99", "version 1")


# Mutations are applied in the child (one model in memory, its program edited per case), so that
# thousands of cases cost no disk. Each case prints a start line first: a crash names its case.
MUTATION_DRIVER = textwrap.dedent(r"""
    import json, sys
    import onnx, onnxruntime as ort
    from hexfuse_onnx import runtime, verify
    path, cases_file = sys.argv[1], sys.argv[2]
    model = onnx.load(path)
    node = next(n for n in model.graph.node if n.domain == "hexfuse")
    attr = next(a for a in node.attribute if a.name == "program")
    program = attr.s
    ref = verify.session(path)
    feeds = verify.random_inputs(ref, seed=5)
    want = ref.run(None, feeds)
    for cid, edits in json.load(open(cases_file)):
        b = bytearray(program)
        for pos, xor in edits:
            b[pos] ^= xor
        attr.s = bytes(b)
        print(json.dumps({"start": cid}), flush=True)
        res = {"id": cid}
        so = runtime.session_options("host")
        so.log_severity_level = 4
        so.intra_op_num_threads = 1
        try:
            s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
            res["created"] = True
        except Exception as exc:
            res["created"] = False
            res["error"] = f"{type(exc).__name__}: {exc}"
        if res["created"]:
            try:
                got = s.run(None, feeds)
                res["ran"] = True
                res["match"] = bool(all(g.shape == w.shape and verify.relative_error(w, g) <= 1e-4
                                        for g, w in zip(got, want)))
            except Exception as exc:
                res["ran"] = False
                res["run_error"] = f"{type(exc).__name__}: {exc}"
        print(json.dumps(res), flush=True)
""")


def run_mutations(path: Path, cases: list[tuple[str, list[tuple[int, int]]]], folder: Path) -> dict[str, dict]:
    return run_resuming([MUTATION_DRIVER, str(path)], cases, lambda c: c[0], folder / "mutations.json", 1200)


def _check_mutations(label: str, results: dict[str, dict]) -> None:
    """No mutated program crashes, and (the lowering's programs carry a CRC-32) every one is
    refused at session creation with a clear error."""
    crashed = {k: v["crashed"] for k, v in results.items() if "crashed" in v}
    refused = [v for v in results.values() if v.get("created") is False]
    ran = [v for v in results.values() if v.get("ran")]
    run_failed = [v for v in results.values() if v.get("created") and v.get("ran") is False]
    wrong = [v["id"] for v in ran if not v["match"]]
    print(
        f"\n[mutations] {label}: {len(results)} programs: refused at creation {len(refused)}, failed at run "
        f"{len(run_failed)}, ran {len(ran)} (results differ from the fallback: {len(wrong)}; e.g. {wrong[:6]}), "
        f"crashed {len(crashed)}"
    )
    assert not crashed, f"mutated programs crashed the process (case: exit code): {crashed}"
    accepted = sorted(set(results) - {v["id"] for v in refused})
    assert not accepted, f"mutated programs accepted: {accepted[:10]}"
    for v in refused:
        clear_error(v["error"], "task program")
    for v in run_failed:
        assert "FusedHexPair node" in v["run_error"] and "panic" not in v["run_error"].lower(), v


def test_every_single_bit_flip_of_a_program_is_safe(fused, tmp_path):
    """Bit 0 flipped at every byte of two_branch's program, one byte at a time: every flip is
    refused at session creation (the CRC-32 trailer; before it, a flipped alpha or unary opcode ran
    and gave wrong results silently), and nothing crashes."""
    prog = program_of(fused["two_branch"])
    cases = [(f"byte{pos}", [(pos, 0x01)]) for pos in range(len(prog))]
    _check_mutations("two_branch, bit 0 of every byte", run_mutations(fused["two_branch"], cases, tmp_path))


MUTATIONS = int(os.environ.get("HEXFUSE_PROGRAM_MUTATIONS", "400"))


def test_random_program_mutations_never_crash(fused, tmp_path):
    """Seeded 1-4 byte mutations (random values or bit flips) of mha_encoder's program."""
    rng = np.random.default_rng(1234)
    prog = program_of(fused["mha_encoder"])
    cases = []
    for k in range(MUTATIONS):
        edits = []
        for _ in range(int(rng.integers(1, 5))):
            pos = int(rng.integers(0, len(prog)))
            edits.append((pos, int(rng.integers(1, 256)) if rng.random() < 0.5 else 1 << int(rng.integers(0, 8))))
        cases.append((f"m{k}", edits))
    _check_mutations("mha_encoder, 1-4 random bytes", run_mutations(fused["mha_encoder"], cases, tmp_path))


# ---------------------------------------------------------------------------------------
# Backends


def test_hexagon_backend_without_a_dsp_is_a_clear_error(fused):
    with pytest.raises(runtime.RuntimeUnavailable) as info:
        runtime.InferenceSession(fused["two_branch"], backend="hexagon")
    message = info.value.message
    assert "hexagon backend unavailable" in message and "\n" not in message
    assert "libcdsprpc.so" in message


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(runtime.RuntimeUnavailable, match=r"unknown backend 'gpu' \(known: auto, host, hexagon\)"):
        runtime.session_options(backend="gpu")


# ---------------------------------------------------------------------------------------
# Workers


def test_workers_below_one_is_refused_in_python():
    with pytest.raises(runtime.RuntimeUnavailable, match="workers must be >= 1, got 0"):
        runtime.session_options(backend="host", workers=0)


@pytest.mark.parametrize("value", ["0", "-1", "257", "100000", "abc", "1.5", ""])
def test_bad_worker_count_fails_at_session_creation(fused, tmp_path, value):
    r = run_sessions(
        [{"id": "w", "model": str(fused["two_branch"]), "reference": str(fused["two_branch"])}],
        tmp_path,
        env={runtime.ENV_WORKERS: value},
    )["w"]
    assert "crashed" not in r, r
    assert r["created"] is False, f"HEXFUSE_WORKERS={value!r} was accepted"
    clear_error(r["error"], f"HEXFUSE_WORKERS='{value}' is not a worker count (an integer from 1 to 256)", node=False)


@pytest.mark.parametrize("value", ["1", "256"])
def test_worker_count_limits_work(fused, tmp_path, value):
    r = run_sessions(
        [{"id": "w", "model": str(fused["mha_encoder"]), "reference": str(fused["mha_encoder"])}],
        tmp_path,
        env={runtime.ENV_WORKERS: value},
    )["w"]
    assert r.get("created") and r.get("ran") and r.get("match"), r


# Threads that cannot be created: the child caps its address space just above what it uses, so
# the pool's 257 thread stacks (8 MiB each) cannot be mapped. Then it lifts the cap, fixes
# HEXFUSE_WORKERS and tries again in the same process: a failed pool is not cached.
THREADS_DRIVER = textwrap.dedent(r"""
    import json, os, resource, sys
    import numpy as np, onnxruntime as ort
    from hexfuse_onnx import runtime, verify
    path, ref_path = sys.argv[1], sys.argv[2]
    ref = verify.session(ref_path)
    feeds = verify.random_inputs(ref, seed=2)
    want = ref.run(None, feeds)
    def make():
        so = runtime.session_options("host")
        so.log_severity_level = 4
        so.intra_op_num_threads = 1
        return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    vm = int(next(l for l in open("/proc/self/status") if l.startswith("VmSize")).split()[1]) * 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    os.environ["HEXFUSE_WORKERS"] = "256"
    out = {}
    resource.setrlimit(resource.RLIMIT_AS, (vm + (400 << 20), hard))
    try:
        make()
        out["first"] = "created"
    except Exception as exc:
        out["first"] = f"{type(exc).__name__}: {exc}"
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    os.environ["HEXFUSE_WORKERS"] = "2"
    s = make()
    got = s.run(None, feeds)
    out["second_match"] = bool(all(verify.relative_error(w, g) <= 1e-4 for w, g in zip(want, got)))
    print(json.dumps(out))
""")


def test_worker_threads_that_cannot_start_are_a_clear_error(fused):
    proc = subprocess.run(
        [sys.executable, "-c", THREADS_DRIVER, str(fused["two_branch"]), str(fused["two_branch.original"])],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr[-3000:]}"
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if out["first"] == "created":
        pytest.skip("256 worker threads started within the address-space cap; cannot provoke the failure here")
    clear_error(out["first"], "cannot start the worker pool (256 vector workers)", "HFX_ERR_PLATFORM", node=False)
    assert out["second_match"], "after a failed pool, a good setting did not give correct results"


# ---------------------------------------------------------------------------------------
# Scratch (the on-chip arena)

HOST_API_DRIVER = textwrap.dedent(r"""
    import ctypes, json
    from hexfuse_onnx import runtime
    lib = ctypes.CDLL(str(runtime.host_library_path()))
    lib.hfx_status_name.restype = ctypes.c_char_p
    lib.hfx_pool_config_init.argtypes = [ctypes.POINTER(runtime._PoolConfig)]
    lib.hfx_pool_create.argtypes = [ctypes.POINTER(runtime._PoolConfig), ctypes.POINTER(ctypes.c_void_p)]
    lib.hfx_pool_destroy.argtypes = [ctypes.c_void_p]
    out = {}
    for name, field, value in (("default", None, None), ("arena_2_60", "arena_bytes", 1 << 60),
                               ("arena_max", "arena_bytes", (1 << 64) - 1), ("workers_2000", "n_vector_workers", 2000),
                               ("no_workers", "n_vector_workers", 0), ("flags", "flags", 0xFF00)):
        cfg = runtime._PoolConfig()
        lib.hfx_pool_config_init(ctypes.byref(cfg))
        if name == "no_workers":
            cfg.n_matrix_workers = 0
        if field:
            setattr(cfg, field, value)
        pool = ctypes.c_void_p()
        st = lib.hfx_pool_create(ctypes.byref(cfg), ctypes.byref(pool))
        out[name] = {"status": lib.hfx_status_name(st).decode(), "pool": bool(pool.value)}
        if pool.value:
            lib.hfx_pool_destroy(pool)
    out["default_arena"] = None
    cfg = runtime._PoolConfig()
    lib.hfx_pool_config_init(ctypes.byref(cfg))
    out["default_arena"] = cfg.arena_bytes
    print(json.dumps(out))
""")


def test_kernel_api_refuses_impossible_pools():
    """The plugin sets no arena size; the C API does. An arena that cannot be allocated is
    HFX_ERR_NOMEM, too many or no workers and unknown flags are HFX_ERR_ARG; no pool is returned."""
    proc = subprocess.run(
        [sys.executable, "-c", HOST_API_DRIVER], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["default"] == {"status": "HFX_OK", "pool": True}
    assert out["arena_2_60"] == {"status": "HFX_ERR_NOMEM", "pool": False}
    assert out["arena_max"] == {"status": "HFX_ERR_NOMEM", "pool": False}
    assert out["workers_2000"] == {"status": "HFX_ERR_ARG", "pool": False}
    assert out["no_workers"] == {"status": "HFX_ERR_ARG", "pool": False}
    assert out["flags"] == {"status": "HFX_ERR_ARG", "pool": False}
    assert out["default_arena"] == 8 << 20


@pytest.fixture
def oversized_host_target(monkeypatch):
    """A host target that believes in a 32 MiB on-chip budget, four times the plugin's arena: the
    pass then chooses pairs the kernel cannot place, which is what these tests need."""
    from dataclasses import replace

    from hexfuse_onnx import costmodel

    big = replace(costmodel.HOST, onchip_bytes=costmodel.Param(32 * 2**20, "B", "test: larger than the arena"))
    monkeypatch.setitem(costmodel.TARGETS, "host", big)
    # and a lowering that believes in it too (a program from before the lowering's arena check, bda9e89):
    # the kernel must still refuse it cleanly at run
    monkeypatch.setattr("hexfuse_onnx.lowering.lowerer.ARENA_BYTES", 32 * 2**20)
    return big


@pytest.fixture(scope="module")
def big_scratch(tmp_path_factory) -> Path:
    """A two-branch model whose matrix task keeps a 1024x1536 fp32 intermediate (6 MiB) plus its
    input and the Relu's output: more scratch than the plugin's 8 MiB arena."""
    folder = tmp_path_factory.mktemp("scratch")
    path = folder / "big_scratch.onnx"
    onnx.save(two_branch_like(1024, hid=1536, name="big_scratch"), path)
    return path


KEEP_ANY_PAIR = -1.0  # the pair is the subject, paying or not: two GEMM branches gain ~0 on the host's one worker


def test_scratch_over_the_arena_fails_cleanly_at_run(big_scratch, tmp_path, oversized_host_target):
    """A lowered pair whose task scratch exceeds the pool's arena: a clean HFX_ERR_BUDGET at run."""
    from hexfuse_onnx.rewrite import fuse, prepare

    a = pipeline.analyse(big_scratch, target="host", min_gain=KEEP_ANY_PAIR)
    assert a.pairs, "the host target should pair the two branches"
    failed = prepare(a.graph, a.pairs[:1], a.target)
    assert not failed, failed
    model = fuse(a.graph, a.pairs[:1])
    path = tmp_path / "lowered.onnx"
    onnx.save(model, path)
    r = run_sessions([{"id": "b", "model": str(path), "reference": str(big_scratch)}], tmp_path)["b"]
    assert "crashed" not in r, r
    assert r["created"] and r["ran"] is False, r
    clear_error(r["run_error"], "the kernel failed: HFX_ERR_BUDGET")


def test_host_target_never_pairs_beyond_the_plugins_arena(big_scratch, tmp_path):
    """The host target's on-chip budget is the plugin's arena: a pair that would not fit is refused."""
    r = pipeline.rewrite(big_scratch, tmp_path / "fused.onnx", target="host")
    assert r.output is None
    assert any("on-chip budget" in x.reason for x in r.analysis.rejected)


# Regression: pipeline._failing_pairs re-verified each pair with stage(fuse(...)) but without
# attaching programs, so with verify_plugin=True every single-pair model lacked its 'program'
# and every pair was dropped as "has no 'program' attribute", hiding the real failure.
def test_plugin_verification_drops_pairs_for_their_real_reason(big_scratch, tmp_path, oversized_host_target):
    messages: list[str] = []
    try:
        r = pipeline.rewrite(
            big_scratch,
            tmp_path / "fused.onnx",
            target="host",
            verify_plugin=True,
            progress=messages.append,
            min_gain=KEEP_ANY_PAIR,
        )
        reasons = [x.reason for x in r.analysis.rejected]
    except VerificationError as exc:
        reasons = [exc.message]
    text = "\n".join(messages + reasons)
    assert "no 'program' attribute" not in text, text
    assert "HFX_ERR_BUDGET" in text, text  # the real reason the pair cannot run


# ---------------------------------------------------------------------------------------
# Load: many runs, many threads, several sessions

LOAD_DRIVER = textwrap.dedent(r"""
    import gc, json, resource, sys, threading, time
    import numpy as np, onnxruntime as ort
    from hexfuse_onnx import runtime, verify
    cfg = json.loads(sys.argv[1])
    def rss_mb():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    out = {"rss_start_mb": rss_mb()}
    cases = {}
    for name, path in cfg["models"].items():
        fallback = verify.session(path)          # stock ORT: the function bodies run
        cases[name] = []
        for k in range(cfg["inputs"]):
            feeds = verify.random_inputs(fallback, seed=100 + k)
            cases[name].append((feeds, fallback.run(None, feeds)))
    sessions = []
    for name in cfg["sessions"]:
        so = runtime.session_options("host")
        so.log_severity_level = 3
        so.intra_op_num_threads = 1
        sessions.append((name, ort.InferenceSession(cfg["models"][name], so, providers=["CPUExecutionProvider"])))
    def one(i, sid):
        name, s = sessions[sid]
        feeds, want = cases[name][i % len(cases[name])]
        got = s.run(None, feeds)
        return max(verify.relative_error(w, g) if w.shape == g.shape else float("inf") for w, g in zip(want, got))
    for i in range(cfg["warmup"]):
        for sid in range(len(sessions)):
            one(i, sid)
    gc.collect()
    out["rss_after_warmup_mb"] = rss_mb()
    counts, worst, errors, failures = [0] * cfg["threads"], [0.0] * cfg["threads"], [], []
    mid = {}
    def work(t):
        n = cfg["runs"] // cfg["threads"] + (1 if t < cfg["runs"] % cfg["threads"] else 0)
        for i in range(n):
            try:
                err = one(i * cfg["threads"] + t, (t + i) % len(sessions))
            except Exception as exc:
                failures.append(f"thread {t} run {i}: {type(exc).__name__}: {exc}")
                continue
            counts[t] += 1
            worst[t] = max(worst[t], err)
            if not err <= cfg["tol"]:
                errors.append(f"thread {t} run {i} session {(t + i) % len(sessions)}: relative error {err}")
            if t == 0 and i == n // 2:
                mid["rss"] = rss_mb()
    threads = [threading.Thread(target=work, args=(t,)) for t in range(cfg["threads"])]
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    out["seconds"] = time.perf_counter() - t0
    gc.collect()
    out.update(runs=sum(counts), worst=max(worst), errors=errors[:10], n_errors=len(errors),
               failures=failures[:10], n_failures=len(failures), rss_mid_mb=mid.get("rss"), rss_end_mb=rss_mb(),
               maxrss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(json.dumps(out))
""")


def run_load(fused: dict[str, Path], runs: int) -> dict:
    cfg = {
        "models": {"two_branch": str(fused["two_branch"]), "mha_encoder": str(fused["mha_encoder"])},
        "sessions": ["two_branch", "mha_encoder", "two_branch"],
        "threads": 8,
        "runs": runs,
        "warmup": 30,
        "inputs": 8,
        "tol": PLUGIN_TOL,
    }
    proc = subprocess.run(
        [sys.executable, "-c", LOAD_DRIVER, json.dumps(cfg)], cwd=REPO, capture_output=True, text=True, timeout=1800
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr[-3000:]}"
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    growth = out["rss_end_mb"] - out["rss_after_warmup_mb"]
    print(
        f"\n[load] {out['runs']} runs, 8 threads, 3 sessions (two_branch x2, mha_encoder) in {out['seconds']:.1f} s; "
        f"worst relative error {out['worst']:.2e}; RSS start {out['rss_start_mb']:.0f} MB, after warm-up "
        f"{out['rss_after_warmup_mb']:.0f} MB, mid {out['rss_mid_mb'] or 0:.0f} MB, end {out['rss_end_mb']:.0f} MB "
        f"(growth {growth:+.1f} MB), peak {out['maxrss_mb']:.0f} MB"
    )
    assert out["n_failures"] == 0, out["failures"]
    assert out["n_errors"] == 0, out["errors"]
    assert out["runs"] == runs
    assert growth < RSS_GROWTH_LIMIT_MB, f"RSS grew {growth:.1f} MB after warm-up over {runs} runs"
    if out["rss_mid_mb"] is not None:  # a leak keeps growing; allocator warm-up levels off
        second_half = out["rss_end_mb"] - out["rss_mid_mb"]
        assert second_half < RSS_GROWTH_LIMIT_MB / 2, f"RSS grew {second_half:.1f} MB in the second half alone"
    return out


def test_load_many_threads_many_sessions(fused):
    run_load(fused, LOAD_RUNS)
