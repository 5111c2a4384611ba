"""--verify plugin's last check (pipeline._check_as_applications_run): the plugin in a session of the
rewritten model as written, no output added, ORT's default graph optimisations, as an application makes
it, against the checked run (the pair outputs added as graph outputs). ORT kept the Casts beside a
float16 pair in the checked session and dropped them in the application's (hama_g2p_decoder_step: 0.87
relative off there, before the plugin adapted). The real host plugin, real ORT."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from test_fp16 import pair_between_grus
from test_lower import needs_host

from hexfuse_onnx import pipeline, runtime, verify
from hexfuse_onnx.lowering import attach_programs
from hexfuse_onnx.rewrite import pair_output_tensors

RNG = np.random.default_rng(19)


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    return onnx.ModelProto.FromString(model.SerializeToString())


def _feeds() -> dict[str, np.ndarray]:
    return {k: RNG.standard_normal((6, 1, 8)).astype(np.float16) for k in ("x", "x2")}


def _checked(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[verify.Case]:
    """The case with the plugin's run of `model` as the check makes it: the pair outputs added."""
    names = [o.name for o in model.graph.output]
    so = runtime.session_options("host", so=verify.exact_qdq_options())
    (run,) = verify.run_cases(model, [verify.Case("", feeds, names, [])], so, pair_output_tensors(model))
    return [verify.Case("", feeds, names, run.outputs)]


def _casts(model: onnx.ModelProto, added: list[str], dump: Path) -> int:
    """The Casts in ORT's optimised graph of `model` with the plugin, `added` made graph outputs."""
    so = runtime.session_options("host", so=verify.exact_qdq_options())
    so.optimized_model_filepath = str(dump)
    verify.session(verify.with_outputs(model, added), so)
    return sum(n.op_type == "Cast" for n in onnx.load(str(dump)).graph.node)


@needs_host
def test_a_float16_pair_ort_casts_around_otherwise_unseen_runs_as_checked(tmp_path: Path) -> None:
    """The two sessions' graphs differ: ORT drops Casts beside the pair only in the application's;
    the plugin gives there the checked run's outputs, bit for bit (bar 0)."""
    m = pair_between_grus()
    added = pair_output_tensors(m)
    assert _casts(m, [], tmp_path / "plain.onnx") < _casts(m, added, tmp_path / "added.onnx")
    pipeline._check_as_applications_run(m, _checked(m, _feeds()), 0.0, {})


@needs_host
def test_an_application_s_run_off_the_checked_one_is_refused_in_one_line() -> None:
    """A model whose plugin run as an application's is off the checked run (checked: the pair's
    Sigmoid; run: a Tanh there) is refused, naming the graph output and no pair."""
    right = pair_between_grus()
    wrong = _copy(right)
    next(n for f in wrong.functions for n in f.node if n.op_type == "Sigmoid").op_type = "Tanh"
    wrong, failed = attach_programs(wrong)
    assert not failed
    with pytest.raises(pipeline.PluginMismatch) as caught:
        pipeline._check_as_applications_run(wrong, _checked(right, _feeds()), pipeline.FLOAT16_RTOL, {})
    assert re.fullmatch(
        r"with the FusedHexPair plugin: in a session without the pair outputs as graph outputs: output 'y3' "
        r"differs from the run with them: relative error [0-9.e+-]+ > 0\.00390625",
        caught.value.message,
    ), caught.value.message
    assert caught.value.off == {} and not caught.value.grown
