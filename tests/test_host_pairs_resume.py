"""benchmarks/host_pairs.py --defaults --resume: a run over every model takes about 4 hours on the 2-vCPU VMs
(session 30), more than one sitting; its --json is written after every model, and a resumed run takes the
models that file timed under the same settings and times the rest."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import host_pairs  # noqa: E402


def _args(**over: object) -> argparse.Namespace:
    base = {"target": "hexagon-v73", "seed": 0, "tol": 1e-4, "defaults_rounds": 30, "tune_runs": 10}
    base |= {"tune_rounds": 3, "budget": 120.0, "models": ["two_branch", "inception"], "json": None}
    base |= {"resolve_rounds": 0, "resolve_budget": 600.0}
    return argparse.Namespace(**(base | over))


def _written(path: Path, args: argparse.Namespace, defaults: list[dict]) -> Path:
    host_pairs.write_json(path, {"settings": host_pairs.settings(args), "defaults": defaults})
    return path


def test_a_resumed_run_takes_what_the_same_settings_timed_and_times_a_failed_model_again(tmp_path: Path) -> None:
    timed, failed = {"model": "two_branch", "met": True}, {"model": "inception", "failed": "RuntimeError: x"}
    path = _written(tmp_path / "run.json", _args(), [timed, failed])
    assert host_pairs.resumable(path, host_pairs.settings(_args())) == {"two_branch": timed}
    assert not list(tmp_path.glob("*.tmp"))  # written atomically, nothing left beside it


def test_a_run_with_other_settings_is_not_resumed(tmp_path: Path) -> None:
    path = _written(tmp_path / "run.json", _args(budget=60.0), [{"model": "two_branch"}])
    with pytest.raises(ValueError, match=r"run.json: written with other settings \(budget 60.0 there, 120.0 here\)"):
        host_pairs.resumable(path, host_pairs.settings(_args()))
    (tmp_path / "log.json").write_text("host_pairs: ...")
    with pytest.raises(ValueError, match="not a host_pairs --defaults JSON to resume"):
        host_pairs.resumable(tmp_path / "log.json", host_pairs.settings(_args()))


def test_models_timed_earlier_are_not_timed_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    earlier = {"two_branch": {"model": "two_branch", "met": True}, "inception": {"model": "inception", "met": False}}
    saved: list[list[dict]] = []
    out = host_pairs.run_defaults(_args(json=tmp_path / "run.json"), tmp_path, earlier, saved.append)
    assert out == [earlier["two_branch"], earlier["inception"]] and not saved
    assert capsys.readouterr().out.count("timed earlier in this run") == 2


def test_the_json_says_whether_the_run_ended(tmp_path: Path) -> None:
    args = _args(runs=50, sweep_runs=25, rounds=5, warmup=3)
    partial = host_pairs.json_doc(args, {}, [], [{"model": "two_branch"}], 12.0, None)
    ended = host_pairs.json_doc(args, {}, [], [{"model": "two_branch"}], 12.0, 0.01)
    assert not partial["complete"] and ended["complete"]
    path = tmp_path / "run.json"
    host_pairs.write_json(path, partial)
    assert json.loads(path.read_text())["settings"] == host_pairs.settings(args)


def test_a_model_that_fails_is_recorded_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The control path alone: bench_defaults (a timing of minutes) replaced by one that fails on the first model."""

    def bench(args: argparse.Namespace, name: str, work: Path) -> dict:
        if name == "two_branch":
            raise RuntimeError("first line\nsecond line")
        return {"model": name, "skipped": "no pair"}

    monkeypatch.setattr(host_pairs, "bench_defaults", bench)
    earlier = {"inception": {"model": "inception", "met": True, "commit": "0000000"}}
    saved: list[list[dict]] = []
    out = host_pairs.run_defaults(
        _args(models=["two_branch", "inception", "mlp_chain"]), tmp_path, earlier, saved.append
    )
    assert [r["model"] for r in out] == ["two_branch", "inception", "mlp_chain"] and len(saved) == 2
    assert out[0]["failed"] == "RuntimeError: first line" and out[2]["skipped"] == "no pair"
    assert out[0]["commit"] == out[2]["commit"] == host_pairs.code_commit() != "unknown"
    printed = capsys.readouterr().out
    assert "FAILED (traceback above): two_branch" in printed
    assert f"several checkouts (--resume): 0000000 (1), {host_pairs.code_commit()} (2)" in printed
