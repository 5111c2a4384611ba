"""modelio.write_text: the one atomic writer of reports and caches (cli's --json, mode_choice's cache,
host_pairs' --json)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexfuse_onnx import modelio


def test_a_text_is_replaced_whole_and_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    modelio.write_text(path, "first")
    modelio.write_text(path, "second")
    assert path.read_text() == "second" and [p.name for p in tmp_path.iterdir()] == ["report.json"]
    folder = tmp_path / "a_folder.json"
    (folder / "inside").mkdir(parents=True)
    with pytest.raises(OSError):  # a non-empty folder cannot be replaced by a file
        modelio.write_text(folder, "third")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_folder.json", "report.json"]
    assert [p.name for p in folder.iterdir()] == ["inside"]
