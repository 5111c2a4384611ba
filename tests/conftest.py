from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from cli_support import Dirs

import models


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
