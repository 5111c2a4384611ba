"""The `hexagon` backend of the FusedHexPair plugin: the FastRPC client (custom_ops/src/fastrpc_client.c),
the hand-written marshalling (dsp/include/hexfuse/rpc_abi.h) and the DSP-side skeleton dispatcher +
methods (dsp/hexagon/skel/).

There is no cDSP here. HEXFUSE_CDSPRPC_LIB points the plugin at hexfuse_onnx/_lib/libhexfuse_rpc_loopback.so,
a TEST STAND-IN for libcdsprpc.so: its remote_handle64_open/invoke/close hand the client's remote_arg
buffers (copied, as FastRPC copies them) to the skeleton dispatcher in the same process, which runs the
kernel on the host. So what runs here is the plugin's backend selection, the client's marshalling, the
dispatcher's checks and the kernel; the FastRPC transport and the device never run.

- (a) backend=hexagon on the loopback runs rewritten zoo models and matches the original (fp32, 1e-4); the
  trace says the hexagon backend ran; threads share one session.
- (b) malformed calls straight into the dispatcher (ctypes): wrong scalars, short or NULL buffers, bad
  program ids, forged/closed handles return AEE error codes; the session keeps working.
- (c) backend=hexagon without libcdsprpc (or with a library that lacks the symbols, or whose open fails)
  is a clear error at session creation, from Python and from the plugin itself; auto falls back to host
  and the plugin says why once per process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import shutil
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from plugin_support import concurrent_errors, lower_zoo
from plugin_support import reference as zoo_reference

from hexfuse_onnx import contract as C
from hexfuse_onnx import runtime, verify

ROOT = Path(__file__).resolve().parents[1]
LOOPBACK = runtime.LIB_DIR / runtime.LOOPBACK_NAME
MODELS = ["two_branch", "mha_encoder", "gpt_decode_step"]
TOL = 1e-4

# AEE codes (rpc_abi.h)
SUCCESS, EBADSTATE, EBADPARM, EUNSUPPORTED = 0, 13, 14, 20
N_STATS = 9

pytestmark = [
    pytest.mark.slow,  # plugin sessions, ~0.5 s each: the runtime's tier, outside the pass's fast one
    pytest.mark.skipif(
        not (runtime.LIB_DIR / runtime.PLUGIN_NAME).is_file(),
        reason=f"{runtime.LIB_DIR / runtime.PLUGIN_NAME} not built: run `bash custom_ops/build.sh`",
    ),
]


@pytest.fixture(scope="module")
def loopback() -> Path:
    assert LOOPBACK.is_file(), f"{LOOPBACK} is not built: run `bash custom_ops/build.sh`"
    return LOOPBACK


@pytest.fixture(scope="module")
def lowered(zoo_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return lower_zoo(zoo_dir, MODELS, tmp_path_factory.mktemp("hexagon"))


@pytest.fixture
def on_loopback(loopback: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(runtime.ENV_CDSPRPC_LIB, str(loopback))
    return loopback


@pytest.fixture
def no_cdsprpc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(runtime.ENV_CDSPRPC_LIB, raising=False)
    try:
        ctypes.CDLL("libcdsprpc.so")
    except OSError:
        return
    pytest.skip("this machine has libcdsprpc.so: the no-cDSP cases do not apply")


def reference(zoo_dir: Path, name: str, seed: int = 5) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    return zoo_reference(zoo_dir, name, seed)


def plugin_session(path: Path | bytes, backend_env: str) -> ort.InferenceSession:
    """The plugin with HEXFUSE_BACKEND set directly (bypassing runtime's checks), as a user could."""
    saved = os.environ.get(runtime.ENV_BACKEND)
    os.environ[runtime.ENV_BACKEND] = backend_env
    try:
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.register_custom_ops_library(str(runtime.library_path()))
        src = path if isinstance(path, bytes) else str(path)
        return ort.InferenceSession(src, sess_options=so, providers=["CPUExecutionProvider"])
    finally:
        if saved is None:
            os.environ.pop(runtime.ENV_BACKEND, None)
        else:
            os.environ[runtime.ENV_BACKEND] = saved


# ---- (a) the hexagon backend on the loopback -------------------------------------------------


@pytest.mark.parametrize("name", MODELS)
def test_hexagon_on_the_loopback_matches_the_original(
    name: str, zoo_dir: Path, lowered: dict[str, Path], on_loopback: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "trace.json"
    assert runtime.resolve_backend("hexagon") == "hexagon"
    s = runtime.InferenceSession(lowered[name], backend="hexagon", trace=trace)
    feeds, ref = reference(zoo_dir, name)
    got = s.run(None, feeds)
    assert len(got) == len(ref)
    for r, g in zip(ref, got):
        assert r.shape == g.shape and g.dtype == np.float32
        assert verify.relative_error(r, g) <= TOL
    summary = json.loads(trace.read_text())
    assert summary["backend"] == "hexagon", summary  # the kernel ran behind the dispatcher
    assert summary["items_run"][0] > 0 and summary["items_run"][1] > 0, summary


def test_inference_session_restores_the_backend_variable(
    lowered: dict[str, Path], on_loopback: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(runtime.ENV_BACKEND, raising=False)
    runtime.InferenceSession(lowered["two_branch"], backend="hexagon")
    assert runtime.ENV_BACKEND not in os.environ


def test_altered_fallback_proves_the_hexagon_kernel_ran(
    zoo_dir: Path, lowered: dict[str, Path], on_loopback: Path
) -> None:
    m = onnx.load(lowered["two_branch"])
    for f in m.functions:
        for n in f.node:
            if n.op_type == "Sigmoid":
                n.op_type = "Tanh"
    feeds, ref = reference(zoo_dir, "two_branch")
    got = plugin_session(m.SerializeToString(), "hexagon").run(None, feeds)
    assert max(verify.relative_error(r, g) for r, g in zip(ref, got)) <= TOL


def test_threads_share_one_hexagon_session(zoo_dir: Path, lowered: dict[str, Path], on_loopback: Path) -> None:
    s = runtime.InferenceSession(lowered["mha_encoder"], backend="hexagon")
    cases = [reference(zoo_dir, "mha_encoder", seed=k) for k in range(4)]
    assert not concurrent_errors(s, cases, runs=3, tol=TOL)


# ---- (b) malformed calls into the skeleton dispatcher --------------------------------------------


class RemoteBuf(ctypes.Structure):
    _fields_ = [("pv", ctypes.c_void_p), ("nLen", ctypes.c_size_t)]


class RemoteArg(ctypes.Union):
    _fields_ = [("buf", RemoteBuf), ("h", ctypes.c_uint32), ("h64", ctypes.c_uint64)]


def makex(method: int, n_in: int, n_out: int, h_in: int = 0, h_out: int = 0, attr: int = 0) -> int:
    return (
        (attr & 7) << 29
        | (method & 0x1F) << 24
        | (n_in & 0xFF) << 16
        | (n_out & 0xFF) << 8
        | (h_in & 0xF) << 4
        | (h_out & 0xF)
    )


SC_LOAD, SC_UNLOAD, SC_RUN = makex(2, 1, 1), makex(3, 1, 0), makex(4, 2, 2)
SC_OPEN, SC_CLOSE = makex(0, 2, 0, 0, 1), makex(1, 0, 0, 1, 0)
URI = b"file:///libhexfuse_rpc_skel.so?hexfuse_rpc_skel_handle_invoke&_modver=1.0&_dom=cdsp"


class Skeleton:
    """The loopback library's exports: remote_handle64_* and the dispatcher itself."""

    def __init__(self, path: Path) -> None:
        lib = ctypes.CDLL(str(path))
        self.invoke = lib.hexfuse_rpc_skel_handle_invoke
        self.invoke.argtypes = [ctypes.c_uint64, ctypes.c_uint32, ctypes.c_void_p]
        self.open_ = lib.remote_handle64_open
        self.open_.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint64)]
        self.close = lib.remote_handle64_close
        self.close.argtypes = [ctypes.c_uint64]

    def call(self, h: int, sc: int, *args: tuple[object, int] | int) -> tuple[int, ctypes.Array]:
        """args: (buffer or None, length) for buffers, int for handles."""
        pra = (RemoteArg * max(1, len(args)))()
        for i, a in enumerate(args):
            if isinstance(a, tuple):
                buf, n = a
                pra[i].buf.pv = None if buf is None else ctypes.cast(buf, ctypes.c_void_p)
                pra[i].buf.nLen = n
            else:
                pra[i].h64 = a
        return self.invoke(h, sc, pra), pra


def program_and_io(path: Path) -> tuple[bytes, list[int], list[int]]:
    """The first pair's task program and the byte sizes of its inputs and outputs."""
    m = onnx.load(path)
    prog = next(a.s for n in m.graph.node if n.domain == C.DOMAIN for a in n.attribute if a.name == C.ATTR_PROGRAM)
    k = runtime.HostKernel()
    p = k.parse(prog)
    try:
        sizes = []
        for count, info_fn in (
            (k.lib.hfx_program_num_inputs, k.lib.hfx_program_input_info),
            (k.lib.hfx_program_num_outputs, k.lib.hfx_program_output_info),
        ):
            n = count(p, 0) + count(p, 1)
            row = []
            for i in range(n):
                info = runtime._TensorInfo()
                info_fn(p, i, ctypes.byref(info))
                row.append(info.bytes)
            sizes.append(row)
    finally:
        k.lib.hfx_program_free(p)
    return prog, sizes[0], sizes[1]


def packed(sizes: list[int]) -> int:
    end = 0
    for s in sizes:
        end = (end + 127) // 128 * 128 + s
    return end


def test_malformed_calls_return_error_codes(lowered: dict[str, Path], loopback: Path) -> None:
    sk = Skeleton(loopback)
    prog_bytes, in_sizes, out_sizes = program_and_io(lowered["two_branch"])
    h = ctypes.c_uint64(0)
    assert sk.open_(URI, ctypes.byref(h)) == SUCCESS and h.value != 0
    h = h.value
    prog = ctypes.create_string_buffer(prog_bytes, len(prog_bytes))
    pid = ctypes.c_int32(-1)
    rc, _ = sk.call(h, SC_LOAD, (prog, len(prog_bytes)), (ctypes.byref(pid), 4))
    assert rc == SUCCESS and pid.value >= 0

    n_in, n_out = packed(in_sizes), packed(out_sizes)
    ins = ctypes.create_string_buffer(max(1, n_in))
    outs = ctypes.create_string_buffer(max(1, n_out))
    stats = (ctypes.c_uint64 * N_STATS)()

    def run(
        pid_: int,
        *,
        sc: int = SC_RUN,
        share: float = 0.5,
        in_len: int = n_in,
        out_len: int = n_out,
        stats_len: int = 8 * N_STATS,
        handle: int = h,
        in_buf: object = ins,
    ) -> int:
        head = ctypes.create_string_buffer(struct.pack("<if", pid_, share), 8)
        return sk.call(handle, sc, (head, 8), (in_buf, in_len), (outs, out_len), (stats, stats_len))[0]

    assert run(pid.value) == SUCCESS and stats[6] > 0 and stats[7] > 0
    cases = {
        "unknown method": (sk.call(h, makex(9, 0, 0))[0], EUNSUPPORTED),
        "run with one output buffer": (run(pid.value, sc=makex(4, 2, 1)), EBADPARM),
        "run with an extra input handle": (run(pid.value, sc=makex(4, 2, 2, 1)), EBADPARM),
        "run: load's scalars": (run(pid.value, sc=makex(4, 1, 1)), EBADPARM),
        "run: inputs one byte short": (run(pid.value, in_len=n_in - 1), EBADPARM),
        "run: outputs one byte short": (run(pid.value, out_len=n_out - 1), EBADPARM),
        "run: stats one value short": (run(pid.value, stats_len=8 * N_STATS - 8), EBADPARM),
        "run: NULL inputs with a length": (run(pid.value, in_buf=None), EBADPARM),
        "run: program id 63 (empty slot)": (run(63), EBADPARM),
        "run: program id -1": (run(-1), EBADPARM),
        "run: program id 64 (past the table)": (run(64), EBADPARM),
        "run: program id 2**31-1": (run(2**31 - 1), EBADPARM),
        "run: share NaN": (run(pid.value, share=float("nan")), EBADPARM),
        "run: share 1.5": (run(pid.value, share=1.5), EBADPARM),
        "run: forged handle": (run(pid.value, handle=h + 64), EBADSTATE),
        "load: result buffer 2 bytes": (
            sk.call(h, SC_LOAD, (prog, len(prog_bytes)), (ctypes.byref(pid), 2))[0],
            EBADPARM,
        ),
        "load: NULL program": (sk.call(h, SC_LOAD, (None, 100), (ctypes.byref(pid), 4))[0], EBADPARM),
        "load: empty program": (sk.call(h, SC_LOAD, (prog, 0), (ctypes.byref(pid), 4))[0], EBADPARM),
        "load: truncated program": (
            sk.call(h, SC_LOAD, (prog, len(prog_bytes) - 1), (ctypes.byref(pid), 4))[0],
            EBADPARM,
        ),
        "unload: 3 bytes": (sk.call(h, SC_UNLOAD, (ctypes.byref(ctypes.c_int32(pid.value)), 3))[0], EBADPARM),
        "unload: empty slot": (sk.call(h, SC_UNLOAD, (ctypes.byref(ctypes.c_int32(40)), 4))[0], EBADPARM),
        "NULL argument array": (sk.invoke(h, SC_RUN, None), EBADPARM),
        "open: URI length 0": (
            sk.call(0, SC_OPEN, (ctypes.byref(ctypes.c_uint32(0)), 4), (URI, len(URI)), 0)[0],
            EBADPARM,
        ),
        "open: URI without its NUL": (
            sk.call(
                0, SC_OPEN, (ctypes.byref(ctypes.c_uint32(8)), 4), (ctypes.create_string_buffer(b"abcdefgh", 8), 8), 0
            )[0],
            EBADPARM,
        ),
        "open: URI longer than its buffer": (
            sk.call(0, SC_OPEN, (ctypes.byref(ctypes.c_uint32(99)), 4), (URI, len(URI)), 0)[0],
            EBADPARM,
        ),
        "close: forged handle": (sk.call(h + 64, SC_CLOSE, h + 64)[0], EBADSTATE),
    }
    wrong = {k: got for k, (got, want) in cases.items() if got != want}
    assert not wrong, f"unexpected codes: {wrong}"

    # the session still runs after all of that
    ins_np = [np.random.default_rng(i).standard_normal(s // 4).astype(np.float32) for i, s in enumerate(in_sizes)]
    off = 0
    for x in ins_np:
        ctypes.memmove(ctypes.addressof(ins) + off, x.ctypes.data, x.nbytes)
        off = (off + x.nbytes + 127) // 128 * 128
    assert run(pid.value) == SUCCESS
    assert sk.call(h, SC_UNLOAD, (ctypes.byref(ctypes.c_int32(pid.value)), 4))[0] == SUCCESS
    assert run(pid.value) == EBADPARM  # unloaded
    assert sk.close(h) == SUCCESS
    assert sk.close(h) == EBADSTATE  # closed twice
    assert run(0) == EBADSTATE  # stale handle


# ---- (c) no cDSP ------------------------------------------------------------------------------


def test_hexagon_without_libcdsprpc_is_a_clear_error(lowered: dict[str, Path], no_cdsprpc: None) -> None:
    with pytest.raises(runtime.RuntimeUnavailable) as info:
        runtime.InferenceSession(lowered["two_branch"], backend="hexagon")
    msg = info.value.message
    assert msg.startswith("hexagon backend unavailable: no cDSP: cannot load the FastRPC library libcdsprpc.so")
    assert "\n" not in msg
    # the plugin itself, without runtime's check
    with pytest.raises(
        Exception,
        match=r"HEXFUSE_BACKEND=hexagon but the hexagon backend is unavailable: no cDSP: "
        r"cannot load the FastRPC library libcdsprpc.so",
    ):
        plugin_session(lowered["two_branch"], "hexagon")


def test_a_library_without_fastrpc_symbols_is_named(lowered: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    libm = ctypes.util.find_library("m")
    assert libm
    monkeypatch.setenv(runtime.ENV_CDSPRPC_LIB, libm)
    with pytest.raises(Exception, match=f"the FastRPC library {libm} has no symbol remote_handle64_open"):
        plugin_session(lowered["two_branch"], "hexagon")
    monkeypatch.setenv(runtime.ENV_CDSPRPC_LIB, "/nonexistent/libcdsprpc_x.so")
    with pytest.raises(
        runtime.RuntimeUnavailable,
        match="cannot load the FastRPC library /nonexistent/libcdsprpc_x.so given by HEXFUSE_CDSPRPC_LIB",
    ):
        runtime.session_options(backend="hexagon")


def test_an_open_that_fails_reports_its_code(
    lowered: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang-19")
    if cc is None:
        pytest.skip("no C compiler to build a FastRPC library whose open fails")
    src = tmp_path / "failing_cdsprpc.c"
    src.write_text(
        textwrap.dedent("""
        #include <stdint.h>
        int remote_handle64_open(const char *uri, uint64_t *h) { (void)uri; (void)h; return 0x80000406; }
        int remote_handle64_invoke(uint64_t h, uint32_t sc, void *pra) { (void)h; (void)sc; (void)pra; return 1; }
        int remote_handle64_close(uint64_t h) { (void)h; return 0; }
    """)
    )
    lib = tmp_path / "libfailing_cdsprpc.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    monkeypatch.setenv(runtime.ENV_CDSPRPC_LIB, str(lib))
    code = 0x80000406 - 2**32
    with pytest.raises(
        runtime.RuntimeUnavailable,
        match=rf"no cDSP answered: remote_handle64_open\(\"file:///"
        rf"libhexfuse_rpc_skel.so\?.*&_dom=cdsp\"\) through {lib} "
        rf"failed with code {code}",
    ):
        runtime.session_options(backend="hexagon")
    assert runtime.resolve_backend("auto") == "host"


def test_unknown_backend_variable_is_refused_by_the_plugin(lowered: dict[str, Path]) -> None:
    with pytest.raises(Exception, match=r"HEXFUSE_BACKEND='gpu' is not a backend \(auto, host or hexagon\)"):
        plugin_session(lowered["two_branch"], "gpu")


AUTO_SCRIPT = """
import os, sys
import numpy as np
import onnxruntime as ort
from hexfuse_onnx import runtime
os.environ["HEXFUSE_BACKEND"] = "auto"
for _ in range(3):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.register_custom_ops_library(str(runtime.library_path()))
    s = ort.InferenceSession(sys.argv[1], sess_options=so, providers=["CPUExecutionProvider"])
    s.run(None, {i.name: np.zeros([d if isinstance(d, int) else 1 for d in i.shape], np.float32)
                 for i in s.get_inputs()})
print("ran 3 sessions")
"""


def run_auto(model: Path, env_lib: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in (runtime.ENV_CDSPRPC_LIB, runtime.ENV_BACKEND)}
    if env_lib:
        env[runtime.ENV_CDSPRPC_LIB] = env_lib
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", AUTO_SCRIPT, str(model)], env=env, capture_output=True, text=True, timeout=300
    )


def test_auto_falls_back_to_host_and_says_why_once(lowered: dict[str, Path], no_cdsprpc: None) -> None:
    r = run_auto(lowered["two_branch"], None)
    assert r.returncode == 0, r.stderr
    assert "ran 3 sessions" in r.stdout
    lines = [line for line in r.stderr.splitlines() if "hexfuse: backend auto" in line]
    assert lines == [
        "hexfuse: backend auto -> host: no cDSP: cannot load the FastRPC library libcdsprpc.so "
        "(libcdsprpc.so: cannot open shared object file: No such file or directory)"
    ], r.stderr


def test_auto_takes_hexagon_when_a_cdsp_answers(lowered: dict[str, Path], loopback: Path) -> None:
    r = run_auto(lowered["two_branch"], str(loopback))
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stderr.splitlines() if "hexfuse: backend auto" in line]
    assert lines == [f"hexfuse: backend auto -> hexagon: a cDSP answered through {loopback}"], r.stderr
