"""Run every FusedHexPair of a rewritten model under qemu-hexagon and compare it with the host kernel.

    python -m hexfuse_onnx emulate model.fused.onnx [--arch v67|v73] [--inputs data.npz] [--json F]

For each pair: its input tensors are captured by running the model on stock ONNX Runtime (no plugin:
each pair runs its fallback body, the original nodes) with the pair's inputs added as graph outputs,
on seeded random inputs or `--inputs`. A pair inside an If branch (rewrite fuses pairs there:
Moonshine's merged decoder has all its pairs in the two branches of one If) is reached through the
branch the inputs take, run as a model of its own on the outer values it read (`reach_pairs`); with
random inputs, a branch they do not take is reached on them set to take it where its condition
allows, as rewrite's verification does (`subgraphs.feeds_taking`). A pair in a branch still not
taken, or in a Loop/Scan body, is reported as not reached, with why; it leaves the exit code alone.
The task program and those tensors go into a job file that
`hexfuse_emulate.elf` (dsp/hexagon/emulate/, built by dsp/scripts/build_hexagon.sh) runs under
qemu-hexagon (a process per pair, as many at once as this process has CPUs): the real parser,
scheduler (coop platform: 1 matrix + 3 vector workers interleaved on one hardware thread) and kernels
as compiled for Hexagon: the integer QMatMul, QConv2D, MatMulInteger, ConvInteger, DequantizeLinear,
QMaxPool, QGlobalAveragePool, QLut, QAdd, QMul, QConcat and QResize items run their HVX kernels
(dsp/src/ops/qmatmul_hvx.c, qpool.c, qeltwise.c, qmemory.c, resize.c; dsp/hvx/), the other ops their
portable C.
The image runs the program fused and forced serial and counts executed packets with qemu's packet
counter. The same program and inputs run on the host kernel (`runtime.HostKernel`), and the outputs
are compared.

The host reference runs every op as the Hexagon build does (`HostKernel.run(hexagon_order=True)`):
a float Conv/Gemm/MatMul sums in the order of the Hexagon build's C sgemm, not OpenBLAS's (nor
MLAS's, which the plugin follows where a QUANTIZE_LINEAR reads the result), and the vector math is
the same C on both builds (vmath.h), so float outputs are expected bit-exact too. What the plugin
itself computes with its own sums is reported beside each float output ("the plugin's own sums":
max|plugin - emulated| / max|emulated|: 1e-7 to 5e-7 on llama_gqa_contrib's fp32 MatMuls). A float
output passes when max|emulated - host| <= rtol * max|host| (default 1e-4); integer outputs must be
equal, except those a QUANTIZE_LINEAR writes, which pass within one step; bit-exact or not is
reported for every output. The fused and serial runs under
qemu must be bit-identical (results do not depend on the schedule). Packet counts are what qemu
executed, not device cycles: no stalls, caches, VTCM or HVX contexts are modelled, and the coop
platform runs the workers one after the other on one thread.

Images: `--arch v67` runs build/hexagon-qemu/hexfuse_emulate.elf; `--arch v73` runs
build/hexagon-v73/hexfuse_emulate.elf with `-cpu v73` on qemu >= 10, or a copy relabelled v67 on
older qemu (which only knows up to v67; the integer and scalar code run the same).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from .. import contract as C
from ..branch_runs import (
    NOT_TAKEN,
    bodies_with_pairs,
    branch_label,
    branch_reads,
    branch_runs,
    capture,
    is_if,
    is_pair,
)
from ..errors import HexfuseError, ModelError, UsageError, VerificationError, first_line
from ..graph import read_model
from ..lowering.rewritten import recorded_bindings
from ..subgraphs import feeds_taking, no_pair_message, pairs_within
from ..verify import random_inputs, relative_error, session

REPO_DIR = Path(__file__).resolve().parents[2]
ARCHS = {"v67": "hexagon-qemu", "v73": "hexagon-v73"}
IMAGE = "hexfuse_emulate.elf"
DEFAULT_RTOL = 1e-4
JOB_MAGIC = 0x4A584648  # "HFXJ"
RESULT_MAGIC = 0x52584648  # "HFXR"
FORMAT_VERSION = 1
HEADER_BYTES = 24
SECTION_ALIGN = 128
ENGINES = ("matrix", "vector", "copy")
QEMU_TIMEOUT_S = 3600
IMAGE_EXIT_PROGRAM = 4  # hexfuse_emulate.elf: the parser refused the program (other codes: our bug or qemu's)


class EmulatorUnavailable(UsageError):
    """qemu-hexagon or the Hexagon image is missing."""


@dataclass
class Qemu:
    path: str
    version: tuple[int, ...]

    @property
    def runs_v73(self) -> bool:
        return self.version >= (10,)


@dataclass
class OutputCheck:
    name: str
    bit_exact: bool
    max_abs: float
    rel: float
    ok: bool
    first_mismatch: tuple[int, float, float] | None  # flat index, emulated, host
    tolerance: str  # "rtol 0.0001" for floats, "exact" for integers
    plugin_rel: float | None = None  # float outputs: the plugin's own sums (BLAS, MLAS) against the emulated


@dataclass
class PairResult:
    name: str
    kind: str
    outputs: list[OutputCheck]
    stats: dict
    op_names: list[str] = field(default_factory=list)
    where: str = ""  # "" in the main graph, else the If branch it sits in ("then branch of If 'X'")
    not_reached: str = ""  # why its inputs could not be captured (a branch the inputs do not take)

    @property
    def reached(self) -> bool:
        return not self.not_reached

    @property
    def bit_exact(self) -> bool:
        return self.reached and all(o.bit_exact for o in self.outputs)

    @property
    def ok(self) -> bool:
        """Within tolerance; a pair not reached has nothing to be wrong about (it is reported as such)."""
        return not self.reached or (all(o.ok for o in self.outputs) and bool(self.stats["serial_equals_fused"]))


# ---- qemu and the image --------------------------------------------------------------------


def find_qemu() -> Qemu:
    path = os.environ.get("QEMU_HEXAGON") or shutil.which("qemu-hexagon")
    if not path:
        raise EmulatorUnavailable("qemu-hexagon not found (Debian: apt-get install qemu-user; see scripts/setup.sh)")
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=False).stdout
    m = re.search(r"version (\d+)\.(\d+)", out)
    if not m:
        raise EmulatorUnavailable(f"{path}: cannot read its version from `--version`")
    return Qemu(path, (int(m.group(1)), int(m.group(2))))


def image_path(arch: str, build_root: Path | None = None) -> Path:
    if arch not in ARCHS:
        raise UsageError(f"unknown arch '{arch}' (known: {', '.join(ARCHS)})")
    path = (build_root or REPO_DIR / "build") / ARCHS[arch] / IMAGE
    if path.is_file():
        return path
    if build_root is None and not (REPO_DIR / "dsp" / "scripts" / "build_hexagon.sh").is_file():  # an installed package
        raise EmulatorUnavailable(
            f"no Hexagon image here ({path}): the images are built from a hexfuse-onnx checkout "
            "(bash dsp/scripts/build_hexagon.sh there); give its build folder with --build-root CHECKOUT/build"
        )
    raise EmulatorUnavailable(f"{path} is not built: run dsp/scripts/build_hexagon.sh")


def qemu_command(qemu: Qemu, image: Path, arch: str, workdir: Path) -> list[str]:
    """v73 runs natively on qemu >= 10; older qemu gets a copy whose ELF e_flags say v67."""
    if arch == "v67":
        return [qemu.path, str(image)]
    if qemu.runs_v73:
        return [qemu.path, "-cpu", arch, str(image)]
    relabelled = workdir / f"{arch}_as_v67_{IMAGE}"
    data = bytearray(image.read_bytes())
    data[36:40] = struct.pack("<I", 0x67)
    relabelled.write_bytes(bytes(data))
    relabelled.chmod(0o755)  # qemu-user loads only executable files
    return [qemu.path, str(relabelled)]


# ---- job and result files ----------------------------------------------------------------------


def _align(n: int) -> int:
    return -(-n // SECTION_ALIGN) * SECTION_ALIGN


def job_bytes(program: bytes, inputs: list[np.ndarray], share_a: float) -> bytes:
    """The job file hexfuse_emulate.elf reads (format: dsp/hexagon/emulate/hexfuse_emulate.c)."""
    blobs = [np.ascontiguousarray(x).tobytes() for x in inputs]
    sections = [program, *blobs]
    layout, end = [], HEADER_BYTES + 4 * len(blobs)
    for s in sections:
        start = _align(end)
        layout.append(start)
        end = start + len(s)
    out = bytearray(end)
    struct.pack_into(
        "<IHHIIIf", out, 0, JOB_MAGIC, FORMAT_VERSION, HEADER_BYTES, end, len(program), len(blobs), share_a
    )
    struct.pack_into(f"<{len(blobs)}I", out, HEADER_BYTES, *[len(b) for b in blobs])
    for start, s in zip(layout, sections):
        out[start : start + len(s)] = s
    return bytes(out)


def read_result(data: bytes) -> tuple[dict, list[bytes]]:
    if len(data) < HEADER_BYTES:
        raise VerificationError("the emulator's result file is truncated")
    magic, version, header, total, stats_bytes, n_out, _ = struct.unpack_from("<IHHIIII", data)
    if (magic, version, header, total) != (RESULT_MAGIC, FORMAT_VERSION, HEADER_BYTES, len(data)):
        raise VerificationError("the emulator's result file has a bad header")
    sizes = struct.unpack_from(f"<{n_out}I", data, HEADER_BYTES)
    at = HEADER_BYTES + 4 * n_out
    stats = json.loads(data[at : at + stats_bytes].decode("ascii"))
    at += stats_bytes
    outputs = []
    for size in sizes:
        outputs.append(data[at : at + size])
        at += size
    return stats, outputs


def run_image(cmd: list[str], job: bytes, workdir: Path, label: str) -> tuple[dict, list[bytes]]:
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", label)
    job_path, result_path = workdir / f"{stem}.job", workdir / f"{stem}.result"
    job_path.write_bytes(job)
    proc = subprocess.run(
        [*cmd, str(job_path), str(result_path)], capture_output=True, text=True, timeout=QEMU_TIMEOUT_S, check=False
    )
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        detail = lines[-1] if lines else f"exit status {proc.returncode}"
        error = ModelError if proc.returncode == IMAGE_EXIT_PROGRAM else HexfuseError
        raise error(f"pair '{label}': the emulator failed (exit {proc.returncode}): {detail}")
    return read_result(result_path.read_bytes())


# ---- capturing each pair's real inputs -------------------------------------------------------


def fused_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """The main graph's pairs (`reach_pairs` finds those in subgraphs too)."""
    return [n for n in model.graph.node if is_pair(n)]


def _attr(node: onnx.NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


@dataclass
class Site:
    """A pair where it sits, with the input tensors it read there, or why it was not reached."""

    node: onnx.NodeProto
    where: str  # "" in the main graph, else "then branch of If 'X'" (nested: "... in the ...")
    inputs: list[np.ndarray] | None = None
    not_reached: str = ""


def reach_pairs(model: onnx.ModelProto, feeds: dict[str, np.ndarray], where: str = "") -> list[Site]:
    """Every pair of the model, in node order, with the inputs it reads on `feeds`, from stock ORT
    (each pair runs its fallback body). ORT gives no value from inside an If branch, so the branch the
    inputs take runs again as a model of its own (`branch_runs`) on the outer values it read, captured
    with the condition, and so on down. A branch not taken and a Loop/Scan body (a body per
    iteration; the pass puts no pair there) leave their pairs not reached, saying why."""
    holders = [n for n in model.graph.node if bodies_with_pairs(n)]
    wanted = [t for n in model.graph.node if is_pair(n) for t in n.input]
    wanted += [t for n in holders if is_if(n) for t in branch_reads(n)]
    values = capture(model, wanted, feeds, where)
    sites: list[Site] = []
    for n in model.graph.node:
        if is_pair(n):
            sites.append(Site(n, where, [values[t] for t in n.input]))
        elif n in holders:
            sites += _sites_in_branches(model, n, values, where) if is_if(n) else _unentered(n, where)
    return sites


def _sites_in_branches(
    model: onnx.ModelProto, node: onnx.NodeProto, values: dict[str, np.ndarray], where: str
) -> list[Site]:
    """The pairs of an If's branches: those of the branch the captured condition takes, run on the
    outer values it read; the other branch's not reached."""
    sites: list[Site] = []
    for run in branch_runs(model, node, values):
        inner = f"{run.label} in the {where}" if where else run.label
        if run.model is None:
            sites += [Site(p, inner, not_reached=run.not_reached) for p in pairs_within(run.body)]
        else:
            sites += reach_pairs(run.model, run.feeds, inner)
    return sites


def _unentered(node: onnx.NodeProto, where: str) -> list[Site]:
    body = f"body of {node.op_type} '{node.name or node.output[0]}'"
    inner = f"{body} in the {where}" if where else body
    why = f"not reached: emulate does not enter a {node.op_type} body (a value per iteration)"
    return [Site(p, inner, not_reached=why) for g in bodies_with_pairs(node).values() for p in pairs_within(g)]


def model_feeds(model_path: Path, inputs_npz: str | None, seed: int) -> dict[str, np.ndarray]:
    sess = session(model_path)
    if inputs_npz is None:  # symbolic dims: at the shapes the pass analysed the model at
        analysed, _ = recorded_bindings(read_model(model_path, load_external_data=False))
        return random_inputs(sess, analysed, seed=seed)
    try:
        data = np.load(inputs_npz)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{inputs_npz}: cannot read the inputs ({exc})") from None
    missing = [i.name for i in sess.get_inputs() if i.name not in data.files]
    if missing:
        raise UsageError(f"{inputs_npz}: no array named '{missing[0]}' (a graph input)")
    return {i.name: data[i.name] for i in sess.get_inputs()}


# ---- comparing ---------------------------------------------------------------------------------


def check_output(name: str, emulated: np.ndarray, host: np.ndarray, rtol: float, steps: int = 0) -> OutputCheck:
    """`steps`: how many units an integer output may differ by (1 for a quantized f32 result)."""
    same_bits = emulated.tobytes() == host.tobytes()
    first = None
    if not same_bits:
        differs = emulated.view(np.uint8).reshape(host.size, -1) != host.view(np.uint8).reshape(host.size, -1)
        i = int(np.argmax(differs.any(axis=1)))
        first = (i, float(emulated.flat[i]), float(host.flat[i]))
    if np.issubdtype(host.dtype, np.floating):
        diff = np.abs(emulated.astype(np.float64) - host.astype(np.float64))
        max_abs = float(np.nanmax(diff)) if diff.size else 0.0
        rel = relative_error(host, emulated)
        ok, tolerance = bool(rel <= rtol), f"rtol {rtol:g}"  # NaN fails
    else:
        max_abs = float(np.max(np.abs(emulated.astype(np.int64) - host.astype(np.int64)))) if host.size else 0.0
        rel = 0.0 if same_bits else float("inf")
        ok, tolerance = (max_abs <= steps, f"{steps} step (a quantized f32 result)") if steps else (same_bits, "exact")
    return OutputCheck(name, same_bits, max_abs, rel, ok, first, tolerance)


def quantized_outputs(program: bytes) -> set[int]:
    """The node output indices a QUANTIZE_LINEAR op of the program writes."""
    from ..lowering.abi import Layout, Opcode, Role
    from ..lowering.program import layout_of, tensor_records

    lay, records = layout_of(program), tensor_records(program)
    out = set()
    for k in range(lay.n_ops):
        at = lay.ops_off + k * Layout.OP_RECORD_BYTES
        opcode, target = struct.unpack_from("<H", program, at)[0], struct.unpack_from("<I", program, at + 40)[0]
        role, io, _ = records[target]
        if opcode == Opcode.QUANTIZE_LINEAR and role == Role.OUTPUT:
            out.add(io)
    return out


def op_names() -> dict[int, str]:
    """Opcode -> name, from the lowering's mirror of ops.h."""
    from ..lowering.abi import Opcode

    return {int(op): op.name.lower() for op in Opcode}


# ---- the command ---------------------------------------------------------------------------------


def emulate(
    model_path: str | os.PathLike[str],
    arch: str = "v73",
    inputs_npz: str | None = None,
    rtol: float = DEFAULT_RTOL,
    seed: int = 0,
    build_root: Path | None = None,
    progress=lambda msg: None,
) -> tuple[Qemu, list[PairResult]]:
    from ..runtime import HostKernel

    qemu = find_qemu()
    image = image_path(arch, build_root)
    model = read_model(model_path)
    if not pairs_within(model.graph):
        raise ModelError(no_pair_message(str(model_path)))
    progress("capturing the pairs' inputs on stock ONNX Runtime")
    feeds = model_feeds(Path(model_path), inputs_npz, seed)
    sites = reach_pairs(model, feeds)
    if inputs_npz is None:
        sites = _taking_other_branches(model, feeds, sites, progress)
    reached = [(k, s.node, s.inputs) for k, s in enumerate(sites) if s.inputs is not None]
    host, names = HostKernel(), op_names()
    programs = {k: _specialized(node, inputs, host) for k, node, inputs in reached}
    with tempfile.TemporaryDirectory(prefix="hexfuse-emulate-") as folder, ThreadPoolExecutor(_emulators()) as pool:
        cmd = qemu_command(qemu, image, arch, Path(folder))
        version = f"{Path(qemu.path).name} {'.'.join(map(str, qemu.version))}"
        runs: dict[int, tuple[bytes, Future]] = {}
        for k, node, inputs in reached:
            job = job_bytes(programs[k], inputs, float(_attr(node, C.ATTR_SHARE_A, 0.5)))
            runs[k] = (programs[k], pool.submit(run_image, cmd, job, Path(folder), node.name))
            progress(f"pair {node.name}: running under {version}")
        results = [_result(s, runs.get(k), host, names, rtol) for k, s in enumerate(sites)]
    return qemu, results


def _taking_other_branches(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], sites: list[Site], progress
) -> list[Site]:
    """The pairs of a main-graph If branch the random inputs do not take, reached on those inputs set
    to take it where the condition allows (`subgraphs.feeds_taking`: a bool input, or Equal of an
    input and a constant), as rewrite's verification does."""
    for node in (n for n in model.graph.node if is_if(n)):
        for attribute in bodies_with_pairs(node):
            branch = branch_label(attribute, node)
            untaken = {s.node.name for s in sites if s.where == branch and s.not_reached.startswith(NOT_TAKEN)}
            taking = feeds_taking(model, node.input[0], feeds, attribute == "then_branch") if untaken else None
            if taking is None:
                continue
            progress(f"the random inputs set to take the {branch}")
            try:
                again = {s.node.name: s for s in reach_pairs(model, taking) if s.node.name in untaken}
            except Exception as exc:  # noqa: BLE001 - ORT refuses them: the pairs stay not reached, saying so
                progress(f"the model fails on the inputs set to take the {branch}: {first_line(exc)}")
                continue
            for s in again.values():
                s.where += " (random inputs set to take it)"
            sites = [again.get(s.node.name, s) for s in sites]
    return sites


def _emulators() -> int:
    """qemu processes at once: one per CPU this process may run on (each pair's qemu is one thread)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _specialized(node: onnx.NodeProto, inputs: list[np.ndarray], host) -> bytes:
    program = _attr(node, C.ATTR_PROGRAM)
    if not program:
        raise ModelError(f"pair '{node.name}' has no task program (attribute '{C.ATTR_PROGRAM}')")
    try:
        return host.specialize(program, [x.shape for x in inputs])  # a v2 program: to these shapes
    except HexfuseError as exc:
        raise ModelError(f"pair '{node.name}': task program refused at the input shapes: {exc.message}") from None


def _result(site: Site, run: tuple[bytes, Future] | None, host, names: dict, rtol: float) -> PairResult:
    """The pair's check, or its report as not reached (`run`: its program and qemu run, if reached)."""
    if run is None:
        return PairResult(site.node.name, _kind(site.node), [], {}, where=site.where, not_reached=site.not_reached)
    program, future = run
    return _checked(site, program, future.result(), host, names, rtol)


def _kind(node: onnx.NodeProto) -> str:
    kind = _attr(node, C.ATTR_KIND, b"")
    return kind.decode() if isinstance(kind, bytes) else str(kind)


def _checked(site: Site, program: bytes, run: tuple[dict, list[bytes]], host, names: dict, rtol: float) -> PairResult:
    """The emulated run's outputs against the host kernel's on the same program and inputs."""
    stats, raw = run
    expected = host.run(program, site.inputs, hexagon_order=True)
    plugin = host.run(program, site.inputs)
    quantized = quantized_outputs(program)
    checks = []
    for j, (name, r, e, own) in enumerate(zip(site.node.output, raw, expected, plugin)):
        emulated = np.frombuffer(r, dtype=e.dtype).reshape(e.shape)
        checks.append(check_output(name, emulated, e, rtol, int(j in quantized)))
        if np.issubdtype(e.dtype, np.floating):
            checks[-1].plugin_rel = relative_error(emulated, own)
    op_labels = [names.get(op["opcode"], f"op{op['opcode']}") for op in stats["ops"]]
    return PairResult(site.node.name, _kind(site.node), checks, stats, op_labels, site.where)


# ---- report ---------------------------------------------------------------------------------------


LISTED_OPS = 12  # per pair; a co-located decoder's pair has hundreds of ops


def _count(n: int) -> str:
    return f"{n:,}"


def pair_lines(r: PairResult) -> list[str]:
    where = f" in the {r.where}" if r.where else ""
    if not r.reached:
        return [f"pair {r.name} ({r.kind}){where}: {r.not_reached}"]
    fused, serial = r.stats["runs"]["fused"], r.stats["runs"]["serial"]
    lines = [
        f"pair {r.name} ({r.kind}){where}, image {r.stats['arch']}, {len(r.stats['ops'])} ops, {fused['items']} items"
    ]
    for o in r.outputs:
        exact = "yes"
        if o.first_mismatch:
            i, got, want = o.first_mismatch
            exact = f"no (first mismatch [{i}]: {got:.9g} emulated vs {want:.9g} host)"
        own = "" if o.plugin_rel is None else f"; the plugin's own sums: rel {o.plugin_rel:.3g}"
        lines.append(
            f"  {o.name}: bit-exact {exact}; max abs {o.max_abs:.3g}, rel {o.rel:.3g} "
            f"({o.tolerance}): {'ok' if o.ok else 'MISMATCH'}{own}"
        )
    lines.append(
        f"  fused and serial runs under qemu bit-identical: {'yes' if r.stats['serial_equals_fused'] else 'NO'}"
    )
    lines.append(
        f"  packets (qemu counts, not device cycles): serial {_count(serial['call_packets'])}, "
        f"fused {_count(fused['call_packets'])}"
        + (" (the fused run fell back to serial)" if fused["serialized"] else "")
    )
    per_engine = ", ".join(f"{e} {_count(p)}" for e, p in zip(ENGINES, fused["engine_packets"]) if p)
    busiest = max(fused["worker_packets"])
    lines.append(
        f"  fused, per engine class: {per_engine}; busiest of {len(fused['worker_packets'])} workers "
        f"{_count(busiest)} ({busiest / max(1, fused['item_packets']):.0%} of the item packets)"
    )
    ops = r.stats["ops"]
    largest = sorted(range(len(ops)), key=lambda i: -fused["op_packets"][i])[:LISTED_OPS]
    if len(ops) > LISTED_OPS:
        lines.append(f"  the {LISTED_OPS} ops with the most packets, of {len(ops)} (all in --json):")
    for i in sorted(largest):
        lines.append(
            f"    {'AB'[ops[i]['task']]} {r.op_names[i]:<14} {ENGINES[ops[i]['engine']]:<6} "
            f"{_count(fused['op_packets'][i]):>14} packets, {fused['op_items'][i]} items"
        )
    return lines


NOTE = (
    "packets: executed VLIW packets counted by qemu (its packet counter, read by the image around every work "
    "item), not device cycles. On the coop platform the workers run one after the other on one thread, so "
    "serial and fused execute the same work; 'busiest worker' is the part one hardware thread would run if "
    "the workers were threads and never waited."
)


def unreached_note(results: list[PairResult]) -> str:
    """'; N not reached ...' for the summary line, naming where they sit; '' when every pair was reached."""
    missed = [r for r in results if not r.reached]
    if not missed:
        return ""
    where = ", ".join(dict.fromkeys(r.where for r in missed))
    return f"; {len(missed)} of {len(results)} not reached (in the {where}; --inputs that take a branch reach it)"


def report_json(qemu: Qemu, arch: str, rtol: float, results: list[PairResult]) -> dict:
    return {
        "qemu": {"path": qemu.path, "version": ".".join(map(str, qemu.version))},
        "arch": arch,
        "rtol": rtol,
        "note": NOTE,
        "pairs": [
            {
                "name": r.name,
                "kind": r.kind,
                "where": r.where,  # "" in the main graph, else the If branch
                "reached": r.reached,
                "not_reached": r.not_reached,  # why not, when not reached
                "ok": r.ok,
                "bit_exact": r.bit_exact,
                "outputs": [o.__dict__ for o in r.outputs],
                "op_names": r.op_names,
                "stats": r.stats,
            }
            for r in results
        ],
    }
