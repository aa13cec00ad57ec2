"""The hardening faults as figures (`scripts/load_test.py --faults`): each fault made to
happen against real components on loopback, and what came of it.

Every entry has `survived` (the server did what the README's fault table says), and
`calls_failed`, `bookings_lost`, `bookings_doubled`, with a `detail`. The tests behind
the fault table prove each behaviour; this runs them as one report, with the real
pipeline where a booking is at stake:

- `audio_faster_than_real_time`: a /pcm client sends 1 s frames as fast as TCP takes them
  (closed 4429), then a normal call still completes.
- `idle_sockets`: more sockets than call slots connect and never start; a real call still
  completes.
- `replayed_call_token`: a per-call token admits its call once; the replayed start is 4401.
- `pcm_open_beside_signed_twilio`: `serve` on a public address with only the Twilio token
  set refuses to start (exit 2).
- `sqlite_write_lock_held`: another process holds the shop file's write lock; a booking
  fails within the tool's timeout and writes nothing, then succeeds once released.
- `records_disk_full`: the records writer on a full disk (`/dev/full`) counts its failures
  and raises nothing.
- `kill_9_mid_call`: the real pipeline books in a call and is SIGKILLed before the call
  ends; restarted on the same shop and records file, the caller calls back and confirms
  again: the booking is in the shop once and every record is readable.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import date, datetime
from pathlib import Path
from typing import Any

import numpy as np
from websockets.asyncio.client import connect

from scripts.bookings_check import bookings_check
from scripts.calls import SCRIPTS, ServerProcess, place_calls
from scripts.fleet import KILL_WAIT_S, kill_moment
from scripts.services import sqlite_write_lock
from tools.bike_shop.catalogue import SEED_BOOKINGS
from tools.bike_shop.db import ShopContext
from tools.bike_shop.pack import call_tool
from tools.bike_shop.shop import open_shop
from voice_agent.audio import pcm16_to_bytes
from voice_agent.pipeline.records import RecordWriter
from voice_agent.simulator import simulate_call, twilio_start
from voice_agent.speech import PiperSynthesizer
from voice_agent.transports.auth import call_token
from voice_agent.turn_record import Budgets, TurnRecord, read_jsonl

Fault = dict[str, Any]
CLOSE_WAIT_S = 10.0
BOOKING_SCRIPT = SCRIPTS[0]
"""Books a tune-up for Anna tomorrow at ten, says yes to the read-back, says goodbye."""


def fault(survived: bool, detail: str, *, calls_failed: int = 0, bookings_lost: int = 0,
          bookings_doubled: int = 0) -> Fault:  # fmt: skip
    return {"survived": bool(survived), "calls_failed": calls_failed,
            "bookings_lost": bookings_lost, "bookings_doubled": bookings_doubled,
            "detail": detail}  # fmt: skip


def tone(seconds: float, rate: int = 8000) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (np.sin(2 * np.pi * 220 * t) * 8000).astype(np.int16)


async def a_call_completes(url: str) -> bool:
    summary, _ = await simulate_call(url, tone(0.4), 8000, max_tail_s=1.0)
    return summary.close_code == 1000


async def closed_code(ws: Any) -> int | None:
    with contextlib.suppress(Exception):
        async with asyncio.timeout(CLOSE_WAIT_S):
            async for _ in ws:
                pass
    code: int | None = ws.close_code
    return code


async def audio_faster_than_real_time(folder: Path) -> Fault:
    server = ServerProcess(folder, echo=True)
    await server.start()
    try:
        async with connect(server.url + "/pcm") as flood:
            await flood.send(json.dumps({"event": "start", "sample_rate_hz": 16000}))
            second = pcm16_to_bytes(np.zeros(16000, np.int16))
            with contextlib.suppress(Exception):
                for _ in range(30):
                    await flood.send(second)
            code = await closed_code(flood)
        after = await a_call_completes(server.twilio_url)
    finally:
        await server.stop()
    return fault(code == 4429 and after, f"flood closed with {code}; next call ok: {after}",
                 calls_failed=int(not after))  # fmt: skip


async def idle_sockets(folder: Path) -> Fault:
    limits = {"VOICE_AGENT_SERVER__MAX_CALLS": "2", "VOICE_AGENT_SERVER__MAX_WAITING": "6"}
    server = ServerProcess(folder, echo=True, env=limits)
    await server.start()
    try:
        async with contextlib.AsyncExitStack() as stack:
            for _ in range(5):  # more than the call slots, fewer than max_waiting
                await stack.enter_async_context(connect(server.twilio_url))
            await asyncio.sleep(0.3)
            ok = await a_call_completes(server.twilio_url)
    finally:
        await server.stop()
    return fault(ok, f"5 idle sockets, 2 call slots: a real call completed: {ok}",
                 calls_failed=int(not ok))  # fmt: skip


async def replayed_call_token(folder: Path) -> Fault:
    secret = "fault-run-" + uuid.uuid4().hex
    server = ServerProcess(folder, echo=True,
                           env={"VOICE_AGENT_AUTH__TWILIO_CALL_TOKEN_SECRET": secret})  # fmt: skip
    await server.start()
    try:
        call_sid, caller = "CA" + uuid.uuid4().hex, "+15550100"
        token = call_token(secret, call_sid, caller, int(time.time()) + 60)
        sid = "MZ" + uuid.uuid4().hex
        start = json.dumps(twilio_start(sid, call_sid, {"token": token, "caller": caller}))
        stop = {"event": "stop", "sequenceNumber": "2", "streamSid": sid,
                "stop": {"callSid": call_sid}}  # fmt: skip
        codes = []
        for _ in range(2):
            async with connect(server.twilio_url) as ws:
                await ws.send(start)
                await asyncio.sleep(0.5)
                with contextlib.suppress(Exception):  # a refused start is closed already
                    await ws.send(json.dumps(stop))
                codes.append(await closed_code(ws))
    finally:
        await server.stop()
    first_ok, replay_refused = codes[0] == 1000, codes[1] == 4401
    return fault(first_ok and replay_refused, f"first start closed {codes[0]}, replay {codes[1]}")


async def pcm_open_beside_signed_twilio(folder: Path) -> Fault:
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "voice_agent.cli", "serve", "--echo", "--host", "0.0.0.0",
         "--port", "0"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "VOICE_AGENT_AUTH__TWILIO_AUTH_TOKEN": "t"},
    )  # fmt: skip
    refused = done.returncode == 2 and "/pcm has no auth" in done.stderr
    return fault(refused, f"serve exited {done.returncode}: {done.stderr.strip()[:160]}")


async def sqlite_write_lock_held(folder: Path) -> Fault:
    path = folder / "shop.sqlite"
    db = open_shop(path, date.today())
    ctx = ShopContext(db, datetime.now, caller="fault-run")
    args = {"name": "Lock Test", "day": "tomorrow", "time": "11:00", "service": "brake check"}
    with sqlite_write_lock(path):
        started = time.monotonic()
        try:
            call_tool("book_service", args, ctx)
            failed_in_time, waited = False, time.monotonic() - started
        except Exception:
            failed_in_time, waited = True, time.monotonic() - started
    with sqlite3.connect(path) as conn:
        during = conn.execute("SELECT COUNT(*) FROM bookings WHERE name = 'Lock Test'").fetchone()[
            0
        ]
    call_tool("book_service", args, ctx)
    call_tool("book_service", args, ctx)  # a retry
    with sqlite3.connect(path) as conn:
        after = conn.execute("SELECT COUNT(*) FROM bookings WHERE name = 'Lock Test'").fetchone()[0]
    db.close()
    ok = failed_in_time and waited < 2.0 and during == 0 and after == 1
    return fault(ok, f"held: failed after {waited:.2f} s, rows {during}; released: rows {after}",
                 bookings_doubled=max(0, after - 1))  # fmt: skip


def _rows(path: Path, name: str) -> int:
    with sqlite3.connect(path) as conn:
        row = conn.execute("SELECT COUNT(*) FROM bookings WHERE name = ?", (name,)).fetchone()
    return int(row[0])


async def records_disk_full(folder: Path) -> Fault:
    writer = RecordWriter(Path("/dev/full"))
    record = TurnRecord("CAfault", 1, Budgets.default())
    try:
        for _ in range(3):
            writer.write(record)
        closed = await asyncio.to_thread(writer.close)
    except Exception as exc:  # would be a failure of the fault handling
        return fault(False, f"raised {exc!r}")
    failed = writer.stats.failed
    return fault(closed and failed == 3, f"{failed} of 3 writes failed and were counted")


async def kill_9_mid_call(folder: Path) -> Fault:
    voice = PiperSynthesizer()
    env = {"VOICE_AGENT_MODELS__TTS_BACKEND": "espeak"}
    server = ServerProcess(folder, env=env)
    await server.start()
    shop, records = server.shop_db, server.records
    call = asyncio.create_task(place_calls(server.twilio_url, [BOOKING_SCRIPT], voice,
                                           first_gap_s=5.0, gap_s=8.0))  # fmt: skip
    _, waited_for = await kill_moment([server], time.monotonic() + KILL_WAIT_S)
    booked = waited_for == "booking"
    assert server.proc is not None
    server.proc.kill()  # SIGKILL: no drain, no goodbye
    await server.proc.wait()
    first = (await call)[0]
    # Restarted on the same shop and records (ServerProcess.start would clear them).
    same_files = ("--shop-db", str(shop), "--records", str(records))
    again = ServerProcess(folder / "restart", env=env, extra_args=same_files)
    await again.start()
    try:
        retry = (await place_calls(again.twilio_url, [BOOKING_SCRIPT], voice,
                                   first_gap_s=5.0, gap_s=8.0))[0]  # fmt: skip
    finally:
        await again.stop()
    readable = True
    try:
        all_records = read_jsonl(records)
    except ValueError:
        readable, all_records = False, []
    check = bookings_check(shop, all_records, seeded=len(SEED_BOOKINGS))
    dropped = first.summary is None or first.summary.close_code != 1000
    once = check["each_confirmed_booking_once"] is True and bool(check["distinct_bookings"])
    ok = booked and dropped and readable and retry.summary is not None and once
    counts = {k: int(str(check[k])) for k in ("missing", "duplicate_bookings")}
    return fault(ok, f"killed after a booking: {booked}; call dropped: {dropped}; records "
                 f"readable: {readable}; {check['book_service_ok']} confirmations, "
                 f"{check['new_bookings']} rows", calls_failed=int(dropped),
                 bookings_lost=counts["missing"],
                 bookings_doubled=counts["duplicate_bookings"])  # fmt: skip


FAULTS: dict[str, Callable[[Path], Awaitable[Fault]]] = {
    "audio_faster_than_real_time": audio_faster_than_real_time,
    "idle_sockets": idle_sockets,
    "replayed_call_token": replayed_call_token,
    "pcm_open_beside_signed_twilio": pcm_open_beside_signed_twilio,
    "sqlite_write_lock_held": sqlite_write_lock_held,
    "records_disk_full": records_disk_full,
    "kill_9_mid_call": kill_9_mid_call,
}


async def run_faults(
    names: list[str] | None = None, folder: Path | None = None
) -> dict[str, Fault]:
    """Each fault in `names` (default all), in order; one that raises is reported as not
    survived with the error."""
    base = folder or Path(tempfile.mkdtemp(prefix="voice-agent-faults-"))
    results: dict[str, Fault] = {}
    for name in names or list(FAULTS):
        print(f"faults: {name}...", file=sys.stderr, flush=True)
        try:
            results[name] = await FAULTS[name](base / name)
        except Exception as exc:
            results[name] = fault(False, f"the run itself failed: {type(exc).__name__}: {exc}")
        print(f"faults: {name}: {results[name]}", file=sys.stderr, flush=True)
    return results
