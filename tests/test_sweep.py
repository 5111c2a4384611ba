"""benchmarks/sweep.py's account for issue 12, on a QDQ model made here (two_branch, QNN's u8u8 recipe):
what the plugin step reads from `rewrite --verify plugin --json` (stock ORT bit for bit, the worst output in
quantization steps, the refusals, the modelled hexagon-v73 time), the same model priced with the HVX rates
from before qemu grounded them, and emulate's packets per pair under qemu-hexagon."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from cli_support import REPO

from hexfuse_onnx.costmodel import HEXAGON_V73
from hexfuse_onnx.tools import emulate
from models import quantized

sys.path.insert(0, str(REPO / "benchmarks"))
import sweep  # noqa: E402

MODEL = "two_branch_qdq_u8u8"


@pytest.fixture(scope="module")
def qdq(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return quantized.generate(MODEL, tmp_path_factory.mktemp("qdq"))


@pytest.fixture(scope="module")
def steps(qdq: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, sweep.Step]]:
    tmp = tmp_path_factory.mktemp("sweep")
    return tmp, {name: sweep.step(name, qdq, tmp, 300) for name in ("plugin", "ungrounded")}


def test_the_ungrounded_target_is_hexagon_v73_but_its_qemu_rates():
    older = sweep.ungrounded()
    sources = [p.source for p in older.params().values()] + [p.source for _, p in older.class_rates]
    assert not [s for s in sources if s.startswith("emulated")]
    assert older.vector_int8_ops_per_context == sweep.DOCUMENT_RATES["vector_int8_ops_per_context"]
    assert sweep.DOCUMENT_RATES["vector_int8_ops_per_context"].value == 256e9  # vrmpy's peak per context, 1 GHz
    grounded = {k: p for k, p in HEXAGON_V73.params().items() if p.source.startswith("emulated")}
    assert grounded, "hexagon-v73 has no qemu-grounded rate left: the ungrounded step compares nothing"
    assert {k: p for k, p in older.params().items() if k not in grounded} == {
        k: p for k, p in HEXAGON_V73.params().items() if k not in grounded
    }


def test_the_plugin_step_reads_what_issue_12_needs(steps):
    tmp, by_name = steps
    plugin = by_name["plugin"]
    doc = json.loads((tmp / "plugin.json").read_text())
    assert plugin.code == 0 and plugin.pairs == len(doc["pairs"]) >= 1
    assert plugin.ort_exact is True  # a QDQ rewrite on stock ORT is the original, bit for bit
    assert plugin.steps is not None and 0 <= plugin.steps <= 1
    assert plugin.refused is not None and sum(plugin.refused.values()) == len(doc["rejected"])
    assert plugin.pairs_us is not None and plugin.modelled_us is not None
    serial, fused = plugin.pairs_us
    assert 0 < fused < serial <= plugin.modelled_us


def test_the_older_rates_price_the_integer_work_faster(steps):
    _, by_name = steps
    plugin, older = by_name["plugin"], by_name["ungrounded"]
    assert older.code == 0 and older.pairs and older.modelled_us is not None and plugin.modelled_us is not None
    assert older.modelled_us < plugin.modelled_us  # document peaks above the packets qemu counts
    rows = [sweep.Row(MODEL, "qdq", "-", {**by_name, "emulate": sweep.Step(0, 1.0, pairs=1, exact=1)})]
    issue = sweep.issue_table(rows)[2]  # under the head and its rule
    assert issue.startswith(f"| {MODEL} | {plugin.pairs} (") and sweep.graph_us(older) in issue


QEMU = os.environ.get("QEMU_HEXAGON") or shutil.which("qemu-hexagon")


@pytest.mark.slow
@pytest.mark.skipif(QEMU is None, reason="qemu-hexagon is not installed (apt-get install qemu-user)")
def test_emulate_packets_per_pair(steps):
    if not (REPO / "build" / emulate.ARCHS["v73"] / emulate.IMAGE).is_file():
        pytest.skip("no v73 image: bash dsp/scripts/build_hexagon.sh")
    tmp, by_name = steps
    s = sweep.step("emulate", Path("-"), tmp, 300)  # emulate runs the plugin step's output
    assert s.code == 0 and s.exact == s.pairs == by_name["plugin"].pairs
    assert s.pair_packets is not None and len(s.pair_packets) == s.pairs
    assert s.serial_packets == sum(p[0] for p in s.pair_packets) > 0
    assert s.fused_packets == sum(p[1] for p in s.pair_packets) > 0
    assert s.busiest_packets is not None and 0 < s.busiest_packets <= s.fused_packets
    assert s.serialized == s.fused_differs == s.int_off == 0
