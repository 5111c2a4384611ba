"""Where the run-time choices are remembered (hexfuse_onnx/mode_cache.py): when later sessions stop
choosing, entries of older forms, and the file written atomically. Sessions reading and writing it are
tested in test_mode_choice.py."""

from __future__ import annotations

import json

import pytest

from hexfuse_onnx import mode_cache


@pytest.mark.parametrize(
    ("chosen", "kept"),
    [
        ([], None),
        (["ort-seq"], None),
        (["ort-seq", "ort-seq"], "ort-seq"),
        (["ort-seq-2t", "ort-seq"], None),
        (["ort-seq", "ort-seq-2t", "ort-default"], None),
        (["ort-seq", "ort-seq-2t", "ort-seq", "ort-seq-2t"], "ort-seq-2t"),
        (["ort-default", "ort-seq", "ort-par", "ort-default"], "ort-default"),
    ],
)
def test_a_choice_is_kept_for_later_sessions_once_confirmed(chosen, kept):
    assert mode_cache.settled(chosen) == kept


@pytest.mark.parametrize(("chosen", "agree"), [([], 0), (["ort-seq"], 1), (["ort-par", "ort-par", "ort-default"], 1)])
def test_the_log_counts_the_latest_choices_that_agree(chosen, agree):
    """A settled ort-par that gave way logged "3 of 2 choices in a row agree"."""
    assert mode_cache.agreeing(chosen) == agree


def test_an_entry_from_before_histories_is_one_choice_to_confirm():
    assert mode_cache.history({"mode": "ort-seq", "date": "2026-11-30"}) == ["ort-seq"]
    assert mode_cache.history({"mode": "ort-seq", "history": ["nonsense", "ort-seq-2t"]}) == ["ort-seq-2t"]


def test_the_cache_is_written_atomically(tmp_path, monkeypatch):
    cache = tmp_path / "cache" / "ort_modes.json"
    monkeypatch.setenv(mode_cache.ENV_CACHE, str(cache))
    log: list[str] = []
    mode_cache.remember("a", {"mode": "ort-seq"}, log.append)
    mode_cache.remember("b", {"mode": "ort-par"}, log.append)
    written = cache.read_text()
    assert json.loads(written) == {"a": {"mode": "ort-seq"}, "b": {"mode": "ort-par"}}
    with pytest.raises(TypeError):  # fails while writing: the cache in place stays whole
        mode_cache.remember("c", {"mode": object()}, log.append)
    assert cache.read_text() == written and [p.name for p in cache.parent.iterdir()] == [cache.name]
    assert log == []
