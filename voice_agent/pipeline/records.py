"""Turn records to disk off the event loop: `RecordWriter` appends each record as one JSON
line from its own thread, so a slow or full disk delays no call.

The file is opened once per record batch with RECORDS_MODE (owner only: records may hold
what callers said) and appended to. A file whose last line was cut short (the server was
killed mid-write) first gets the missing newline, so the next record starts on its own
line and `read_jsonl` skips only the torn one. A write that fails (disk full, a removed
folder) is logged and counted, and the records after it are still tried: nothing raises
into a call. With `max_bytes`, a file that would grow past it is rotated first
(`turns.jsonl` → `turns.jsonl.1` → … → `.{keep}`, the oldest dropped), so a long-running
server's records stay bounded on disk.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from voice_agent.turn_record import RECORDS_MODE, TurnRecord

log = logging.getLogger(__name__)

MAX_WAITING = 10_000
"""Records that may wait for the disk; beyond it new ones are dropped (and counted)."""
CLOSE_TIMEOUT_S = 5.0


@dataclass(slots=True)
class RecordStats:
    written: int = 0
    failed: int = 0
    """Records whose write raised (logged with the error)."""
    dropped: int = 0
    """Records refused because MAX_WAITING were already waiting, or after close."""
    rotations: int = 0


class RecordWriter:
    """Appends TurnRecords to `path` in the order given, from one thread."""

    def __init__(self, path: Path, max_waiting: int = MAX_WAITING, *, max_bytes: int = 0,
                 keep: int = 5) -> None:  # fmt: skip
        """`max_bytes`: rotate before the file would pass it (0: never); `keep`: rotated
        files kept."""
        if max_bytes < 0 or keep < 1:
            raise ValueError(f"need max_bytes >= 0 and keep >= 1, got {max_bytes}, {keep}")
        self.path = path
        self.max_bytes, self.keep = max_bytes, keep
        self.stats = RecordStats()
        self._queue: queue.Queue[TurnRecord | None] = queue.Queue(max_waiting)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="turn-records", daemon=True)
        self._thread.start()

    def write(self, record: TurnRecord) -> None:
        """Queue `record`; returns at once, never raises."""
        if self._closed:
            self.stats.dropped += 1
            log.warning("turn record of %s #%d after close: dropped", record.call_id, record.turn)
            return
        try:
            self._queue.put_nowait(record)
        except queue.Full:
            self.stats.dropped += 1
            log.error("turn records: %d waiting for %s; dropped one", self._queue.maxsize,
                      self.path)  # fmt: skip

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> bool:
        """Write what is waiting (up to `timeout_s`) and stop; True when all went out."""
        if not self._closed:
            self._closed = True
            self._queue.put(None)
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while True:
            record = self._queue.get()
            if record is None:
                return
            batch = [record]
            while len(batch) < self._queue.maxsize:  # whatever else is waiting, one open
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._append(batch)
                    return
                batch.append(more)
            self._append(batch)

    def _append(self, batch: list[TurnRecord]) -> None:
        text = "".join(r.to_json_line() + "\n" for r in batch)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self._full_after(len(text)):
                self._rotate()
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, RECORDS_MODE)
            with os.fdopen(fd, "r+b") as out:
                if _ends_mid_line(out):  # a torn line, or a write the disk cut short
                    text = "\n" + text
                out.write(text.encode("utf-8"))
        except OSError as exc:
            self.stats.failed += len(batch)
            log.error("cannot write %d turn record(s) to %s: %s", len(batch), self.path, exc)
            return
        self.stats.written += len(batch)

    def _full_after(self, adding: int) -> bool:
        if not self.max_bytes:
            return False
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return False
        return size > 0 and size + adding > self.max_bytes

    def _rotate(self) -> None:
        for k in range(self.keep - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{k}")
            if older.exists():
                older.replace(self.path.with_name(f"{self.path.name}.{k + 1}"))
        self.path.replace(self.path.with_name(f"{self.path.name}.1"))
        self.stats.rotations += 1
        log.info("turn records: %s rotated (%d kept)", self.path, self.keep)


def _ends_mid_line(out: BinaryIO) -> bool:
    size = out.seek(0, os.SEEK_END)
    if size == 0:
        return False
    out.seek(size - 1)
    return out.read(1) != b"\n"
