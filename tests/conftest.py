from __future__ import annotations

import fcntl
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import onnx
import pytest
from cli_support import REPO, Dirs

import models

# The zoo's graphs are miniatures: their pairs save microseconds, less than one Hexagon kernel call
# (100 us), so at the targets' own call overhead no zoo pair is chosen. The suite tests the pass's
# mechanics on them with the call not counted (CLI subprocesses inherit this);
# tests/test_call_overhead.py runs with the targets' own figures.
os.environ["HEXFUSE_CALL_OVERHEAD_US"] = "0"


@pytest.fixture(scope="session", autouse=True)
def ort_mode_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The run-time ORT mode choices (hexfuse_onnx/mode_choice.py) of the tests' sessions go to a
    cache of their own, not the user's."""
    path = tmp_path_factory.mktemp("ort_mode_cache") / "ort_modes.json"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HEXFUSE_ORT_MODE_CACHE", str(path))
        patch.delenv("HEXFUSE_ORT_MODE", raising=False)
        yield path


@pytest.fixture(scope="session")
def zoo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every zoo model written once per test session."""
    folder = tmp_path_factory.mktemp("zoo")
    for name in models.BUILDERS:
        onnx.save(models.build(name), folder / f"{name}.onnx")
    return folder


@pytest.fixture(scope="session")
def hexagon_images() -> Path:
    """build/ with the Hexagon images of `emulate`, built by dsp/scripts/build_hexagon.sh when one is
    missing. Parallel test workers (pytest-xdist) take turns on a lock: one builds, the others find
    the images built."""
    from hexfuse_onnx.tools import emulate

    build = REPO / "build"

    def built() -> bool:
        return all((build / folder / emulate.IMAGE).is_file() for folder in emulate.ARCHS.values())

    if not built():
        build.mkdir(exist_ok=True)
        with open(build / ".hexagon_images.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not built():
                script = REPO / "dsp/scripts/build_hexagon.sh"
                subprocess.run(["bash", str(script), str(build)], check=True, timeout=900)
    return build


@pytest.fixture
def dirs(tmp_path: Path) -> Dirs:
    """An input folder and an empty output folder for a CLI test."""
    return Dirs(tmp_path)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "real_all: a real model outside the CI subset (tests/test_real_models.py); runs with HEXFUSE_REAL_ALL=1",
    )
