"""Write models atomically: stage every file in a temporary folder beside the target, then
move them into place only once the caller has verified the staged copy. Reports and caches are
written atomically too (`write_text`).

A model with external data is written with its data in `<name>.data` next to it; the data
file is moved first, so a reader never sees a model whose data is missing.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import onnx

from .errors import WriteError

# Above this the protobuf cannot be serialised in one piece (2 GiB), so weights go outside.
EXTERNAL_DATA_THRESHOLD = 1_800_000_000


def check_output_folder(path: str | os.PathLike[str] | None) -> None:
    """Refuse, in one WriteError line, an output (a model, a JSON report, a trace; None: not asked for) that is a
    directory or a device, or whose folder is missing, is a file, or cannot be written: before any work (the writer
    checks again at the end)."""
    if path is None:
        return
    dest = Path(path).resolve()
    if dest.is_dir():
        raise WriteError(f"{path}: is a directory; give a file name for the output")
    if str(path).endswith(("/", os.sep)):  # resolve() drops the slash: `-o new/` wrote a file named `new`
        raise WriteError(f"{path}: names a folder (it ends in '/'); give a file name for the output")
    if dest.exists() and not dest.is_file():
        raise WriteError(f"{path}: exists and is not a regular file (a device, FIFO or socket); not replacing it")
    folder = dest.parent
    if folder.exists() and not folder.is_dir():
        raise WriteError(f"{path}: output folder {folder} is a file, not a folder")
    if not folder.is_dir():
        raise WriteError(f"{path}: output folder {folder} does not exist")
    try:  # os.access says yes to root even on /proc: try the staging the writer will do
        with tempfile.TemporaryDirectory(prefix=f".{dest.name}.", dir=folder):
            pass
    except OSError as exc:
        why = f"creating a file there failed: {exc.strerror}"
        raise WriteError(f"{path}: output folder {folder} is not writable ({why})") from None


def write_text(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file beside it, renamed over it: a reader (or a run
    stopped while writing) sees the old file or the new one, never a part; the temporary file is
    removed when writing fails. OSError propagates."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # per process: two writers never share one
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@dataclass
class StagedModel:
    folder: Path  # temporary folder beside the destination
    model_path: Path  # staged model file
    files: list[Path]  # staged files, data first
    destination: Path

    def commit(self) -> None:
        try:
            for f in self.files:
                os.replace(f, self.destination.parent / f.name)
        except OSError as exc:
            raise WriteError(f"{self.destination}: cannot move the output into place: {exc.strerror}") from None
        finally:
            self.discard()

    def set_metadata(self, key: str, value: str) -> None:
        """Set one metadata entry of the staged model (what was verified, once it was), its graph and
        external data untouched."""
        model = onnx.load(str(self.model_path), load_external_data=False)
        kept = [p for p in model.metadata_props if p.key != key]
        del model.metadata_props[:]
        model.metadata_props.extend([*kept, onnx.StringStringEntryProto(key=key, value=value)])
        try:
            onnx.save_model(model, str(self.model_path))
        except (OSError, ValueError) as exc:
            raise WriteError(f"{self.destination}: cannot write the output: {exc}") from None

    def discard(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def stage(
    model: onnx.ModelProto, destination: str | os.PathLike[str], source_dir: Path | None, external: bool | None = None
) -> StagedModel:
    """Write the model into a temporary folder next to `destination`.

    `source_dir` is where external data of `model` lives (the input model's folder); the
    data is read from there, never changed. With external None, external data is used when
    the model has some or is too large for one protobuf.
    """
    dest = Path(destination).resolve()
    check_output_folder(dest)
    parent = dest.parent
    try:
        folder = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=parent))
    except OSError as exc:
        raise WriteError(f"{parent}: output directory is not writable ({exc.strerror})") from None
    staged_model = folder / dest.name
    try:
        has_external = any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)
        if external is None:
            external = has_external or _weight_bytes(model) > EXTERNAL_DATA_THRESHOLD
        files: list[Path] = []
        if has_external:
            if source_dir is None:
                raise WriteError(f"{dest}: model refers to external data but its source folder is unknown")
            model, files = _copy_external_data(model, source_dir, folder, dest.name)
            onnx.save_model(model, str(staged_model))
        elif external:
            data_name = dest.name + ".data"
            onnx.save_model(
                model,
                str(staged_model),
                save_as_external_data=True,
                all_tensors_to_one_file=True,
                location=data_name,
                size_threshold=1024,
            )
            if (folder / data_name).exists():
                files.append(folder / data_name)
        else:
            onnx.save_model(model, str(staged_model))
        files.append(staged_model)
    except WriteError:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    except (OSError, ValueError) as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise WriteError(f"{dest}: cannot write the output: {exc}") from None
    return StagedModel(folder, staged_model, files, dest)


def _weight_bytes(model: onnx.ModelProto) -> int:
    return sum(len(t.raw_data) for t in model.graph.initializer)


def _copy_external_data(
    model: onnx.ModelProto, source_dir: Path, folder: Path, name: str
) -> tuple[onnx.ModelProto, list[Path]]:
    """Copy each external data file byte for byte next to the staged model and point the tensors
    at the copies. The rewrite never changes initializers, so offsets stay valid, and the weights
    are streamed file to file: a model over 2 GB is never held in one protobuf."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)  # external tensors hold no bytes: this copy is small
    renamed: dict[str, str] = {}
    files: list[Path] = []
    for t in copy.graph.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        for entry in t.external_data:
            if entry.key != "location":
                continue
            if entry.value not in renamed:
                new = f"{name}.data" if not renamed else f"{name}.{len(renamed)}.data"
                shutil.copyfile(source_dir / entry.value, folder / new)
                renamed[entry.value] = new
                files.append(folder / new)
            entry.value = renamed[entry.value]
    return copy, files
