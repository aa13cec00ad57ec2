"""Turn records go to disk from their own thread, in order, owner-only; a torn last line
left by a killed server is closed before the next record; a failing disk is counted and
logged, never raised into a call."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.unit.test_latency import full_turn
from voice_agent.pipeline.records import RecordWriter
from voice_agent.turn_record import read_jsonl


def test_records_are_written_in_order_from_the_writers_thread(tmp_path: Path) -> None:
    path = tmp_path / "records" / "turns.jsonl"
    writer = RecordWriter(path)
    records = [replace(full_turn(), turn=k) for k in range(1, 201)]
    for record in records:
        writer.write(record)
    assert writer.close()
    assert read_jsonl(path) == records
    assert writer.stats.written == 200 and writer.stats.failed == writer.stats.dropped == 0
    assert path.stat().st_mode & 0o777 == 0o600  # records may hold what callers said
    writer.write(records[0])  # after close: dropped, not raised
    assert writer.stats.dropped == 1 and len(read_jsonl(path)) == 200


def test_a_torn_last_line_is_closed_before_the_next_record(tmp_path: Path) -> None:
    path = tmp_path / "turns.jsonl"
    whole = full_turn().to_json_line()
    path.write_text(whole + "\n" + whole[:40])  # the last server was killed mid-line
    writer = RecordWriter(path)
    writer.write(replace(full_turn(), turn=2))
    assert writer.close()
    assert [r.turn for r in read_jsonl(path)] == [full_turn().turn, 2]


def test_a_path_that_cannot_be_a_file_is_counted_and_later_records_still_go(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A records path that is a folder (an operator's slip) fails each write with a log
    line; once it is fixed the next records are written."""
    path = tmp_path / "turns.jsonl"
    path.mkdir()
    writer = RecordWriter(path)
    with caplog.at_level("ERROR"):
        writer.write(full_turn())
        assert writer.close()
    assert writer.stats.failed == 1 and "cannot write 1 turn record" in caplog.text
    path.rmdir()
    again = RecordWriter(path)
    again.write(full_turn())
    assert again.close() and read_jsonl(path) == [full_turn()]


def test_records_rotate_before_the_file_passes_its_size_and_keep_the_newest(
    tmp_path: Path,
) -> None:
    path = tmp_path / "turns.jsonl"
    line = len(full_turn().to_json_line()) + 1
    writer = RecordWriter(path, max_bytes=3 * line, keep=2)
    for k in range(1, 12):  # one at a time: each record is its own batch
        writer.write(replace(full_turn(), turn=k))
        for _ in range(200):
            if writer.stats.written + writer.stats.failed == k:
                break
            time.sleep(0.005)
    assert writer.close()
    current = [r.turn for r in read_jsonl(path)]
    newer = [r.turn for r in read_jsonl(path.with_name("turns.jsonl.1"))]
    older = [r.turn for r in read_jsonl(path.with_name("turns.jsonl.2"))]
    assert (older, newer, current) == ([4, 5, 6], [7, 8, 9], [10, 11])
    assert not path.with_name("turns.jsonl.3").exists()  # the oldest were dropped
    assert writer.stats.rotations == 3 and all(p.stat().st_mode & 0o777 == 0o600
                                              for p in tmp_path.iterdir())  # fmt: skip


def test_a_full_disk_is_counted_and_never_raised() -> None:
    """/dev/full fails every write with ENOSPC, as a full disk does."""
    writer = RecordWriter(Path("/dev/full"))
    writer.write(full_turn())
    writer.write(full_turn())
    assert writer.close()
    assert writer.stats.failed == 2 and writer.stats.written == 0


def test_bad_rotation_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        RecordWriter(Path("x"), max_bytes=-1)
