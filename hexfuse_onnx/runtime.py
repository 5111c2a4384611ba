"""Run fused models with the FusedHexPair kernel: the ONNX Runtime plugin and the host kernel.

    so = runtime.session_options(model="m.tuned.onnx")   # plugin registered where it pays
    sess = runtime.InferenceSession("m.tuned.onnx")       # the same, in one call

Without the plugin, stock ONNX Runtime runs each pair's fallback body (`InferenceSession`: the
unfused original). Build the libraries with
`bash custom_ops/build.sh` (they land in hexfuse_onnx/_lib/).

Backends (`session_options(backend=...)`, passed to the plugin as HEXFUSE_BACKEND):

- `host` runs the dsp/ kernel inside the plugin on the CPU (POSIX threads). Always registers the
  plugin: for development, traces and verification.
- `hexagon` runs it on the cDSP through FastRPC: the plugin dlopen()s libcdsprpc.so (or the library
  named by HEXFUSE_CDSPRPC_LIB) and opens the skeleton libhexfuse_rpc_skel.so on the cDSP. Without a
  cDSP this raises RuntimeUnavailable with the reason (and the plugin refuses to create the session).
- `auto` (default) registers the plugin only where it is expected to pay: when a cDSP answers, or
  when the model was tuned on this machine (`python -m hexfuse_onnx tune`, whose record
  hexfuse_onnx/tuning.py reads) for the backend the plugin would use here and tune kept a pair in
  it. Otherwise the plugin is not
  registered: `InferenceSession` gives stock ONNX Runtime the model unfused (the original nodes, so
  never slower than the original model); ORT given the rewritten file itself with `session_options`
  runs each FusedHexPair's function body (its own kernels, which a micro-batch pair runs per half).
  The choice and its reason are logged once per reason (INFO).
  Without `model=` and without a cDSP, `session_options` cannot see a tuning record, so `auto` does
  not register the plugin; `InferenceSession` always passes its model.

ONNX Runtime's own execution mode: a model tuned on this machine records the mode (ort_modes.py:
ORT's defaults, sequential with 1 or 2 intra-op threads, or parallel) that ran it fastest here, and
`session_options(model=...)` / `InferenceSession` set it, with or without the plugin, logging once
which and why. The user's settings win: when the SessionOptions given set the execution mode or a
thread count (any value other than ORT's default), the tuned mode is not applied (logged too). An
untuned model, or one tuned on another machine, without the plugin: `InferenceSession` chooses the
mode at run time and remembers it (mode_choice.py; later sessions choose again until two choices
agree), `session_options(model=...)` applies a remembered choice, else keeps ORT's defaults.

The probe (`_hexagon_reason`) is the plugin's own FastRPC client, exported by libhexfuse_host.so: it
opens and closes a session. The hexagon path has never run on a device: on this machine it runs on a
loopback stand-in for libcdsprpc.so (LOOPBACK_NAME in LIB_DIR, built for tests, not in the wheel).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from . import mode_choice, ort_modes, tuning
from .errors import HexfuseError

LIB_DIR = Path(__file__).resolve().parent / "_lib"
PLUGIN_NAME = "libhexfuse_ort.so"
HOST_NAME = "libhexfuse_host.so"
LOOPBACK_NAME = "libhexfuse_rpc_loopback.so"
BACKENDS = ("auto", "host", "hexagon")
ENV_WORKERS = "HEXFUSE_WORKERS"
ENV_TRACE = "HEXFUSE_TRACE"
ENV_BACKEND = "HEXFUSE_BACKEND"
ENV_CDSPRPC_LIB = "HEXFUSE_CDSPRPC_LIB"
ENV_SCHEDULE = "HEXFUSE_SCHEDULE"
SCHEDULES = ("adaptive", "fused", "serial")  # how host calls run their tasks (custom_ops/src/schedule.rs)

log = logging.getLogger("hexfuse_onnx.runtime")
_logged: set[str] = set()  # auto's choices already logged (once per reason)

ModelRef = str | os.PathLike[str] | bytes | onnx.ModelProto


class RuntimeUnavailable(HexfuseError):
    """The plugin, the host kernel or the requested backend is not available."""


def _preload_blas() -> None:
    """Load scipy-openblas32's library where it is installed now, so the plugin's NEEDED entry
    resolves by soname even when the rpath recorded at build time (a wheel's build environment)
    no longer exists."""
    try:
        import scipy_openblas32
    except ImportError as exc:
        raise RuntimeUnavailable("scipy-openblas32 is not installed (pip install scipy-openblas32)") from exc
    ctypes.CDLL(str(Path(scipy_openblas32.get_lib_dir()) / "libscipy_openblas.so"), mode=ctypes.RTLD_GLOBAL)


def library_path() -> Path:
    """The ONNX Runtime plugin (raises RuntimeUnavailable when it is not built)."""
    path = LIB_DIR / PLUGIN_NAME
    if not path.is_file():
        raise RuntimeUnavailable(
            f"{path} is not built: run `bash custom_ops/build.sh` "
            "(it needs cmake, a C compiler, cargo and scipy-openblas32)"
        )
    _preload_blas()
    return path


def host_library_path() -> Path:
    path = LIB_DIR / HOST_NAME
    if not path.is_file():
        raise RuntimeUnavailable(f"{path} is not built: run `bash custom_ops/build.sh`")
    _preload_blas()
    return path


def _hexagon_reason() -> str | None:
    """None when a cDSP answers through FastRPC (libcdsprpc.so, or HEXFUSE_CDSPRPC_LIB); else why not.
    Opens and closes a session with the plugin's FastRPC client (hfx_rpc_probe in libhexfuse_host.so)."""
    try:
        lib = ctypes.CDLL(str(host_library_path()))
    except (RuntimeUnavailable, OSError) as exc:
        return f"cannot probe for a cDSP: {exc}"
    probe = lib.hfx_rpc_probe
    probe.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    probe.restype = ctypes.c_int
    msg = ctypes.create_string_buffer(512)
    if probe(None, msg, len(msg)) == 0:
        return None
    return msg.value.decode(errors="replace")


def resolve_backend(backend: str) -> str:
    """The backend the plugin runs when registered with `backend`: auto is hexagon when a cDSP
    answers, else host. Raises for an unknown backend and for hexagon without a cDSP."""
    if backend not in BACKENDS:
        raise RuntimeUnavailable(f"unknown backend '{backend}' (known: {', '.join(BACKENDS)})")
    if backend == "host":
        return "host"
    reason = _hexagon_reason()
    if backend == "hexagon":
        if reason:
            raise RuntimeUnavailable(f"hexagon backend unavailable: {reason}")
        return "hexagon"
    return "host" if reason else "hexagon"


def auto_decision(model: ModelRef | None, header: onnx.ModelProto | None = None) -> tuple[bool, str]:
    """(register the plugin?, why) for backend auto: yes when a cDSP answers or the model was tuned
    on this machine for the host backend and holds a pair tune kept; no otherwise. `header`: the
    model, already loaded."""
    reason = _hexagon_reason()
    if reason is None:
        return True, "a cDSP answered"
    if model is None:
        return False, f"{reason} and no model given to look for a tuning record"
    try:
        header = header or tuning.load_header(model)
    except Exception as exc:  # noqa: BLE001 - ORT reports an unreadable model itself, in its own words
        return False, f"{reason} and the model's tuning record cannot be read ({type(exc).__name__})"
    if not _has_pairs(header) and tuning.read_record(header) is None:
        return False, f"{reason}; the model holds no FusedHexPair (`python -m hexfuse_onnx rewrite` makes them)"
    why_not = tuning.tuned_here(header, "host")
    if why_not:
        return False, f"{reason}; {why_not}"
    if not _has_pairs(header):
        return False, f"{reason}; the model was tuned on this machine and kept no pair (no FusedHexPair to run)"
    return True, f"{reason}; the model was tuned on this machine for the host backend"


def _has_pairs(header: onnx.ModelProto) -> bool:
    """Whether the model holds a FusedHexPair (its function; pairs in If branches too)."""
    from .contract import DOMAIN

    return any(f.domain == DOMAIN for f in header.functions)


def _log_once(message: str) -> None:
    if message not in _logged:
        _logged.add(message)
        log.info("%s", message)


def _header(model: ModelRef | None) -> onnx.ModelProto | None:
    """The model without its weights, or None (no model, or one that cannot be read: ORT says why)."""
    if model is None:
        return None
    try:
        return tuning.load_header(model)
    except Exception:  # noqa: BLE001 - ORT reports an unreadable model itself, in its own words
        return None


def apply_tuned_mode(
    so: ort.SessionOptions, header: onnx.ModelProto | None, given: list[str], choosing: bool = False
) -> str | None:
    """Set `so` to the ONNX Runtime mode the model's tuning record chose on this machine, unless the
    user's options set the execution themselves (`given`: those fields) or, where the session can
    choose at run time (`choosing`), the tuned calls were short enough for a full exploration
    (mode_choice.FULL_EXPLORATION_US): that one times the mode in the process that runs the model.
    Returns the mode applied."""
    found = tuning.ort_mode_here(header) if header is not None else None
    if found is None:
        return None
    mode, why, call_us = found
    if choosing and not given and call_us is not None and call_us <= mode_choice.FULL_EXPLORATION_US:
        _log_once(
            f"hexfuse: ONNX Runtime mode {mode} from the model's tuning record not applied: its calls took "
            f"{call_us:.0f} us, short enough to choose the mode at run time in {mode_choice.ROUNDS} rounds"
        )
        return None
    if given:
        _log_once(
            f"hexfuse: ONNX Runtime mode {mode} from the model's tuning record not applied: "
            f"the session options given set {', '.join(given)}"
        )
        return None
    ort_modes.apply(so, mode)
    _log_once(f"hexfuse: ONNX Runtime mode {mode} from the model's tuning record ({why})")
    return mode


def session_options(
    backend: str = "auto",
    workers: int | None = None,
    trace: str | os.PathLike[str] | None = None,
    so: ort.SessionOptions | None = None,
    model: ModelRef | None = None,
    schedule: str | None = None,
) -> ort.SessionOptions:
    """SessionOptions with the FusedHexPair plugin registered where it is expected to pay.

    backend: auto, host or hexagon (see the module docstring); checked here (hexagon without a cDSP
    raises) and passed to the plugin through HEXFUSE_BACKEND, which the kernels read when a session is
    created. host and hexagon always register the plugin. auto registers it only when a cDSP answers
    or `model` (a path, bytes or ModelProto) was tuned on this machine for the host backend: without
    `model` and without a cDSP, auto does not register the plugin, and stock ONNX Runtime runs the
    FusedHexPair function bodies. The choice is logged once per reason.
    workers: vector workers of the kernel's pool. The pool is process-wide and created by the
    first FusedHexPair kernel, so this only takes effect before that. workers and trace are
    passed through the environment (HEXFUSE_WORKERS, HEXFUSE_TRACE), which the kernels read when
    a session is created; they stay set for later sessions (InferenceSession restores them). trace: a file the kernel
    overwrites after every run with the last run's trace (JSON: per-engine busy time, engine and
    task overlap, and every work item's event); kernels read it when the session is created.
    schedule: how host calls run their two tasks (HEXFUSE_SCHEDULE, read at session creation):
    adaptive (the plugin's default: per node, fused or serial, whichever has been faster lately),
    fused (both at once on the pool; what traces of the fused schedule and calibration measure) or
    serial (task A then task B on the calling thread alone).
    so: options to extend; when they set the execution mode or a thread count, a tuned model's
    ONNX Runtime mode is not applied (the user's settings win).
    """
    return _options(backend, workers, trace, so, model, schedule)[0]


def _options(
    backend: str,
    workers: int | None,
    trace: str | os.PathLike[str] | None,
    so: ort.SessionOptions | None,
    model: ModelRef | None,
    schedule: str | None = None,
    unfused: str = "",
    header: onnx.ModelProto | None = None,
    can_choose: bool = False,
) -> tuple[ort.SessionOptions, bool, bool]:
    """`session_options`, whether it registered the plugin, and whether ORT's mode is left to choose
    at run time (mode_choice: neither tuned, given, forced nor remembered); `unfused` says in
    auto's log what stock ONNX Runtime runs without it; `header`: the model's header, already loaded;
    `can_choose`: the caller makes a session that can choose ORT's mode at run time."""
    given = ort_modes.user_settings(so)
    so = so or ort.SessionOptions()
    inline_late_beside_other_eps(so)
    header = header or _header(model)
    if backend != "auto":
        apply_tuned_mode(so, header, given)
        resolve_backend(backend)
    else:
        register, why = auto_decision(model, header)
        stock = f"stock ONNX Runtime{unfused} (plugin not registered)"
        _log_once(f"hexfuse: backend auto -> {'plugin' if register else stock}: {why}")
        choosing = can_choose and not register and header is not None and mode_choice.explorable(model, header)
        tuned = apply_tuned_mode(so, header, given, choosing)
        if not register:
            settled = tuned or header is None or mode_choice.preset(so, model, header, given, _log_once)
            return so, False, not settled
    os.environ[ENV_BACKEND] = backend
    if workers is not None:
        if workers < 1:
            raise RuntimeUnavailable(f"workers must be >= 1, got {workers}")
        os.environ[ENV_WORKERS] = str(int(workers))
    if trace is not None:
        os.environ[ENV_TRACE] = str(trace)
    if schedule is not None:
        if schedule not in SCHEDULES:
            raise RuntimeUnavailable(f"unknown schedule '{schedule}' (known: {', '.join(SCHEDULES)})")
        os.environ[ENV_SCHEDULE] = schedule
    so.register_custom_ops_library(str(library_path()))
    return so, True, False


AOT_INLINING_OFF = "session.disable_aot_function_inlining"


def inline_late_beside_other_eps(so: ort.SessionOptions) -> None:
    """Where `so` already has execution providers (onnxruntime-qnn's QNN EP), ONNX Runtime inlines the
    FusedHexPair function bodies when it partitions the graph, not ahead of it: with ahead-of-time
    inlining (ORT's default) the QNN EP ended the process on a rewritten QDQ RetinaFace ("Processed 28
    nodes. Expected to process 63"), stock ORT with or without this option being fine on CPU alone.
    A value the user set is kept."""
    if not so.has_providers():
        return
    try:
        so.get_session_config_entry(AOT_INLINING_OFF)
    except RuntimeError:  # not set
        so.add_session_config_entry(AOT_INLINING_OFF, "1")
        _log_once(f"hexfuse: {AOT_INLINING_OFF}=1 beside the session's execution providers (inlined as ORT partitions)")


def InferenceSession(  # noqa: N802  # named as onnxruntime's, which it replaces
    path_or_bytes: str | os.PathLike[str] | bytes,
    sess_options: ort.SessionOptions | None = None,
    providers: list[str] | None = None,
    provider_options: list[dict[str, Any]] | None = None,
    *,
    backend: str = "auto",
    workers: int | None = None,
    trace: str | os.PathLike[str] | None = None,
    so: ort.SessionOptions | None = None,
    schedule: str | None = None,
    **kwargs: Any,
) -> ort.InferenceSession | mode_choice.ChoosingSession | mode_choice.WatchedSession:
    """An onnxruntime.InferenceSession of a model file (or its bytes), called as ORT's is (its
    positional `sess_options`, `providers`, `provider_options` and keyword arguments pass on; `so`
    is `sess_options` by another name), with the plugin registered as
    `session_options` decides (backend auto: only where it is expected to pay). Where auto does not
    register it, stock ONNX Runtime runs the model unfused (`rewrite.unfuse`: the original nodes,
    which ORT runs as fast as the original model; a pair's function body can be slower, e.g. a
    micro-batch pair's body copies its input and output once more). There, unless the model's tuning record,
    the options given, ORT's own arguments beyond the options and providers, HEXFUSE_ORT_MODE or an
    earlier choice decide ORT's execution mode, the
    session chooses it during its first calls (mode_choice.ChoosingSession; ort-par, chosen, is watched and
    gives way to ORT's defaults where its calls slow down, mode_choice.WatchedSession). The kernels read
    `backend`, `workers` and `trace` when the session is created; the environment is restored
    afterwards, so later sessions do not inherit them."""
    if sess_options is not None and so is not None:
        raise TypeError("InferenceSession: give sess_options or so, not both")
    so = so if so is not None else sess_options
    path = path_or_bytes
    if providers is None and not (so is not None and so.has_providers()):  # else the EPs `so` was given
        providers = ["CPUExecutionProvider"]
    ort_args = {**kwargs, **({"provider_options": provider_options} if provider_options is not None else {})}
    fixed = bool(ort_args) or _one_session_wanted(so)  # one session as given: no mode chosen behind it
    with plugin_environment_restored():
        header = _header(path)
        options, registered, choose = _options(
            backend,
            workers,
            trace,
            so,
            path,
            schedule,
            " on the unfused original",
            header,
            can_choose=providers == ["CPUExecutionProvider"] and not fixed,
        )
        source = os.fspath(path) if isinstance(path, os.PathLike) else path  # else ORT's own TypeError
        if not registered and header is not None:
            source = unfused_source(path, header)
        if choose and not fixed and header is not None and providers is not None:  # (choose implies a header)
            return mode_choice.session(source, path, options, providers, _log_once, header.graph)
        return ort.InferenceSession(source, sess_options=options, providers=providers, **ort_args)


def _one_session_wanted(so: ort.SessionOptions | None) -> bool:
    """Whether the options profile the session or save its optimised model: a session per mode, as the
    run-time choice makes, would write a file each (a stranger's end_profiling() held 250 of 300 calls)."""
    if so is None or not (so.enable_profiling or so.optimized_model_filepath):
        return False
    _log_once("hexfuse: ONNX Runtime mode not chosen at run time: the options profile or save the optimised model")
    return True


def unfused_source(path: str | os.PathLike[str] | bytes, header: onnx.ModelProto) -> str | bytes:
    """The model's bytes with every FusedHexPair unfused; the model itself (path or bytes) when it
    has none, or when it is too large to pass as bytes (ORT then runs the function bodies).
    `header`: the model without its external weights (all of it when given as bytes)."""
    source = path if isinstance(path, bytes) else str(path)
    if not _has_pairs(header):
        return source
    from .rewrite import unfuse  # not before: it imports the pass (sympy), 0.5 s a process

    model = header if isinstance(path, bytes) else onnx.load_model(str(path))
    if model.ByteSize() >= 2**31 - 1:
        return source
    unfused = unfuse(model)
    del unfused.metadata_props[:]  # the file's own: get_modelmeta() reads what the file says
    unfused.metadata_props.extend(model.metadata_props)
    return unfused.SerializeToString()


@contextlib.contextmanager
def plugin_environment_restored() -> Iterator[None]:
    """Sessions created inside see what session_options() sets; later ones do not inherit it."""
    saved = {k: os.environ.get(k) for k in (ENV_BACKEND, ENV_WORKERS, ENV_TRACE, ENV_SCHEDULE)}
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# ---- the host kernel directly (ctypes): run one task program without ONNX Runtime ----------


class _TensorInfo(ctypes.Structure):
    _fields_ = [
        ("dtype", ctypes.c_uint8),
        ("role", ctypes.c_uint8),
        ("task", ctypes.c_uint8),
        ("rank", ctypes.c_uint8),
        ("io_index", ctypes.c_uint32),
        ("dims", ctypes.c_uint32 * 8),
        ("numel", ctypes.c_uint64),
        ("bytes", ctypes.c_uint64),
    ]


class _Error(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("byte_offset", ctypes.c_uint32), ("message", ctypes.c_char * 160)]


class _PoolConfig(ctypes.Structure):
    _fields_ = [
        ("n_vector_workers", ctypes.c_uint32),
        ("n_matrix_workers", ctypes.c_uint32),
        ("arena_bytes", ctypes.c_size_t),
        ("flags", ctypes.c_uint32),
    ]


_NP_DTYPES = {
    1: np.float32,
    2: np.float16,
    3: np.int32,
    4: np.int64,
    5: np.int8,
    6: np.uint8,
    7: np.uint16,
    8: np.int16,
    9: np.bool_,
}


class HostKernel:
    """The dsp/ kernel's C API through ctypes, with one persistent pool."""

    def __init__(self, workers: int | None = None) -> None:
        lib = ctypes.CDLL(str(host_library_path()))
        lib.hfx_status_name.restype = ctypes.c_char_p
        lib.hfx_program_parse.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.POINTER(_Error),
        ]
        lib.hfx_program_free.argtypes = [ctypes.c_void_p]
        lib.hfx_program_sum_in_hexagon_order.argtypes = [ctypes.c_void_p]
        for f in ("hfx_program_num_inputs", "hfx_program_num_outputs"):
            getattr(lib, f).argtypes = [ctypes.c_void_p, ctypes.c_int]
            getattr(lib, f).restype = ctypes.c_uint32
        for f in ("hfx_program_input_info", "hfx_program_output_info"):
            getattr(lib, f).argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.POINTER(_TensorInfo)]
        lib.hfx_program_specialize.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)),
            ctypes.POINTER(ctypes.c_uint32),
            ctypes.c_uint32,
            ctypes.c_void_p,
            ctypes.POINTER(_Error),
        ]
        lib.hexfuse_host_expr_eval.argtypes = [
            ctypes.POINTER(ctypes.c_uint32),
            ctypes.c_uint32,
            ctypes.POINTER(ctypes.c_int64),
            ctypes.c_uint32,
            ctypes.POINTER(ctypes.c_int64),
            ctypes.POINTER(ctypes.c_char_p),
        ]
        lib.hfx_pool_config_init.argtypes = [ctypes.POINTER(_PoolConfig)]
        lib.hfx_pool_create.argtypes = [ctypes.POINTER(_PoolConfig), ctypes.POINTER(ctypes.c_void_p)]
        lib.hfx_run.argtypes = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_size_t,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_size_t,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        self.lib = lib
        cfg = _PoolConfig()
        lib.hfx_pool_config_init(ctypes.byref(cfg))
        if workers:
            cfg.n_vector_workers = workers
        self.pool = ctypes.c_void_p()
        st = lib.hfx_pool_create(ctypes.byref(cfg), ctypes.byref(self.pool))
        if st:
            raise RuntimeUnavailable(f"hfx_pool_create failed: {lib.hfx_status_name(st).decode()}")

    def parse(self, program: bytes) -> ctypes.c_void_p:
        prog, err = ctypes.c_void_p(), _Error()
        buf = ctypes.create_string_buffer(program, len(program))
        st = self.lib.hfx_program_parse(buf, len(program), ctypes.byref(prog), ctypes.byref(err))
        if st:
            raise HexfuseError(
                f"invalid task program: {self.lib.hfx_status_name(st).decode()} at byte "
                f"{err.byte_offset}: {err.message.decode()}"
            )
        return prog

    def specialize(self, program: bytes, shapes: list[tuple[int, ...]]) -> bytes:
        """`program` specialized to the node input shapes `shapes` by the C specializer
        (hfx_program_specialize); raises HexfuseError with its message."""
        dims = [(ctypes.c_int64 * max(1, len(s)))(*s) for s in shapes]
        dim_ptrs = (ctypes.POINTER(ctypes.c_int64) * max(1, len(dims)))(
            *[ctypes.cast(d, ctypes.POINTER(ctypes.c_int64)) for d in dims]
        )
        ranks = (ctypes.c_uint32 * max(1, len(shapes)))(*[len(s) for s in shapes])
        src = ctypes.create_string_buffer(program, len(program))
        out = ctypes.create_string_buffer(len(program))
        err = _Error()
        st = self.lib.hfx_program_specialize(src, len(program), dim_ptrs, ranks, len(shapes), out, ctypes.byref(err))
        if st:
            raise HexfuseError(
                f"cannot specialize the task program: {self.lib.hfx_status_name(st).decode()} at byte "
                f"{err.byte_offset}: {err.message.decode()}"
            )
        return out.raw

    def eval_shape_expr(self, words: list[int], symbols: list[int]) -> int:
        """The C evaluator of a shape expression (shape_section's words over int64 symbols);
        raises HexfuseError with the fault's text."""
        w = (ctypes.c_uint32 * max(1, len(words)))(*words)
        sym = (ctypes.c_int64 * max(1, len(symbols)))(*symbols)
        value, text = ctypes.c_int64(), ctypes.c_char_p()
        fault = self.lib.hexfuse_host_expr_eval(
            w, len(words), sym, len(symbols), ctypes.byref(value), ctypes.byref(text)
        )
        if fault:
            raise HexfuseError((text.value or b"shape expression fault").decode())
        return value.value

    def run(self, program: bytes, inputs: list[np.ndarray], hexagon_order: bool = False) -> list[np.ndarray]:
        """`hexagon_order`: every op sums as the Hexagon builds do, a float Conv/Gemm not as the BLAS
        or MLAS does (hfx_program_sum_in_hexagon_order: emulate's reference, several times slower)."""
        prog = self.parse(program)
        if hexagon_order:
            self.lib.hfx_program_sum_in_hexagon_order(prog)
        try:
            n_in = self.lib.hfx_program_num_inputs(prog, 0) + self.lib.hfx_program_num_inputs(prog, 1)
            n_out = self.lib.hfx_program_num_outputs(prog, 0) + self.lib.hfx_program_num_outputs(prog, 1)
            if len(inputs) != n_in:
                raise HexfuseError(f"program has {n_in} inputs, got {len(inputs)}")
            ins, outs = [], []
            for i, x in enumerate(inputs):
                info = _TensorInfo()
                self.lib.hfx_program_input_info(prog, i, ctypes.byref(info))
                want = tuple(info.dims[: info.rank])
                x = np.require(np.asarray(x, dtype=_NP_DTYPES[info.dtype]), requirements="C")
                if x.shape != want:
                    raise HexfuseError(f"input {i} has shape {x.shape}, the program expects {want}")
                ins.append(x)
            for j in range(n_out):
                info = _TensorInfo()
                self.lib.hfx_program_output_info(prog, j, ctypes.byref(info))
                outs.append(np.empty(tuple(info.dims[: info.rank]), dtype=_NP_DTYPES[info.dtype]))
            in_ptrs = (ctypes.c_void_p * max(1, n_in))(*[x.ctypes.data for x in ins])
            out_ptrs = (ctypes.c_void_p * max(1, n_out))(*[y.ctypes.data for y in outs])
            st = self.lib.hfx_run(self.pool, prog, in_ptrs, n_in, out_ptrs, n_out, None, None, None)
            if st:
                raise HexfuseError(f"hfx_run failed: {self.lib.hfx_status_name(st).decode()}")
            return outs
        finally:
            self.lib.hfx_program_free(prog)
