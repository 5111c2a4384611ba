"""Builds the native libraries (dsp/ kernel + custom_ops/ plugin) into hexfuse_onnx/_lib/ before
the Python files are collected, so `pip install .` and `pip wheel .` ship them. Metadata lives in
pyproject.toml. HEXFUSE_SKIP_NATIVE=1 skips the native build (pure-Python install)."""

import os
import subprocess
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildPyWithNative(build_py):
    def run(self) -> None:
        if os.environ.get("HEXFUSE_SKIP_NATIVE", "0") in ("", "0"):
            import scipy_openblas32

            env = dict(os.environ)
            # this interpreter's BLAS (pip's build environment); build.sh's build folder
            env["HEXFUSE_BLAS_DIR"] = str(Path(scipy_openblas32.get_lib_dir()).parent)
            subprocess.check_call(["bash", str(ROOT / "custom_ops" / "build.sh")], cwd=ROOT, env=env)
        super().run()


class BinaryDistribution(Distribution):
    """The wheel carries native libraries: tag it for this platform, not py3-none-any."""

    def has_ext_modules(self) -> bool:
        return True


setup(cmdclass={"build_py": BuildPyWithNative}, distclass=BinaryDistribution)
