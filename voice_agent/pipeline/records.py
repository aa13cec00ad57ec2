"""Turn records to disk off the event loop: `RecordWriter` appends each record as one JSON
line from its own thread, so a slow or full disk delays no call.

The file is opened once per record batch with RECORDS_MODE (owner only: records may hold
what callers said) and appended to. A file whose last line was cut short (the server was
killed mid-write) first gets the missing newline, so the next record starts on its own
line and `read_jsonl` skips only the torn one. A write that fails (disk full, a removed
folder) is logged and counted, and the records after it are still tried: nothing raises
into a call.
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


class RecordWriter:
    """Appends TurnRecords to `path` in the order given, from one thread."""

    def __init__(self, path: Path, max_waiting: int = MAX_WAITING) -> None:
        self.path = path
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
        repaired = False
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
                    self._append(batch, repaired)
                    return
                batch.append(more)
            repaired = self._append(batch, repaired) or repaired

    def _append(self, batch: list[TurnRecord], repaired: bool) -> bool:
        """Append `batch`; True when the file now ends with a whole line."""
        text = "".join(r.to_json_line() + "\n" for r in batch)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, RECORDS_MODE)
            with os.fdopen(fd, "r+b") as out:
                if not repaired and _ends_mid_line(out):
                    text = "\n" + text
                out.write(text.encode("utf-8"))
        except OSError as exc:
            self.stats.failed += len(batch)
            log.error("cannot write %d turn record(s) to %s: %s", len(batch), self.path, exc)
            return False
        self.stats.written += len(batch)
        return True


def _ends_mid_line(out: BinaryIO) -> bool:
    size = out.seek(0, os.SEEK_END)
    if size == 0:
        return False
    out.seek(size - 1)
    return out.read(1) != b"\n"
