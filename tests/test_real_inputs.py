"""models.real.realistic_inputs: the seeded inputs benchmarks and tests feed a zoo model, a real model's
integer inputs drawn from its entry's int_ranges (a sample rate, token ids) where random ones are 0 or 1."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from real_support import cached_or_skip

from hexfuse_onnx import verify
from models import real

RANGED = [name for name, m in real.MODELS.items() if m.int_ranges]


def _identities(names: list[str], shape: list[int]) -> ort.InferenceSession:
    """A session of a model passing int64 inputs of these names through Identity nodes."""
    args = [helper.make_tensor_value_info(n, TensorProto.INT64, shape) for n in names]
    outs = [helper.make_tensor_value_info(f"{n}_out", TensorProto.INT64, shape) for n in names]
    nodes = [helper.make_node("Identity", [n], [f"{n}_out"]) for n in names]
    g = helper.make_graph(nodes, "identities", args, outs)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    return verify.session(model.SerializeToString())


@pytest.mark.parametrize("name", RANGED)
def test_integer_inputs_are_drawn_from_the_entry_ranges(name: str) -> None:
    """Every ranged input in [low, high), and spread over it where random 0 or 1 would not be (a
    vocabulary of 30522 ids, silero_vad's one sample rate 16000)."""
    ranges = real.MODELS[name].int_ranges
    feeds = real.realistic_inputs(_identities(list(ranges), [2, 64]), name, seed=3)
    for arg, (low, high) in ranges.items():
        got = feeds[arg]
        assert low <= got.min() and got.max() < high, f"{name} {arg}: {got.min()}..{got.max()} not in [{low}, {high})"
        assert len(np.unique(got)) >= min(high - low, 8), f"{name} {arg}: {np.unique(got)[:10]}"


def test_a_builder_gets_the_seeded_random_inputs() -> None:
    session = _identities(["input_ids"], [1, 16])
    got = real.realistic_inputs(session, "two_branch", seed=5)["input_ids"]
    assert np.array_equal(got, verify.random_inputs(session, seed=5)["input_ids"])
    assert set(np.unique(got)) <= {0, 1}


@pytest.mark.slow  # loads each cached model's graph
@pytest.mark.parametrize("name", RANGED)
def test_every_ranged_name_is_an_input_of_the_model(name: str) -> None:
    """A misspelt int_ranges name would leave that input random 0 or 1 unnoticed."""
    graph = onnx.load(str(cached_or_skip(name)), load_external_data=False).graph
    inputs = {v.name for v in graph.input} - {t.name for t in graph.initializer}
    assert set(real.MODELS[name].int_ranges) <= inputs, sorted(inputs)
