"""Random ops without a seed (a VITS voice's noise: Piper's two RandomNormalLike): verified with
seeds given, written as they were.

ONNX Runtime seeds an unseeded op with a number fixed once per process (`ort.set_seed` sets it) plus
the node's index in the graph, which a rewrite changes: the rewrite draws other numbers than the
original in the same process, so its outputs can never be compared with the original's (a Piper
voice: audio 0.6-0.94 relative apart while every pair's outputs agreed exactly). A seeded op draws
from its seed alone; like every random op it draws on from run to run of a session, and a new session
starts over (the pass's checks run the original and the rewrite on the same cases in the same order).
No pair holds a random op (none is in the kernel's op set, so a pair with one does not lower), so a
rewrite made and verified on a copy with seeds given computes, once they are taken away again, what
the original computes on the same draws.

    run_seeded(path, out, count, progress, work, finish)   # work(copy, copy_out, progress=...) on a seeded
                                                           # copy; finish commits it without the seeds
"""

from __future__ import annotations

import contextlib
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import onnx

from .errors import HexfuseError, ModelError, WriteError
from .graph import external_data_files
from .modelio import StagedModel, stage
from .nested import all_nodes

RANDOM_OPS = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
SEED = "seed"
R = TypeVar("R")


def is_random(node: onnx.NodeProto) -> bool:
    return node.op_type in RANDOM_OPS and node.domain in ("", "ai.onnx")


def lacks_seed(node: onnx.NodeProto) -> bool:
    return is_random(node) and not any(a.name == SEED for a in node.attribute)


def every_node(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """The main graph's nodes, its subgraphs' and its functions'."""
    return [*all_nodes(model.graph), *(n for f in model.functions for n in f.node)]


def unseeded(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in every_node(model) if lacks_seed(n)]


def give_seeds(model: onnx.ModelProto, prefix: str = "") -> list[str]:
    """Give every unseeded random op a seed of its own, in place, made of its first output's name (the
    name it keeps in a rewrite: an original and its rewrite seeded apart draw alike), in the main graph
    with `prefix` before it (a co-located stream's source seeded as the merge names it); those names."""
    functions = [n for f in model.functions for n in f.node]
    named = []
    for nodes, before in ((all_nodes(model.graph), prefix), (functions, "")):
        for node in [n for n in nodes if lacks_seed(n)]:
            seed = float(zlib.crc32((before + node.output[0]).encode()) % 2**24)  # a float32 holds it exactly
            node.attribute.append(onnx.helper.make_attribute(SEED, seed))
            named.append(node.output[0])
    return named


def seeded_file(path: Path, to: Path, prefix: str = "") -> Path:
    """A copy of the model at `path` with seeds given (`give_seeds`), written to `to` (its external data
    read from `path`'s folder): what a benchmark times where outputs are compared across sessions."""
    model = onnx.load(str(path), load_external_data=False)
    give_seeds(model, prefix)
    stage(model, to, path.resolve().parent).commit()
    return to


def take_seeds(model: onnx.ModelProto, outputs: list[str]) -> int:
    """Remove the seed of the random ops whose first output is in `outputs`, in place; how many."""
    wanted, taken = set(outputs), 0
    for node in every_node(model):
        if is_random(node) and node.output and node.output[0] in wanted:
            kept = [a for a in node.attribute if a.name != SEED]
            taken += len(node.attribute) - len(kept)
            del node.attribute[:]
            node.attribute.extend(kept)
    return taken


@dataclass
class SeededCopy:
    """The input with seeds given, staged in a temporary folder beside the output, and where the work
    on it writes its own output (`output`)."""

    source: Path  # the user's model
    staged: StagedModel
    seeded: list[str]  # the first outputs of the random ops given a seed

    @property
    def model_path(self) -> Path:
        return self.staged.model_path

    @property
    def output(self) -> Path:
        return self.staged.folder / f"out.{self.source.name}"

    def said(self, text: str, out: Path) -> str:
        """A message about the copy, naming the user's files instead."""
        return text.replace(str(self.output), str(out)).replace(str(self.model_path), str(self.source))

    def commit(self, out: Path) -> None:
        """Write `output` without the seeds given to `out`, atomically; every random op must be found."""
        model = onnx.load(str(self.output))  # its external data too, from beside it
        if take_seeds(model, self.seeded) != len(self.seeded):  # a random op renamed or duplicated: not proven
            raise ModelError(f"{self.source}: the rewrite does not keep its random ops as they were (nothing written)")
        stage(model, out, self.staged.folder).commit()


def unseeded_count(path: str | os.PathLike[str]) -> int:
    """How many random ops of the model at `path` have no seed; 0 when it does not load (the pass then
    names the problem)."""
    try:
        return len(unseeded(onnx.load(str(path), load_external_data=False)))
    except Exception:  # noqa: BLE001 - a bad file is reported by graph.load, in its one line
        return 0


def run_seeded(
    path: str | os.PathLike[str],
    out: Path,
    count: int,
    progress: Callable[[str], None],
    work: Callable[..., R],
    finish: Callable[[R, SeededCopy], None],
) -> R:
    """For a model with `count` unseeded random ops: `work(copy, copy_out, progress=...)` (rewrite or tune with
    the caller's options) on a copy with seeds given, writing beside it, its messages naming the user's files;
    then `finish` (which commits it)."""
    with seeded_copy(path, out) as copy:
        progress(f"{count} random op(s) without a seed: verified with seeds given, written without them")
        try:
            result = work(copy.model_path, copy.output, progress=lambda m: progress(copy.said(m, out)))
        except HexfuseError as exc:
            exc.message = copy.said(exc.message, out)
            exc.args = (exc.message,)
            raise
        finish(result, copy)
    return result


@contextlib.contextmanager
def seeded_copy(path: str | os.PathLike[str], out: Path) -> Iterator[SeededCopy]:
    """A copy of the model at `path` with a seed for each unseeded random op, staged beside `out`
    (its external data read from `path`'s folder, written beside the copy); removed on leaving."""
    source = Path(path)
    model = onnx.load(str(source), load_external_data=False)
    for target_file in (out, out.with_name(out.name + ".data")):
        if target_file.resolve() in external_data_files(model, source) or target_file.resolve() == source.resolve():
            raise WriteError(f"{target_file}: would overwrite the input model or its external data; choose another -o")
    seeded = give_seeds(model)
    staged = stage(model, out.with_name(source.name), source.parent)  # named as the user's, in its own folder
    try:
        yield SeededCopy(source, staged, seeded)
    finally:
        staged.discard()
