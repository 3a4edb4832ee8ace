"""Atomic writes leave either the old file or the complete new one, with normal permissions."""

from __future__ import annotations

import stat

import pytest

from drafts_ops.core.atomic import atomic_path, write_json_atomic, write_text_atomic


def test_failed_write_keeps_the_old_file(tmp_path):
    target = tmp_path / "out.txt"
    write_text_atomic(target, "old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("crash mid-write")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_written_file_is_readable_by_others(tmp_path):
    path = write_json_atomic(tmp_path / "sub" / "x.json", {"a": 1})
    assert path.read_text().strip().startswith("{")
    assert path.stat().st_mode & stat.S_IROTH
