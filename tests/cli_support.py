"""Running the command line in tests (in this process through `cli.main`, or as a real
`python -m hexfuse_onnx` subprocess), and the checks every refusal shares: one error line on
stderr, no traceback, the cause named, the folders as they should be."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import subprocess
import sys
from pathlib import Path

import onnx

from hexfuse_onnx import cli

REPO = Path(__file__).resolve().parents[1]
ERROR_PREFIX = "hexfuse-onnx: error:"


def run_cli(*args: object) -> subprocess.CompletedProcess[str]:
    """The CLI in this process, `cli.main([...])`, with its exit code and what it prints: a refusal
    is decided in Python, so a subprocess would add only start-up time."""
    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exc:  # argparse: usage errors and --help
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    return subprocess.CompletedProcess(["hexfuse-onnx", *argv], code, out.getvalue(), err.getvalue())


def run_cli_process(
    *args: object, timeout: float = 120, prefix: list[str] | None = None, cwd: Path = REPO
) -> subprocess.CompletedProcess[str]:
    """The real `python -m hexfuse_onnx` in a subprocess from the repo root, or `cwd` (`prefix`: a
    wrapper command such as setpriv)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the package must be found from the repo root (cwd) alone
    return subprocess.run(
        [*(prefix or []), sys.executable, "-m", "hexfuse_onnx", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def listing(folder: Path) -> list[str]:
    """Every entry below `folder`, hidden ones included (staging folders start with '.')."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def snapshot(folder: Path) -> dict[str, str]:
    """sha256 of every regular file below `folder` (the input side of a test)."""
    return {str(p.relative_to(folder)): sha256(p) for p in sorted(folder.rglob("*")) if p.is_file()}


def error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The single error line of a failed `-q` run (asserts there is exactly one, no traceback)."""
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got:\n{proc.stderr}"
    assert lines[0].startswith(ERROR_PREFIX), lines[0]
    return lines[0]


def assert_mentions(line: str, *words: str) -> None:
    for w in words:
        assert w.lower() in line.lower(), f"{w!r} not in error line: {line}"


class Dirs:
    """An input folder and a separate, initially empty, output folder."""

    def __init__(self, tmp_path: Path) -> None:
        self.inp = tmp_path / "in"
        self.out = tmp_path / "out"
        self.inp.mkdir()
        self.out.mkdir()

    def write(self, name: str, data: bytes) -> Path:
        p = self.inp / name
        p.write_bytes(data)
        return p

    def save(self, name: str, model: onnx.ModelProto) -> Path:
        return self.write(name, model.SerializeToString())
