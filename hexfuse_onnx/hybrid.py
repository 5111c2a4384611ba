"""LLM hybrid batches (issue 14, POD-Attention's case): one decoder serving a prefill request and a
decode request in one model, the two paired layer against layer.

`colocate --hybrid decoder.onnx` co-locates two copies of the decoder as the streams `prefill/` and
`decode/` (weights shared, each stream's symbolic dims its own) and fixes their lengths: the
prefill request is a chunk of N tokens after a short cached past, the decode request one token
after P cached ones. By default the chunk follows 16 cached tokens, as in chunked prefill
(Sarathi-Serve, POD-Attention's hybrid batches): with no past at all the prefill's attention
concatenates an empty cache, which the kernel does not run, so the alignment cuts there. The
integer shape work the fixed lengths decide is folded (fold.py). The colocate alignment then pairs
the prefill stream with the decode stream, segments holding the same layers' blocks (blocks.py)
only: prefill attention with decode attention, MLP with MLP, one layer per pair where a call is
cheap (host) and several where the call overhead demands more work per call (hexagon-v73). The
decoder's signature (input_ids, attention_mask, position_ids, past_key_values.N.key/value ->
logits, present.N.key/value; a seq2seq decoder's past_key_values.N.decoder.key and cross-attention
past_key_values.N.encoder.key as optimum names them) is read by decoder.py. optimum's merged decoder
(both steps under an If on use_cache_branch) is co-located branch by branch: each request runs the
branch its lengths take, as a model of its own, and the hybrid model has no switch (`_branches_taken`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import decoder
from .colocate import DEFAULT_MAX_SLOWDOWN, Result, colocate
from .colocate_ifs import Switch, switch_of, taken
from .errors import HexfuseError, ModelError, UsageError, WriteError
from .graph import input_dims, read_model
from .modelio import check_output_folder, stage

PREFILL, DECODE = "prefill", "decode"
DEFAULT_PREFILL, DEFAULT_PREFILL_PAST, DEFAULT_PAST = 64, 16, 128


@dataclass(frozen=True)
class Requests:
    """The two requests the hybrid model serves (token counts)."""

    prefill: int = DEFAULT_PREFILL  # new tokens of the prefill chunk
    prefill_past: int = DEFAULT_PREFILL_PAST  # tokens of earlier chunks the prefill has cached (0: none)
    past: int = DEFAULT_PAST  # tokens the decode request has cached (it adds one)

    def check(self) -> None:
        if self.prefill < 2:
            raise UsageError(f"--prefill must be at least 2 tokens (got {self.prefill}); one token is a decode step")
        if self.prefill_past < 0 or self.past < 1:
            raise UsageError("--past must be at least 1 and --prefill-past at least 0")


def decoder_spec(path: str | os.PathLike[str]) -> decoder.DecoderSpec:
    """The decoder's signature, or a ModelError naming what is missing."""
    try:
        return decoder.decoder_spec(path)
    except decoder.NotADecoder as exc:
        raise ModelError(f"--hybrid needs a decoder with a KV cache: {exc}") from None


def shapes(path: str | os.PathLike[str], requests: Requests) -> dict[str, list[int]]:
    """Every input's dims in the hybrid model, by merged name."""
    spec = decoder_spec(path)
    prefill = decoder.input_shapes(spec, requests.prefill, requests.prefill_past)
    decode = decoder.input_shapes(spec, 1, requests.past)
    return {f"{PREFILL}/{k}": v for k, v in prefill.items()} | {f"{DECODE}/{k}": v for k, v in decode.items()}


def inputs(path: str | os.PathLike[str], requests: Requests, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs of both requests (token ids in the vocabulary, masks of ones), by merged name."""
    prefill = decoder.decoder_inputs(path, requests.prefill, requests.prefill_past, seed)
    decode = decoder.decoder_inputs(path, 1, requests.past, seed + 1)
    return {f"{PREFILL}/{k}": v for k, v in prefill.items()} | {f"{DECODE}/{k}": v for k, v in decode.items()}


def _refuse_fixed_dims(path: str | os.PathLike[str], wanted: dict[str, list[int]]) -> None:
    """A decoder whose lengths are fixed (made for one request, as QNN needs a QDQ model) cannot serve
    a prefill and a decode request: a ModelError naming the first input whose fixed dims differ."""
    for name, dims in input_dims(read_model(path, load_external_data=False)).items():
        for half in (PREFILL, DECODE):
            want = wanted.get(f"{half}/{name}")
            if want is None or len(dims) != len(want):
                continue
            if any(isinstance(d, int) and d != w for d, w in zip(dims, want)):
                given = "x".join(str(d) if isinstance(d, int) else "?" for d in dims)
                raise ModelError(
                    f"--hybrid needs a decoder whose sequence and past lengths are free: {path} fixes "
                    f"{name} to {given} where the {half} request needs {'x'.join(map(str, want))} "
                    "(a model made for one request; `colocate MODEL --requests 2` co-locates two of those)"
                )


def hybrid(
    path: str | os.PathLike[str],
    output: str | os.PathLike[str],
    requests: Requests = Requests(),
    target: str = "hexagon-v73",
    kinds: list[str] | None = None,
    min_gain: float | None = None,
    progress: Callable[[str], None] = lambda _: None,
    verify_plugin: bool = False,
    priority: int | None = None,
    max_slowdown: float = DEFAULT_MAX_SLOWDOWN,
) -> Result:
    """Write the hybrid model of the decoder at `path` (see the module docstring); nothing is written
    when the model is not a decoder or any check fails. `priority` 1 makes the decode request
    latency-critical (its modelled latency grows by at most `max_slowdown`), 0 the prefill."""
    requests.check()
    fixed = shapes(path, requests)
    _refuse_fixed_dims(path, fixed)
    progress(
        f"hybrid: prefill {requests.prefill} tokens after {requests.prefill_past}, decode 1 token after {requests.past}"
    )
    options: dict[str, Any] = dict(
        names=[PREFILL, DECODE],
        priority=priority,
        max_slowdown=max_slowdown,
        target=target,
        kinds=kinds,
        min_gain=min_gain,
        progress=progress,
        verify_plugin=verify_plugin,
        specialise=True,
    )
    switch = switch_of(read_model(path, load_external_data=False))
    try:
        if switch is None:
            return colocate([path], output, requests=2, shapes=fixed, feeds=inputs(path, requests), **options)
        return _branches_taken(path, output, switch, requests, fixed, options)
    except ModelError as exc:
        if "fails on the --inputs" in exc.message:  # the requests' own inputs: their lengths, most likely
            longest = max(requests.prefill_past + requests.prefill, requests.past + 1)
            exc.message += (
                f" (the requests take up to {longest} positions: a decoder made for fewer needs smaller --prefill, "
                "--prefill-past and --past)"
            )
            exc.args = (exc.message,)
        raise


def _branches_taken(
    path: str | os.PathLike[str],
    output: str | os.PathLike[str],
    switch: Switch,
    requests: Requests,
    fixed: dict[str, list[int]],
    options: dict[str, Any],
) -> Result:
    """A merged decoder (optimum's If on use_cache_branch): two copies of it hold two Ifs, inside which
    nothing pairs. Each request runs the branch it takes (the decode's cached one; the prefill's too
    after a past, else the first step's) as a model of its own, without the switch: the hybrid model's
    lengths are fixed, and so is each request's branch."""
    if Path(output).resolve() == Path(path).resolve():
        raise WriteError(f"{output}: the output would overwrite the input model; choose another -o")
    check_output_folder(output)
    taken_by = {PREFILL: requests.prefill_past > 0, DECODE: True}
    switches = {f"{half}/{switch.source}" for half in taken_by}
    folder = Path(tempfile.mkdtemp(prefix=f".{Path(output).name}.branches-", dir=Path(output).resolve().parent))
    try:
        flat = _write_branches(path, switch, taken_by, folder)
        feeds = {k: v for k, v in inputs(path, requests).items() if k not in switches}
        at = {k: v for k, v in fixed.items() if k not in switches}
        said = options["progress"]
        named = {**options, "progress": lambda line: said(_named(line, path, flat))}
        try:
            result = colocate(list(flat.values()), output, shapes=at, feeds=feeds, share_weights=True, **named)
        except HexfuseError as exc:
            exc.message = _named(exc.message, path, flat)
            exc.args = (exc.message,)
            raise
        result.compared_how = _named(result.compared_how, path, flat)
        return result
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _write_branches(
    path: str | os.PathLike[str], switch: Switch, taken_by: dict[str, bool], folder: Path
) -> dict[str, Path]:
    """Each request's branch as a model file in `folder`, its switch input dropped: request -> file."""
    model, flat = read_model(path), {}
    for half, then in taken_by.items():
        branch = taken(model, switch, then)
        kept = [v for v in branch.graph.input if v.name != switch.source]
        branch.graph.ClearField("input")
        branch.graph.input.extend(kept)
        flat[half] = folder / f"{half}.onnx"
        stage(branch, flat[half], Path(path).resolve().parent).commit()
    return flat


def _named(text: str, path: str | os.PathLike[str], flat: dict[str, Path]) -> str:
    """`text` naming the file the user gave where it names a branch's temporary one."""
    for half, branch_path in flat.items():
        text = text.replace(str(branch_path), f"{path} ({half} request's branch)")
    return text
