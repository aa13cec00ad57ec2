"""A fleet on loopback: mosquitto, PostgreSQL, nginx and N `voice-agent serve` workers,
calls placed through nginx, one worker killed mid-call.

    python scripts/fleet.py --json out/fleet.json
    python scripts/fleet.py --workers 2 --calls 4 --compare-calls 2 --json out/fleet.json

Everything runs on this machine, each service in its own temporary folder: a throwaway
PostgreSQL cluster holding the one shop every worker books into (`[tools] database_url`),
one mosquitto broker every worker publishes to under its own node name, nginx in front
(its http-context file is `voice_agent.deploy.nginx_config`, the same text as the shipped
`deploy/nginx/voice-agent.conf`), and the workers as child processes
(`scripts/calls.ServerProcess`, embedded defaults). The callers are the Twilio simulator
speaking the booking scripts of `scripts/calls.py` at real time in Piper's voice.

The run:
1. `--calls` calls through nginx, staggered; once a worker has committed a booking in a
   call that is still going on (or, failing that, answered any turn), it is killed
   (SIGKILL: no drain, no goodbye, records cut wherever they were).
2. Right after the kill a new call is placed through nginx: `reroute_ms` is the time from
   the kill until that call is answered (its greeting's first audio frame).
3. Every call the kill dropped is placed again through nginx (the caller calls back):
   its booking, if the dropped call had made it already, must not be made twice.
4. With `--compare-calls K`: K calls straight to the survivor's port, then K through
   nginx, for voice to voice with and without the balancer in the way.
5. Checks: new calls reached the survivor; every booking a completed call confirmed is in
   PostgreSQL exactly once and no row is there twice (`scripts/bookings_check.py`); the
   broker carried turns from every worker (the live report's node view).

`ok` is true when all of that holds. Loopback only; bounded in calls and time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from websockets.asyncio.client import connect

from scripts.bookings_check import bookings_check
from scripts.calls import (
    FIRST_GAP_S,
    GAP_S,
    SCRIPTS,
    CallResult,
    ServerProcess,
    join_turns,
    percentiles,
    place_calls,
    report_json,
)
from scripts.services import Broker, Nginx, PostgresServer, free_port
from tools.bike_shop.catalogue import SEED_BOOKINGS
from voice_agent.deploy import Worker, nginx_config
from voice_agent.reports.live import RollingSummary, watch
from voice_agent.simulator import twilio_start
from voice_agent.speech import PiperSynthesizer, Synthesizer
from voice_agent.telemetry.publisher import BrokerAddress
from voice_agent.turn_record import TurnRecord, read_jsonl

BOOKING_SCRIPTS = tuple(s for s in SCRIPTS if any("book" in line.lower() for line in s))
"""The scripts whose calls book a workshop service."""
KILL_WAIT_S = 90.0
"""Longest wait for the first worker to commit a booking before it is killed anyway."""
ANSWER_WAIT_S = 30.0
CLOSED_NORMALLY = frozenset({1000, 1001})

NGINX_MAIN = """\
worker_processes 1;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {folder}/client_body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
{site}
}}
"""
"""The main file around the shipped http-context file (Debian's nginx.conf plays this
part in production)."""


def nginx_main(site: str, folder: Path) -> str:
    indented = "\n".join(f"    {line}" if line else "" for line in site.splitlines())
    return NGINX_MAIN.format(folder=folder, site=indented)


async def answered_ms(url: str, started_s: float) -> float:
    """Place a call (Twilio start) and wait for its first audio frame: milliseconds from
    `started_s` (time.monotonic) until then. Raises on a refused or dropped call."""
    start = twilio_start("MZ" + uuid.uuid4().hex, "CA" + uuid.uuid4().hex, {})
    async with asyncio.timeout(ANSWER_WAIT_S), connect(url, compression=None) as ws:
        await ws.send(json.dumps(start))
        async for message in ws:
            if isinstance(message, str) and json.loads(message).get("event") == "media":
                return round((time.monotonic() - started_s) * 1000, 1)
    raise RuntimeError("the call closed before any audio")


async def kill_moment(workers: list[ServerProcess], deadline_s: float) -> tuple[ServerProcess, str]:
    """Wait until a worker has committed a booking in a call that is still going on (its
    turn record is written when the turn ends, before the caller's goodbye), or, failing
    that by `deadline_s`, has answered any turn. Returns that worker (the first one when
    none did anything) and what it waited for: "booking", "turn" or ""."""
    while time.monotonic() < deadline_s:
        for worker in workers:
            if worker.booked():
                return worker, "booking"
        await asyncio.sleep(0.2)
    for worker in workers:
        if worker.records.exists() and worker.records.stat().st_size > 0:
            return worker, "turn"
    return workers[0], ""


def dropped(result: CallResult) -> bool:
    s = result.summary
    return s is None or s.close_code not in CLOSED_NORMALLY


def all_records(workers: list[ServerProcess]) -> list[TurnRecord]:
    records: list[TurnRecord] = []
    for w in workers:
        if w.records.exists():
            records.extend(read_jsonl(w.records))
    return records


async def run_fleet(args: argparse.Namespace, out_dir: Path) -> dict[str, object]:
    voice: Synthesizer = PiperSynthesizer()  # the callers' voice (as the booking e2e test's)
    (out_dir / "mqtt").mkdir(parents=True, exist_ok=True)
    broker = Broker(out_dir / "mqtt")
    pg = PostgresServer()
    workers: list[ServerProcess] = []
    nginx: Nginx | None = None
    live_task: asyncio.Task[RollingSummary] | None = None
    try:
        broker.start()
        pg.start()
        shop_url = pg.database("shop")
        for i in range(args.workers):
            env = {
                "VOICE_AGENT_TOOLS__DATABASE_URL": shop_url,
                "VOICE_AGENT_TELEMETRY__BROKER_URL": broker.url,
                "VOICE_AGENT_TELEMETRY__NODE": f"worker-{i + 1}",
                "VOICE_AGENT_SERVER__DRAIN_TIMEOUT_S": "0",
                **dict(args.worker_env),
            }
            workers.append(ServerProcess(out_dir / f"worker-{i + 1}", env=env))
        started = time.monotonic()
        await asyncio.gather(*(w.start() for w in workers))
        startup_s = round(time.monotonic() - started, 1)
        ports = [urlsplit(w.url).port or 0 for w in workers]
        listen = free_port()
        site = nginx_config([Worker("127.0.0.1", p) for p in ports], f"127.0.0.1:{listen}")
        nginx = Nginx(lambda folder: nginx_main(site, folder), listen)
        nginx.start()
        balanced = f"ws://127.0.0.1:{listen}/twilio"

        pace = {"stagger_s": args.stagger_s, "first_gap_s": args.first_gap_s, "gap_s": args.gap_s}
        summary = RollingSummary(window=1000)
        host, port = "127.0.0.1", broker.port
        screen = io.StringIO()
        address = BrokerAddress(host, port)
        live_task = asyncio.create_task(watch(address, screen, summary=summary))
        scripts = [BOOKING_SCRIPTS[i % len(BOOKING_SCRIPTS)] for i in range(args.calls)]
        first = asyncio.create_task(place_calls(balanced, scripts, voice, **pace))
        victim, killed_after = await kill_moment(workers, time.monotonic() + KILL_WAIT_S)
        survivor = [w for w in workers if w is not victim]
        killed = bool(killed_after)
        reroute: float | None = None
        reroute_error = ""
        if killed:
            assert victim.proc is not None
            victim.proc.kill()
            kill_s = time.monotonic()
            try:
                reroute = await answered_ms(balanced, kill_s)
            except Exception as exc:  # a refused or dropped call: the figure is missing
                reroute_error = f"{type(exc).__name__}: {exc}"
        results = await first
        lost = [r for r in results if dropped(r)]
        retried = await place_calls(balanced, [r.script for r in lost], voice, **pace)
        direct: list[CallResult] = []
        through: list[CallResult] = []
        if args.compare_calls and survivor:
            compare = [BOOKING_SCRIPTS[i % len(BOOKING_SCRIPTS)]
                       for i in range(args.compare_calls)]  # fmt: skip
            direct = await place_calls(survivor[0].twilio_url, compare, voice, **pace)  # fmt: skip
            through = await place_calls(balanced, compare, voice, **pace)
        await asyncio.sleep(1.0)  # the last turns' telemetry
        live_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await live_task
        live_task = None
        (out_dir / "live.txt").write_text(summary.render(), encoding="utf-8")
        for w in survivor:
            await w.stop()
        records = all_records(workers)
        bookings = bookings_check(shop_url, records, seeded=len(SEED_BOOKINGS))
        survivor_calls = {r.call_id for w in survivor if w.records.exists()
                          for r in read_jsonl(w.records)}  # fmt: skip
        retried_ok = [r for r in retried if not dropped(r)]
        nodes = sorted({node for node, _ in summary.calls})
        heard = {
            name: percentiles([t.heard_ms for t in join_turns(calls, records)
                               if t.heard_ms is not None])
            for name, calls in (("direct", direct), ("nginx", through))
        }  # fmt: skip
        figures: dict[str, object] = {
            "workers": args.workers,
            "startup_s": startup_s,
            "calls_placed": len(results) + len(retried) + (reroute is not None),
            "calls_completed": sum(not dropped(r) for r in [*results, *retried]),
            "calls_failed_by_kill": len(lost),
            "calls_retried_ok": len(retried_ok),
            "retried_on_survivor": sum(
                r.summary is not None and r.summary.call_sid in survivor_calls for r in retried_ok
            ),
            "killed_mid_call": killed,
            "killed_after": killed_after,
            "reroute_ms": reroute,
            "reroute_error": reroute_error,
            "bookings_expected": bookings["distinct_bookings"],
            "bookings_found": bookings["new_bookings"],
            "bookings_doubled": bookings["duplicate_bookings"],
            "bookings": bookings,
            "report_nodes": nodes,
            "report_turns": summary.turns_seen,
            "voice_to_voice_ms": heard,
        }
        figures["ok"] = bool(
            killed
            and lost
            and reroute is not None
            and len(retried_ok) == len(lost)
            and figures["retried_on_survivor"] == len(retried_ok)
            and bookings["each_confirmed_booking_once"] is True
            and bookings["distinct_bookings"]
            and len(nodes) == args.workers
        )
        return figures
    finally:
        if live_task is not None:
            live_task.cancel()
        for w in workers:
            await w.stop()
        if nginx is not None:
            nginx.stop()
        pg.cleanup()
        broker.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--workers", type=int, default=2, help="voice-agent serve processes (≥ 2)")
    p.add_argument("--calls", type=int, default=4, help="calls placed before the kill")
    p.add_argument("--stagger-s", type=float, default=1.0, help="between call starts")
    p.add_argument(
        "--compare-calls",
        type=int,
        default=2,
        help="calls straight to the survivor, then as many through nginx (0: none)",
    )
    p.add_argument(
        "--first-gap-s",
        type=float,
        default=FIRST_GAP_S,
        help="a caller's silence before its first line (the greeting plays)",
    )
    p.add_argument("--gap-s", type=float, default=GAP_S, help="between a caller's lines")
    p.add_argument(
        "--worker-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra environment for every worker, e.g. VOICE_AGENT_MODELS__TTS_BACKEND=espeak",
    )
    p.add_argument("--json", type=Path, help="also write the figures here")
    p.add_argument("--out-dir", type=Path, help="workers' records (default: a temp folder)")
    args = p.parse_args(argv)
    try:
        args.worker_env = [tuple(item.split("=", 1)) for item in args.worker_env]
        if any(len(pair) != 2 or not pair[0] for pair in args.worker_env):
            raise ValueError
    except ValueError:
        p.error("--worker-env takes NAME=VALUE")
    if args.workers < 2:
        p.error("--workers must be at least 2 (one is killed)")
    if args.calls < 1 or args.compare_calls < 0:
        p.error("--calls must be at least 1 and --compare-calls at least 0")
    out_dir = args.out_dir or Path(tempfile.mkdtemp(prefix="voice-agent-fleet-"))
    figures = asyncio.run(run_fleet(args, out_dir))
    figures["out_dir"] = str(out_dir)
    report_json(figures, args.json)
    return 0 if figures["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
