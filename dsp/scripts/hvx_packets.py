#!/usr/bin/env python3
"""hvx_packets.py - executed VLIW packets per 128-byte vector of each HVX
kernel under qemu-hexagon, next to the minimum the kernel's instruction mix
allows.

For each kernel the qemu test image (test_hvx_kernels.elf --packets K) runs
the kernel once on a small, 128-byte aligned problem under

    qemu-hexagon -singlestep -d exec,nochain -D LOG    (-one-insn-per-tb on qemu >= 8.1)

With -singlestep every translation block is one packet, and with nochain
every executed block is logged, so each "Trace" line of LOG is one executed
packet. Packets whose PC lies inside the kernel's symbols (address and size
from llvm-nm-19 -S) are counted.

Minimum: the hot loop is the innermost loop of the kernel (a hardware
loop's endloop or a branch back: PC[i+1] <= PC[i] in the trace) that
executed the most packets; its body is its last complete iteration in the
trace, disassembled with llvm-objdump-19. Its instructions are classified by HVX resource, and the
lower bound on packets per iteration is the largest of

    ceil(instructions / 4)                 4 slots per packet
    vector loads                           1 HVX load resource
    vector stores                          1 HVX store resource
    ceil(multiply units / 2)               2 HVX multiply resources
                                           (vmpyi.h and widening pair
                                           multiplies take both)
    permute ops (vlut, vpack, vshuff, valign, vmemu)   1 permute resource
    ceil((shift + permute ops) / 2)        shifts run on the shift or the
                                           permute/shift resource
    ceil(HVX compute ops / 4)              ALU ops take any free resource
    ceil(scalar + vector memory ops / 2)   slots 0 and 1

divided by the units (128-byte output vectors, or vrmpy ops for the
matmul) one iteration produces. It ignores latencies and loop-carried
dependencies: it is what the instruction mix allows, not a schedule.

Rates (--json FILE): the cost model's HVX integer rates of the hexagon-v73 target
(hexfuse_onnx/targets/emulated/hvx-v73.json) are these counts converted at the
modelled clock, assuming one packet per cycle per hardware thread (an HVX
context); qemu models no stalls, so this is an upper bound on the rate:

    op/s per context = ops per unit / (packets / units) x 1 packet/cycle x clock

with "packets" the whole call (setup and tails included). Counts are
deterministic: two runs give the same figures (tests/test_hvx_rates.py).

With --target TARGET_JSON (hexfuse_onnx/targets/hexagon-v73.json) the rates are also written
into that cost-model target, each with its source "emulated (qemu packets): ...".

Usage: dsp/scripts/hvx_packets.py [--build-root DIR] [--arch v67|v73] [--kernel NAME ...] [--json FILE]
                                  [--target TARGET_JSON]
"""

import argparse
import datetime
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from collections import Counter

DSP_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_DIR = os.path.dirname(DSP_DIR)

# QMATMUL's and IMATMUL's HVX item (dsp/src/ops/qmatmul_hvx.c) up to the int32 sums: packing, sums, vrmpy
QGEMM_ITEM = [
    "hvx_qgemm_pack",
    "hvx_qgemm_col_sums",
    "hvx_qgemm_copy_row",
    "hvx_qgemm_rows",
    "qgemm_row_sum",
    "qgemm_acc_start",
    "qgemm_tile4_u",
    "qgemm_tile1_u",
]
# kernel -> (extra local symbols counted with it, unit counted per loop iteration)
KERNELS = {
    "hvx_add_i16": ([], "store"),
    "hvx_add_sat_i16": ([], "store"),
    "hvx_mul_i16": ([], "store"),
    "hvx_relu_i16": ([], "store"),
    "hvx_add_i32": ([], "store"),
    "hvx_add_sat_i32": ([], "store"),
    "hvx_mul_i32": ([], "store"),
    "hvx_relu_i32": ([], "store"),
    "hvx_lut_i8": ([], "store"),
    "hvx_requant_i32_i8": (["rq_setup"], "store"),
    "hvx_matmul_i8": (["rq_setup", "rowsum_i8", "load_bias"], "vrmpy"),
    "hvx_dequant_i8_f32": (["dq_words", "dq_bits"], "store"),
    "hvx_dequant_i16_f32": (["dq_words16", "dq_bits"], "store"),
    # QUANTIZE_LINEAR's HVX path (dsp/src/ops/quant.c): fixed point from the bit patterns, near ties by the reference
    "hvx_quant_f32": (
        ["q_run", "q_words", "q_block", "q_fix", "q_store", "lane_bits", "quant_ref", "div_floor"],
        "store",
    ),
    # QMAXPOOL's HVX row path (dsp/src/ops/qpool.c): window rows' max, then the taps' max
    "hvx_maxpool": (["hvx_maxpool_rows", "hvx_maxpool_taps"], "store"),
    # QAVGPOOL's HVX row path (dsp/src/ops/qpool.c): window rows' sums, the taps' sums, fixed-point outputs
    "hvx_avgpool": (["hvx_avgpool_rows", "hvx_avgpool_taps", "hvx_avgpool_finish"], "store"),
    # QRESIZE's HVX rows (dsp/src/ops/resize.c): the table prepared, each source row through it, spread
    "hvx_qresize": (["hvx_qresize_init", "hvx_qresize_rows", "hvx_lut_i8_prepare_xor"], "store"),
    # TRANSPOSE's HVX kernel (dsp/src/ops/memory.c): tiles transposed by vdeal/vshuff passes, staged rows
    "hvx_transpose": (
        ["tile_geometry", "transpose_tile", "pass", "pass_aligned", "pass_unaligned", "copy_in", "hvx_copy_bytes"],
        "store",
    ),
    # the same on narrow output rows (staged tiles)
    "hvx_transpose_narrow": (
        ["hvx_transpose", "tile_geometry", "transpose_tile", "pass", "pass_aligned", "pass_unaligned", "copy_in"]
        + ["hvx_copy_bytes"],
        "store",
    ),
    # QADD / QMUL blocks (dsp/src/ops/qeltwise.c): fixed-point requantisation, tie check
    "hvx_qadd": (["hvx_qbin_block"], "store"),
    "hvx_qmul": (["hvx_qbin_block"], "store"),
    # QMATMUL's HVX path (dsp/src/ops/qmatmul_hvx.c) on one item: packing, sums, vrmpy, scalar requantisation
    "hvx_qgemm": ([*QGEMM_ITEM, "hvx_qgemm_requant", "memcpy"], "vrmpy"),
    # IMATMUL's HVX path (dsp/src/ops/qmatmul_hvx.c) on one item: as hvx_qgemm, the int32 sums stored as they are
    "hvx_imatmul": ([*QGEMM_ITEM, "hvx_qgemm_store_words", "memcpy"], "vrmpy"),
    # ICONV2D's HVX path (dsp/src/ops/qmatmul_hvx.c) on one item: im2col, then as hvx_imatmul
    "hvx_iconv": (
        [*QGEMM_ITEM, "hvx_im2col_rows", "im2col_tap", "fill_bytes", "copy_bytes", "hvx_qgemm_store_words", "memcpy"],
        "vrmpy",
    ),
}

PERMUTE = {
    "vlut32",
    "vlut16",
    "vpack",
    "vpacke",
    "vpacko",
    "vshuff",
    "vdeal",
    "valign",
    "vlalign",
    "vror",
    "vdelta",
    "vrdelta",
    "vshuffe",
    "vshuffo",
    "vdeale",
}
PERMUTE_SHIFT = {"vunpack", "vunpacko", "vzxt", "vsxt"}  # double: permute + shift
SHIFT = {"vasr", "vasl", "vlsr", "vrotr", "vnormamt", "vpopcount", "vcl0", "vround", "vasrinto"}
MULTIPLY = {
    "vrmpy",
    "vmpye",
    "vmpyo",
    "vmpyie",
    "vmpyieo",
    "vmpyio",
    "vmpyi",
    "vmpy",
    "vmpa",
    "vdmpy",
    "vdsad",
    "vrsad",
    "vtmpy",
    "vsplat",
    "vinsert",
    "vabsdiff",
    "vmpyewuh",
    "vmpyiewuh",
    "vmpyiewh",
    "vmpyowh",
}


def tool(*names):
    for n in names:
        p = shutil.which(n)
        if p:
            return p
    sys.exit("hvx_packets: none of %s found (Debian: apt-get install -y llvm-19 qemu-user)" % ", ".join(names))


def symbols(nm, elf):
    out = subprocess.run([nm, "-S", "--defined-only", elf], check=True, capture_output=True, text=True).stdout
    syms = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4:
            syms[f[3]] = (int(f[0], 16), int(f[1], 16))
    return syms


def disassemble(objdump, elf, lo, hi, arch="v67"):
    """address of packet -> list of instruction strings, and the set of endloop packets."""
    out = subprocess.run(
        [
            objdump,
            "-d",
            "--no-show-raw-insn",
            "--mcpu=hexagon%s" % arch,
            "--mattr=+hvx%s,+hvx-length128b" % arch,
            "--start-address=%#x" % lo,
            "--stop-address=%#x" % hi,
            elf,
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    packets, endloops, cur, cur_addr = {}, set(), None, None
    for line in out.splitlines():
        m = re.match(r"\s*([0-9a-f]+):\s*(.*)$", line)
        if not m:
            continue
        addr, text = int(m.group(1), 16), m.group(2).strip()
        if text.startswith("{"):
            cur_addr, cur = addr, []
            text = text[1:]
        if cur is None:
            continue
        end = "}" in text
        body = text.split("}")[0]
        for ins in body.split(";"):
            ins = ins.strip()
            if ins and ins != "nop":
                cur.append(ins)
        if end:
            packets[cur_addr] = cur
            if ":endloop0" in text:
                endloops.add(cur_addr)
            cur = None
    return packets, endloops


def classify(ins):
    """-> dict of resource counts for one instruction"""
    c = Counter(insn=1)  # immext words take a slot too
    if re.match(r"^(if \(.*?\)\s*)?vmem(u)?\(.*\)\s*=", ins):  # vector store
        c["vst"] += 1
        c["mem"] += 1
        if "vmemu" in ins:
            c["perm"] += 1
        return c
    if re.search(r"=\s*vmem(u)?\(", ins):  # vector load
        c["vld"] += 1
        c["mem"] += 1
        if "vmemu" in ins:
            c["perm"] += 1
        return c
    if re.search(r"\bmem[bhwd]?\w*\(", ins) or re.search(r"\bmemu[bh]\(", ins):
        c["mem"] += 1  # scalar load/store
        return c
    m = re.match(r"^([vq]\d+(:\d+)?)(\.\w+)?\s*([-+|&^]?=)\s*(\w+)", ins)
    if not m:
        return c  # scalar instruction
    dest_pair = m.group(2) is not None
    op = m.group(5)
    c["hvx"] += 1
    if op in MULTIPLY:
        units = 2 if dest_pair or (op == "vmpyi" and re.search(r"vmpyi\(v\d+\.h,v\d+\.h\)", ins)) else 1
        c["mpy"] += units
    elif op in PERMUTE_SHIFT or (op in ("vshuff", "vdeal") and dest_pair):
        c["perm"] += 1
        c["shift"] += 1
    elif op in PERMUTE:
        c["perm"] += 1
    elif op in SHIFT:
        c["shift"] += 1
    else:
        c["alu"] += 1
    return c


def min_packets(insns):
    t = Counter()
    for ins in insns:
        t.update(classify(ins))
    bounds = {
        "slots": math.ceil(t["insn"] / 4),
        "load": t["vld"],
        "store": t["vst"],
        "multiply": math.ceil(t["mpy"] / 2),
        "permute": t["perm"],
        "shift+permute": math.ceil((t["shift"] + t["perm"]) / 2),
        "hvx compute": math.ceil((t["alu"] + t["mpy"] + t["shift"] + t["perm"]) / 4),
        "memory slots": math.ceil(t["mem"] / 2),
    }
    best = max(bounds.values())
    binding = [k for k, v in bounds.items() if v == best]
    return best, binding, t


def one_packet_per_block(qemu):
    """qemu 8.1 renamed -singlestep to -one-insn-per-tb; qemu 10 no longer knows the old name."""
    usage = subprocess.run([qemu, "-h"], capture_output=True, text=True).stdout
    return "-one-insn-per-tb" if "-one-insn-per-tb" in usage else "-singlestep"


def qemu_version(qemu):
    out = subprocess.run([qemu, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"version (\d+)\.(\d+)\.?(\d*)", out)
    if not m:
        sys.exit("hvx_packets: cannot read the version of %s" % qemu)
    return m.group(0).split()[1]


def qemu_arch_note(qemu, arch):
    if arch == "v67":
        return ""
    return " -cpu %s" % arch if int(qemu_version(qemu).split(".")[0]) >= 10 else " (%s image relabelled v67)" % arch


def image_command(qemu, elf, arch, workdir):
    """qemu command prefix for the image: v73 runs with -cpu v73 on qemu >= 10; older qemu knows
    only up to v67 and gets a copy whose ELF e_flags say v67 (the integer HVX code runs the same)."""
    if arch == "v67":
        return [qemu], elf
    if int(qemu_version(qemu).split(".")[0]) >= 10:
        return [qemu, "-cpu", arch], elf
    relabelled = os.path.join(workdir, "%s_as_v67_%s" % (arch, os.path.basename(elf)))
    with open(elf, "rb") as f:
        data = bytearray(f.read())
    data[36:40] = struct.pack("<I", 0x67)
    with open(relabelled, "wb") as f:
        f.write(data)
    os.chmod(relabelled, 0o755)
    return [qemu], relabelled


def run_kernel(qemu, elf, kernel, logdir, arch="v67"):
    log = os.path.join(logdir, kernel + ".log")
    prefix, image = image_command(qemu, elf, arch, logdir)
    out = subprocess.run(
        prefix + [one_packet_per_block(qemu), "-d", "exec,nochain", "-D", log, image, "--packets", kernel],
        capture_output=True,
        text=True,
        timeout=300,
    )
    m = re.search(r"PACKETS \S+ units=(\d+) unit=(\S+)", out.stdout)
    if out.returncode != 0 or not m:
        sys.exit("hvx_packets: %s failed: %s %s" % (kernel, out.stdout, out.stderr))
    pcs = []
    pat = re.compile(r"^Trace \d+: \S+ \[[0-9a-f]+/([0-9a-f]+)/")
    with open(log) as f:
        for line in f:
            mm = pat.match(line)
            if mm:
                pcs.append(int(mm.group(1), 16))
    return int(m.group(1)), m.group(2), pcs


IMAGE_DIRS = {"v67": "hexagon-qemu", "v73": "hexagon-v73"}

# The cost model's HVX integer rates (hexfuse_onnx/costmodel.py, Target fields) and the kernel that
# grounds each: ops the profile counts per unit of the kernel (2 per MAC; 1 per element of an
# elementwise op, as profile.py counts Add and Mul).
RATES = {
    "vector_int8_ops_per_context": (
        "hvx_qgemm",
        2 * 128,
        "QMatMul's HVX path at M=8 K=128 N=256: int8 MACs, 128 per vrmpy, 2 ops per MAC; packing, zero-point "
        "sums and the scalar float requantisation included",
    ),
    "vector_int16_ops_per_context": ("hvx_mul_i16", 64, "int16 elementwise: 64 elements per vector, 1 op each"),
}
# The cost model's 8-bit op classes (hexfuse_onnx/costmodel.py INT8_OP_CLASSES, the target's
# class_rates) and the kernel that grounds each: ops the profile counts per unit (1 per element of
# Add/Mul, 1 per window tap of MaxPool, 10 per element of Sigmoid/Tanh).
CLASS_RATES = {
    "int8 add": (
        "hvx_qadd",
        128,
        "QAdd u8: 128 outputs, 1 op each; blocks near a rounding tie run scalar, not counted",
    ),
    "int8 mul": (
        "hvx_qmul",
        128,
        "QMul u8: 128 outputs, 1 op each; blocks near a rounding tie run scalar, not counted",
    ),
    "int8 maxpool": (
        "hvx_maxpool",
        128 * 9,
        "QMaxPool u8 3x3 stride 1: 128 outputs of 9 taps from rows of 130; the core's row loop and padding not counted",
    ),
    "int8 lut": ("hvx_lut_i8", 128 * 10, "QLut: 128 outputs of a 10-op function (Sigmoid, Tanh), one lookup each"),
    "int8 resize": (
        "hvx_qresize",
        128 + 32,
        "QResize u8 nearest x2 (60 x 80 -> 120 x 160): 128 output bytes and the 32 source bytes they read, 1 op "
        "per byte as the profile counts a nearest Resize's bytes; the core's row loop not counted",
    ),
    "int8 transpose": (
        "hvx_transpose",
        128 + 128,
        "Transpose u8 [64, 64] (whisper_encoder's attention): 128 output bytes and the 128 input bytes they read, "
        "1 op per byte as the profile counts a Transpose's bytes; one 4 KiB tile read and written in place",
    ),
    "int8 conv": (
        "hvx_iconv",
        2 * 128,
        "ConvInteger u8 x u8 -> i32 (ICONV2D's HVX path) 32 -> 64 channels 3x3 padded on 4 x 32 pixels: int8 MACs, "
        "128 per vrmpy, 2 ops per MAC; im2col, packing and zero-point sums included",
    ),
}
# Kernel classes measured for per-op-class rates, not read by the cost model: elements per unit.
CLASSES = {
    "int16 elementwise (add, saturating)": ("hvx_add_sat_i16", 64),
    "int32 elementwise (add, saturating)": ("hvx_add_sat_i32", 32),
    "int8 table lookup (vlut32; QLUT, QCONCAT's requantisation)": ("hvx_lut_i8", 128),
    "QResize u8 nearest x2 (output bytes; HVX rows without the core's row loop)": ("hvx_qresize", 128),
    "QMaxPool u8 3x3 stride 1 (outputs; HVX row steps without the core's row loop)": ("hvx_maxpool", 128),
    "QAveragePool u8 3x3 stride 1 (outputs; HVX row steps without the core's row loop and the outputs near a "
    "rounding tie, which run scalar)": ("hvx_avgpool", 128),
    "QAdd u8 (outputs; blocks near a rounding tie run scalar, not counted)": ("hvx_qadd", 128),
    "QMul u8 (outputs; blocks near a rounding tie run scalar, not counted)": ("hvx_qmul", 128),
    "Transpose u8 [64, 64] (one tile in place; the 'int8 transpose' class)": ("hvx_transpose", 128),
    "Transpose u8 [10, 3200] (layout_cdla's heads: tiles staged, output rows of 10 bytes)": (
        "hvx_transpose_narrow",
        128,
    ),
    "requantisation int32 -> int8": ("hvx_requant_i32_i8", 128),
    "DequantizeLinear u8 -> f32": ("hvx_dequant_i8_f32", 32),
    "QuantizeLinear f32 -> u8 (inputs; the lanes near a rounding tie by the reference, counted)": ("hvx_quant_f32", 32),
    "int8 matmul, vrmpy + fixed-point requantisation (hvx_matmul_i8, no opcode)": ("hvx_matmul_i8", 2 * 128),
    "MatMulInteger u8 -> i32 (IMATMUL's HVX path, M=8 K=128 N=256, 2 ops per MAC)": ("hvx_imatmul", 2 * 128),
}
CLOCK_HZ = 1.0e9  # modelled (assumption), as costmodel's _HEXAGON_CLOCK_HZ
PACKETS_PER_CYCLE = 1.0  # modelled (assumption): one packet per cycle per hardware thread, no stalls


def measure(qemu, nm, objdump, elf, arch, kernels):
    """-> rows (kernel, units, unit name, packets in the kernel, hot-loop figures or None)"""
    syms = symbols(nm, elf)
    rows = []
    with tempfile.TemporaryDirectory() as logdir:
        for k in kernels:
            extra, unit_kind = KERNELS[k]
            ranges = [syms[s] for s in [k] + extra if s in syms]
            units, unit_name, pcs = run_kernel(qemu, elf, k, logdir, arch)
            inside = [pc for pc in pcs if any(a <= pc < a + n for a, n in ranges)]
            packets = {}
            for a, n in ranges:
                packets.update(disassemble(objdump, elf, a, a + n, arch)[0])
            rows.append((k, units, unit_name, len(inside), hot_loop(inside, packets, unit_kind)))
    return rows


def hot_loop(inside, packets, unit_kind):
    """The backward control transfer (endloop or branch back, seen as PC[i+1] <= PC[i] in the
    trace) that executed the most packets; its body is its last complete iteration in the trace."""
    edges = Counter()
    last = {}
    for i in range(len(inside) - 1):
        a, b = inside[i], inside[i + 1]
        if b <= a:
            edges[(a, b)] += 1
            last[(a, b)] = i
    best = None
    for (a, b), n in edges.items():
        j = last[(a, b)]
        i0 = j
        while i0 >= 0 and inside[i0] != b:
            i0 -= 1
        if i0 < 0:
            continue
        body = inside[i0 : j + 1]
        # innermost loops only: no other backward transfer inside the body
        if any(body[t + 1] <= body[t] for t in range(len(body) - 1)):
            continue
        executed = n * len(body)
        if best is None or executed > best[2]:
            best = (a, body, executed, n + 1)
    if best is None:
        return None
    _, body, _, iters = best
    insns = [ins for pc in body for ins in packets.get(pc, [])]
    per_iter_min, binding, mix = min_packets(insns)
    units_per_iter = mix["vst"] if unit_kind == "store" else sum(1 for i in insns if "vrmpy" in i)
    return (len(body), per_iter_min, binding, units_per_iter, iters, mix)


def rates_document(rows, qemu, arch, elf):
    """The JSON the cost model reads: per kernel its packets, and the rates derived from them."""
    kernels = {
        k: {
            "units": units,
            "unit": unit_name,
            "packets": total,
            "packets_per_unit": round(total / units, 6),
            "hot_loop_packets_per_unit": None if loop is None else round(loop[0] / max(loop[3], 1), 6),
        }
        for k, units, unit_name, total, loop in rows
    }

    def rate(kernel, ops_per_unit):
        return ops_per_unit / kernels[kernel]["packets_per_unit"] * PACKETS_PER_CYCLE * CLOCK_HZ

    def rates_of(table, unit):
        return {
            name: {"kernel": kernel, "ops_per_unit": ops, "what": what, "value": rate(kernel, ops), "unit": unit}
            for name, (kernel, ops, what) in table.items()
            if kernel in kernels
        }

    return {
        "what": "HVX integer rates of the hexagon-v73 cost-model target, from packets executed under qemu-hexagon",
        "written_by": "dsp/scripts/hvx_packets.py --arch %s --json" % arch,
        "date": datetime.date.today().isoformat(),
        "qemu": "qemu-hexagon %s%s" % (qemu_version(qemu), qemu_arch_note(qemu, arch)),
        "image": os.path.relpath(elf, REPO_DIR),
        "method": "qemu -d exec,nochain with one packet per translation block; packets whose PC is in the "
        "kernel's symbols, one call on a small 128-byte aligned problem (dsp/tests/qemu/test_hvx_kernels.c "
        "--packets): the whole call, setup and tails included",
        "clock_hz": CLOCK_HZ,
        "packets_per_cycle": PACKETS_PER_CYCLE,
        "assumptions": "1 GHz clock and one packet per cycle per hardware thread (HVX context): qemu counts "
        "packets, not cycles, and models no stalls, caches, VTCM or contention; a device runs slower",
        "formula": "op/s per context = ops per unit / (packets / units) x packets_per_cycle x clock_hz",
        "kernels": kernels,
        "rates": rates_of(RATES, "op/s"),
        "class_rates": rates_of(CLASS_RATES, "op/s per context"),
        "classes": {
            name: {"kernel": kernel, "elements_per_unit": n, "elements_per_s": rate(kernel, n)}
            for name, (kernel, n) in CLASSES.items()
            if kernel in kernels
        },
    }


def write_atomically(path, text):
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".hvx_rates.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _emulated_source(doc, r, rates_path):
    """Where an emulated rate comes from: the kernel's packets, the qemu run, the clock assumption."""
    k = doc["kernels"][r["kernel"]]
    return (
        "emulated (qemu packets): %s, %d packets / %d %s (%s; %s, %s; %s) at %g GHz and %g packet "
        "per cycle per context (assumption)"
        % (
            r["kernel"],
            k["packets"],
            k["units"],
            k["unit"],
            r["what"],
            doc["qemu"],
            doc["date"],
            os.path.relpath(rates_path, REPO_DIR),
            doc["clock_hz"] / 1e9,
            doc["packets_per_cycle"],
        )
    )


def ground_target(target_path, doc, rates_path):
    """The target JSON with the rates of `doc` as its parameters, each saying where it comes from."""
    with open(target_path, encoding="utf-8") as f:
        target = json.load(f)
    for name, r in doc["rates"].items():
        if name not in target["params"]:
            sys.exit("hvx_packets: %s has no parameter '%s'" % (target_path, name))
        source = _emulated_source(doc, r, rates_path)
        target["params"][name] = {"value": r["value"], "unit": r["unit"], "source": source}
    contexts = target["params"]["vector_contexts"]["value"]
    for name, r in doc.get("class_rates", {}).items():
        target.setdefault("class_rates", {})[name] = {
            "value": r["value"] * contexts,
            "unit": "op/s",
            "source": "%s, x %g HVX contexts (vector_contexts)" % (_emulated_source(doc, r, rates_path), contexts),
        }
    target["description"] = target["description"].replace(
        "(modelled, not measured)", "(modelled; HVX integer rates emulated under qemu)"
    )
    return target


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-root", default=os.path.join(REPO_DIR, "build"))
    ap.add_argument("--arch", choices=sorted(IMAGE_DIRS), default="v67", help="image to run (default v67)")
    ap.add_argument("--kernel", action="append", choices=list(KERNELS), help="only these kernels")
    ap.add_argument("--json", help="write the packets and the cost model's rates to this file")
    ap.add_argument("--target", help="also write the rates into this cost-model target JSON (needs --json)")
    args = ap.parse_args()
    if args.target and not args.json:
        sys.exit("hvx_packets: --target needs --json (the target names the rates file)")
    elf = os.path.join(args.build_root, IMAGE_DIRS[args.arch], "test_hvx_kernels.elf")
    if not os.path.exists(elf):
        sys.exit("hvx_packets: %s missing: run dsp/scripts/build_hexagon.sh first" % elf)
    qemu = tool(os.environ.get("QEMU_HEXAGON", "qemu-hexagon"))
    nm = tool("llvm-nm-19", "llvm-nm")
    objdump = tool("llvm-objdump-19", "llvm-objdump")
    rows = measure(qemu, nm, objdump, elf, args.arch, args.kernel or list(KERNELS))
    if args.json:
        doc = rates_document(rows, qemu, args.arch, elf)
        write_atomically(args.json, json.dumps(doc, indent=2) + "\n")
        if args.target:
            target = ground_target(args.target, doc, args.json)
            write_atomically(args.target, json.dumps(target, indent=2) + "\n")
    print_table(rows, args.arch, elf)
    return 0


def print_table(rows, arch, elf):
    print("HVX packets per 128-byte vector under qemu-hexagon (%s image, %s)" % (arch, os.path.basename(elf)))
    print(
        "unit: 'vector' = one 128-byte output vector; 'vrmpy' = one 128-byte B vector x 4 k of one row "
        "(32 lanes x 4 MACs)"
    )
    hdr = "%-20s %6s %-8s %9s %10s %10s %10s  %s" % (
        "kernel",
        "units",
        "unit",
        "packets",
        "per unit",
        "loop/unit",
        "min/unit",
        "bound by (loop mix)",
    )
    print(hdr)
    print("-" * len(hdr))
    for k, units, unit_name, total, loop in rows:
        if loop is None:
            print(
                "%-20s %6d %-8s %9d %10.2f %10s %10s  no hardware loop found"
                % (k, units, unit_name, total, total / units, "-", "-")
            )
            continue
        body_packets, per_iter_min, binding, upi, iters, mix = loop
        upi = max(upi, 1)
        mixs = "ld %d st %d mpy %d perm %d shift %d alu %d insn %d" % (
            mix["vld"],
            mix["vst"],
            mix["mpy"],
            mix["perm"],
            mix["shift"],
            mix["alu"],
            mix["insn"],
        )
        print(
            "%-20s %6d %-8s %9d %10.2f %10.2f %10.2f  %s; loop: %d packets x %d iters, %d %s/iter (%s)"
            % (
                k,
                units,
                unit_name,
                total,
                total / units,
                body_packets / upi,
                per_iter_min / upi,
                "+".join(binding),
                body_packets,
                iters,
                upi,
                unit_name,
                mixs,
            )
        )


if __name__ == "__main__":
    sys.exit(main())
