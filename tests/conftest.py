from __future__ import annotations

import os
from pathlib import Path

import onnx
import pytest
from cli_support import Dirs

import models

# The zoo's graphs are miniatures: their pairs save microseconds, less than one Hexagon kernel call
# (100 us), so at the targets' own call overhead no zoo pair is chosen. The suite tests the pass's
# mechanics on them with the call not counted (CLI subprocesses inherit this);
# tests/test_call_overhead.py runs with the targets' own figures.
os.environ["HEXFUSE_CALL_OVERHEAD_US"] = "0"


@pytest.fixture(scope="session")
def zoo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every zoo model written once per test session."""
    folder = tmp_path_factory.mktemp("zoo")
    for name in models.BUILDERS:
        onnx.save(models.build(name), folder / f"{name}.onnx")
    return folder


@pytest.fixture
def dirs(tmp_path: Path) -> Dirs:
    """An input folder and an empty output folder for a CLI test."""
    return Dirs(tmp_path)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "real_all: a real model outside the CI subset (tests/test_real_models.py); runs with HEXFUSE_REAL_ALL=1",
    )
