"""Spatial ops: MaxPool and AveragePool (2-D, and 1-D as 2-D with H = 1), GlobalAveragePool, GlobalMaxPool, Resize;
the pads rule Conv shares, and the reshape copies that run a 1-D op on the kernel's 2-D one."""

from __future__ import annotations

import math

import numpy as np
import onnx

from ..profile import Engine as EngineClass
from .abi import Dtype, Opcode, PoolParam, ResizeCoord, ResizeMode, ResizeNearest, ResizeParam, Task
from .lowerer import Lowerer, attr, f32_bits, str_attr
from .registry import LoweringError, lowers
from .traced import traced_dims

POOLS = {"MaxPool": Opcode.MAXPOOL, "AveragePool": Opcode.AVGPOOL}
# RESIZE's scale param of a Resize by `sizes`: the kernel takes f32(out) / f32(in) of the dims it runs at, as ONNX
# Runtime does. A scale fixed when lowering holds at some input shapes only: `sizes` folded from a Shape gave SLANet's
# CSP-PAN x2 at every 32nd input side, and 16 -> 31 at 488.
SCALE_OF_SIZES = 0


def pads_2d(n: onnx.NodeProto, x: list[int], kernel: list[int], strides: list[int], dil: list[int]) -> list[int]:
    """Explicit pads [begin per spatial axis..., end per spatial axis...] of a Conv / pooling node
    (auto_pad resolved): [top, left, bottom, right] in 2-D. SAME_* pads depend on the side mod the
    stride: over symbolic dims the shape section carries them by this rule (`shape_expr.same_pads`)."""
    r = len(kernel)
    auto_pad = str_attr(n, "auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        return [int(p) for p in attr(n, "pads", [0] * 2 * r)]
    if auto_pad == "VALID":
        return [0] * 2 * r
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise LoweringError(n.op_type, n.name, f"auto_pad '{auto_pad}' is not supported")
    pads = [0] * 2 * r
    for a in range(r):
        out = math.ceil(x[2 + a] / strides[a])
        total = max(0, (out - 1) * strides[a] + (kernel[a] - 1) * dil[a] + 1 - x[2 + a])
        small, big = total // 2, total - total // 2
        pads[a], pads[r + a] = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
    return pads


def lift_1d(kernel: list[int], strides: list[int], dil: list[int], pads: list[int]) -> tuple[list[int], ...]:
    """The 2-D window of a 1-D one: H of extent 1, no stride, dilation or pads along it."""
    return [1] + kernel, [1] + strides, [1] + dil, [0, pads[0], 0, pads[1]]


def as_2d(cx: Lowerer, n: onnx.NodeProto, t: Task, tensor: int) -> int:
    """A COPY of a [N, C, L] tensor (or a [M, C, k] weight) as [N, C, 1, L] of its dtype: the 2-D
    kernels' input. Its dims are traced from the tensor's own: matched against the body instead, a
    weight's M = 1 was taken for a batch of 1 (Silero VAD v5's decoder Conv)."""
    dims = traced_dims(cx.prog, tensor)
    view = cx.scratch(dims[:2] + [1] + dims[2:], t, cx.prog.tensors[tensor].dtype)
    return cx.emit(n, t, Opcode.COPY, [tensor], out=view, engine=EngineClass.MEMORY)


def emit_1d(
    cx: Lowerer,
    n: onnx.NodeProto,
    t: Task,
    opcode: Opcode,
    inputs: list[int],
    params: dict,
    out: str | int | None = None,
    dtype: Dtype = Dtype.F32,
    engine: EngineClass | None = None,
) -> int:
    """Emit a 2-D op (on `engine`, else n's) into an [N, C, 1, L] scratch of `dtype`, then COPY it to
    the [N, C, L] output `out` (n's first unless named: a QDQ group's QuantizeLinear output). The
    scratch has n's output dims (n's own tensor: the shape section finds their expressions there);
    returns it."""
    y = cx.shape(n.output[0], n)
    flat = cx.emit(n, t, opcode, inputs, params, out=cx.scratch(y[:2] + [1] + y[2:], t, dtype), engine=engine)
    cx.emit(
        n, t, Opcode.COPY, [flat], out=n.output[0] if out is None else out, engine=EngineClass.MEMORY, out_dtype=dtype
    )
    return flat


def pool_out_len(size: int, k: int, stride: int, dil: int, pad_begin: int, pad_end: int, ceil_mode: bool) -> int:
    """Output length of a pooling axis, as hfx_pool_out_len() in dsp/src/program.c (ONNX Runtime's rule)."""
    span = size + pad_begin + pad_end - dil * (k - 1) - 1
    if span < 0:
        return -1
    if not ceil_mode:
        return span // stride + 1
    out = -(-span // stride) + 1
    if (out - 1) * stride >= size + pad_begin:
        out -= 1
    return out


@lowers(*POOLS)
def pool(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    params = pool_params(cx, n)
    if len(cx.shape(n.input[0], n)) == 4:
        cx.emit(n, t, POOLS[n.op_type], [cx.read(n.input[0], n, t)], params)
    else:
        x = as_2d(cx, n, t, cx.read(n.input[0], n, t))
        emit_1d(cx, n, t, POOLS[n.op_type], [x], params)


def pool_params(cx: Lowerer, n: onnx.NodeProto) -> dict[PoolParam, int]:
    """The 2-D pooling params of a MaxPool/AveragePool (a 1-D one lifted to H = 1), or LoweringError."""
    op = n.op_type
    x = cx.shape(n.input[0], n)
    if len(x) not in (3, 4):
        raise LoweringError(op, n.name, f"only 1-D and 2-D pooling are supported (input rank {len(x)})")
    if len(n.output) > 1 and any(n.output[1:]):
        raise LoweringError(op, n.name, "the Indices output is not supported")
    if int(attr(n, "storage_order", 0)) != 0:
        raise LoweringError(op, n.name, "storage_order=1 is not supported")
    r = len(x) - 2
    kernel = [int(k) for k in attr(n, "kernel_shape", [])]
    strides = [int(v) for v in attr(n, "strides", [1] * r)]
    dil = [int(v) for v in attr(n, "dilations", [1] * r)]
    if len(kernel) != r or len(strides) != r or len(dil) != r:
        raise LoweringError(op, n.name, f"kernel_shape, strides and dilations must have {r} values")
    if str_attr(n, "auto_pad", "NOTSET").startswith("SAME") and dil != [1] * r:
        # ONNX Runtime pads for the undilated kernel here, ONNX shape inference for the dilated one
        raise LoweringError(op, n.name, "auto_pad SAME with dilations is not supported")
    pads = pads_2d(n, x, kernel, strides, dil)
    got = cx.shape(n.output[0], n)
    if r == 1:
        kernel, strides, dil, pads = lift_1d(kernel, strides, dil, pads)
        x, got = x[:2] + [1] + x[2:], got[:2] + [1] + got[2:]
    ceil_mode = int(attr(n, "ceil_mode", 0))
    include_pad = int(attr(n, "count_include_pad", 0)) if op == "AveragePool" else 0
    _check_pool_window(n, kernel, strides, dil, pads, ceil_mode, include_pad)
    want = [x[0], x[1]] + [
        pool_out_len(x[2 + a], kernel[a], strides[a], dil[a], pads[a], pads[2 + a], bool(ceil_mode)) for a in range(2)
    ]
    if got != want:
        raise LoweringError(
            op,
            n.name,
            f"output shape {got} differs from ONNX Runtime's {want} (ceil_mode "
            "windows starting in the padding are dropped by ONNX Runtime)",
        )
    return {
        PoolParam.PAD_TOP: pads[0],
        PoolParam.PAD_LEFT: pads[1],
        PoolParam.PAD_BOTTOM: pads[2],
        PoolParam.PAD_RIGHT: pads[3],
        PoolParam.STRIDE_H: strides[0],
        PoolParam.STRIDE_W: strides[1],
        PoolParam.DILATION_H: dil[0],
        PoolParam.DILATION_W: dil[1],
        PoolParam.KERNEL_H: kernel[0],
        PoolParam.KERNEL_W: kernel[1],
        PoolParam.CEIL_MODE: ceil_mode,
        PoolParam.COUNT_INCLUDE_PAD: include_pad,
    }


def _check_pool_window(
    n: onnx.NodeProto, kernel: list[int], strides: list[int], dil: list[int], pads: list[int], ceil: int, incl: int
) -> None:
    for what, values in (("kernel_shape", kernel), ("strides", strides), ("dilations", dil)):
        if any(not 1 <= v <= 65535 for v in values):
            raise LoweringError(n.op_type, n.name, f"{what} {values} outside 1..65535")
    if len(pads) != 4 or any(not 0 <= p < kernel[i % 2] for i, p in enumerate(pads)):
        raise LoweringError(n.op_type, n.name, f"pads {pads} must be >= 0 and smaller than the kernel")
    if ceil not in (0, 1) or incl not in (0, 1):
        raise LoweringError(n.op_type, n.name, "ceil_mode and count_include_pad must be 0 or 1")


GLOBAL_POOLS = {"GlobalAveragePool": Opcode.GLOBAL_AVGPOOL, "GlobalMaxPool": Opcode.GLOBAL_MAXPOOL}


@lowers(*GLOBAL_POOLS)
def global_pool(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    if len(cx.shape(n.input[0], n)) < 3:
        raise LoweringError(n.op_type, n.name, "the input needs rank >= 3 (N, C, spatial)")
    cx.emit(n, t, GLOBAL_POOLS[n.op_type], [cx.read(n.input[0], n, t)])


@lowers("Resize")
def resize(cx: Lowerer, n: onnx.NodeProto, t: Task) -> None:
    cx.emit(n, t, Opcode.RESIZE, [cx.read(n.input[0], n, t)], resize_params(cx, n))


def resize_params(cx: Lowerer, n: onnx.NodeProto) -> dict[ResizeParam, int]:
    """RESIZE's params of a Resize node, or LoweringError."""
    op = n.op_type
    if cx.opset < 11:
        raise LoweringError(op, n.name, f"opset {cx.opset} Resize is not supported (opset 11 and later)")
    mode, coord, nearest = _resize_modes(n)
    x, y = cx.shape(n.input[0], n), cx.shape(n.output[0], n)
    rank = len(x)
    if rank < 2 or len(y) != rank:
        raise LoweringError(op, n.name, "the input needs rank >= 2")
    scales, by_sizes = _resize_scales(cx, n, x)
    if not all(np.isfinite(scales)) or not all(scales > 0):
        raise LoweringError(op, n.name, f"scales {scales.tolist()} must be finite and > 0")
    if any(scales[i] != 1 or y[i] != x[i] for i in range(rank - 2)):
        raise LoweringError(op, n.name, "only the last two axes can be resized")
    # the kernel's rule: out = floor(in * scale), or just above it; by `sizes` it takes the scale from the dims
    for a in () if by_sizes else (rank - 2, rank - 1):
        want = float(x[a]) * float(scales[a])
        if not (0 <= want - y[a] < 1 or 0 < y[a] - want <= 1e-5 * y[a]):
            raise LoweringError(op, n.name, f"output length {y[a]} is not floor({x[a]} * {scales[a]})")
    return {
        ResizeParam.MODE: mode,
        ResizeParam.COORD: coord,
        ResizeParam.NEAREST_MODE: nearest if mode == ResizeMode.NEAREST else 0,
        ResizeParam.SCALE_H: SCALE_OF_SIZES if by_sizes else f32_bits(scales[rank - 2]),
        ResizeParam.SCALE_W: SCALE_OF_SIZES if by_sizes else f32_bits(scales[rank - 1]),
    }


def _resize_modes(n: onnx.NodeProto) -> tuple[ResizeMode, ResizeCoord, ResizeNearest]:
    mode = str_attr(n, "mode", "nearest")
    if mode not in ("nearest", "linear"):
        raise LoweringError(n.op_type, n.name, f"mode '{mode}' is not supported (nearest and linear only)")
    coord = str_attr(n, "coordinate_transformation_mode", "half_pixel")
    if _onnx_name(coord) not in ResizeCoord.__members__:
        raise LoweringError(n.op_type, n.name, f"coordinate_transformation_mode '{coord}' is not supported")
    nearest = str_attr(n, "nearest_mode", "round_prefer_floor")
    if mode == "nearest" and _onnx_name(nearest) not in ResizeNearest.__members__:
        raise LoweringError(n.op_type, n.name, f"nearest_mode '{nearest}' is not supported")
    for name in ("antialias", "exclude_outside"):
        if int(attr(n, name, 0)):
            raise LoweringError(n.op_type, n.name, f"{name}=1 is not supported")
    nearest_mode = ResizeNearest[nearest.upper()] if mode == "nearest" else ResizeNearest.ROUND_PREFER_FLOOR
    return ResizeMode[mode.upper()], ResizeCoord[coord.upper()], nearest_mode


def _onnx_name(value: str) -> str:
    """The enum member name of an ONNX attribute value ('half_pixel' -> 'HALF_PIXEL'); ONNX names are lower case."""
    return value.upper() if value == value.lower() else ""


def _resize_scales(cx: Lowerer, n: onnx.NodeProto, x: list[int]) -> tuple[np.ndarray, bool]:
    """The scale of every axis, from the constant `sizes` (ONNX Runtime's f32(out) / f32(in) at these dims) or
    `scales`, and whether they came from `sizes`."""
    rank = len(x)
    axes = [int(a) % rank for a in attr(n, "axes", range(rank))]
    scales_name = n.input[2] if len(n.input) > 2 else ""
    sizes_name = n.input[3] if len(n.input) > 3 else ""
    sizes = cx.const_ints(sizes_name, n) if sizes_name else []
    scales = np.ones(rank, np.float32)
    if sizes:
        if str_attr(n, "keep_aspect_ratio_policy", "stretch") != "stretch":
            raise LoweringError(n.op_type, n.name, "keep_aspect_ratio_policy other than 'stretch' is not supported")
        if len(sizes) != len(axes):
            raise LoweringError(n.op_type, n.name, "sizes do not match the axes")
        for a, v in zip(axes, sizes):
            scales[a] = np.float32(v) / np.float32(x[a])
    elif scales_name:
        given = cx.const_floats(scales_name, n)
        if len(given) != len(axes):
            raise LoweringError(n.op_type, n.name, "scales do not match the axes")
        for a, v in zip(axes, given):
            scales[a] = v
    else:
        raise LoweringError(n.op_type, n.name, "needs constant scales or sizes")
    return scales, bool(sizes)
