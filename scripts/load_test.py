"""Load and soak: how many calls at once one server process holds within the turn budget,
and whether it stays flat over a long run.

    python scripts/load_test.py --json out/load_test.json
    python scripts/load_test.py --calls 1 2 4 --soak-minutes 10 --soak-calls 2 --fuzz-cases 2000

Loopback only, bounded in count and time. One `voice-agent serve` process (embedded
defaults) answers scripted bike-shop calls (scripts/calls.py: multi-turn, most with a tool
call, caller lines spoken by Piper and streamed through the Twilio protocol at real
time).

Ramp: for each N in `--calls`, N calls at once (staggered by `--stagger-s`); voice to
voice is what each caller heard (end of their speech to the first non-silent reply
frame). `max_calls_within_budget` is the largest N whose p95, and that of every level
below it, is within the turn budget (`[budgets] turn_ms`) with no call failed.

Soak: `--soak-calls` callers each placing calls back to back for `--warmup-minutes` and
then `--soak-minutes`. Over the latter, the server's RSS, open file descriptors and
threads are sampled from /proc every `--sample-s`; the slope is a least-squares fit (MB
per minute). At the end: every call completed, and the shop file is checked against the
turn records (scripts/bookings_check.py): each distinct booking a `book_service` call
confirmed has exactly one row (an identical retry adds none), and no row is there twice.

Faults: `--faults [NAME ...]` makes each hardening fault happen against real components
(scripts/faults.py) and reports `faults.<name>.{survived, calls_failed, bookings_lost,
bookings_doubled, detail}`.

Fuzz: `--fuzz-cases K` runs the fuzz tests (tests/unit/test_codec_fuzz.py,
tests/integration/test_server_hostile.py) with FUZZ_CASES=K; `fuzz_cases` is the number
of passing examples hypothesis reports over all properties.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.bookings_check import bookings_check
from scripts.calls import (
    SCRIPTS,
    CallResult,
    ServerProcess,
    join_turns,
    place_calls,
    report_json,
    scripts_for,
    summarize,
)
from scripts.faults import FAULTS, run_faults
from voice_agent.config import load_settings
from voice_agent.speech import Synthesizer, default_synthesizer
from voice_agent.turn_record import read_jsonl

FUZZ_FILES = ("tests/unit/test_codec_fuzz.py", "tests/integration/test_server_hostile.py")
_MB = 1024 * 1024


def proc_sample(pid: int) -> dict[str, float]:
    """The process's resident memory (MB), open file descriptors and threads."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss_kb = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    threads = int(re.search(r"Threads:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return {"rss_mb": round(rss_kb / 1024, 1), "fds": fds, "threads": threads}


def slope_per_minute(times_s: list[float], values: list[float]) -> float | None:
    if len(times_s) < 3:
        return None
    t = np.asarray(times_s) / 60.0
    return round(float(np.polyfit(t, np.asarray(values, dtype=float), 1)[0]), 3)


async def ramp(
    server: ServerProcess, levels: list[int], voice: Synthesizer, stagger_s: float, turn_ms: int
) -> tuple[dict[str, object], int]:
    """Every level in turn (ascending); the best N is the largest whose level and every
    level below it kept voice-to-voice p95 within `turn_ms` with no call failed."""
    by_calls: dict[str, object] = {}
    best, holding = 0, True
    for n in sorted(set(levels)):
        results = await place_calls(server.twilio_url, scripts_for(n, offset=n), voice,
                                    stagger_s=stagger_s)  # fmt: skip
        records = read_jsonl(server.records) if server.records.exists() else []
        figures = summarize(join_turns(results, records), results)
        figures["sample"] = proc_sample(server.pid)
        by_calls[str(n)] = figures
        p95 = figures["voice_to_voice_ms"]["p95"]  # type: ignore[index]
        print(f"load: {n} calls: voice to voice {figures['voice_to_voice_ms']}", file=sys.stderr)
        holding = holding and p95 is not None and p95 <= turn_ms and not figures["calls_failed"]
        if holding:
            best = n
    return by_calls, best


async def soak(
    server: ServerProcess,
    callers: int,
    minutes: float,
    voice: Synthesizer,
    sample_s: float,
    warmup_minutes: float,
) -> dict[str, object]:
    """Callers back to back for `minutes`; the first `warmup_minutes` fill caches and
    pools and are not sampled for the slope."""
    t0 = time.monotonic()
    end = t0 + (warmup_minutes + minutes) * 60
    warm_at = t0 + warmup_minutes * 60
    samples: list[tuple[float, dict[str, float]]] = []
    results: list[CallResult] = []

    async def caller(k: int) -> None:
        i = k
        await asyncio.sleep(k * 2.0)
        while time.monotonic() < end:
            results.extend(await place_calls(server.twilio_url, [SCRIPTS[i % len(SCRIPTS)]], voice))
            i += callers

    async def sampler() -> None:
        await asyncio.sleep(max(0.0, warm_at - time.monotonic()))
        while time.monotonic() < end:
            samples.append((time.monotonic() - t0, proc_sample(server.pid)))
            await asyncio.sleep(sample_s)

    await asyncio.gather(sampler(), *(caller(k) for k in range(callers)))
    samples.append((time.monotonic() - t0, proc_sample(server.pid)))
    times = [t for t, _ in samples]
    figures = summarize(join_turns(results, read_jsonl(server.records)), results)
    return {
        "minutes": round((time.monotonic() - warm_at) / 60, 2),
        "warmup_minutes": warmup_minutes,
        "calls": callers,
        "rss_mb_start": samples[0][1]["rss_mb"],
        "rss_mb_end": samples[-1][1]["rss_mb"],
        "rss_mb_per_minute": slope_per_minute(times, [s["rss_mb"] for _, s in samples]),
        "fds_start": samples[0][1]["fds"],
        "fds_end": samples[-1][1]["fds"],
        "threads_start": samples[0][1]["threads"],
        "threads_end": samples[-1][1]["threads"],
        "calls_completed": len(results) - figures["calls_failed"],  # type: ignore[operator]
        "calls_failed": figures["calls_failed"],
        "voice_to_voice_ms": figures["voice_to_voice_ms"],
        "turns": figures["turns"],
        "errors": figures["errors"],
    }


def fuzz(cases: int) -> dict[str, object]:
    """Run the fuzz tests with FUZZ_CASES=cases; count what the passing properties ran."""
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "--hypothesis-show-statistics", *FUZZ_FILES],
        env={**os.environ, "FUZZ_CASES": str(cases)},
        capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    passed = re.search(r"(\d+) passed", proc.stdout)
    failed = re.search(r"(\d+) failed", proc.stdout)
    n_passed = int(passed.group(1)) if passed else 0
    examples = sum(int(n) for n in re.findall(r"(\d+) passing, \d+ failing", proc.stdout))
    return {
        "cases_per_property": cases,
        "examples_run": examples,
        "tests_passed": n_passed,
        "tests_failed": int(failed.group(1)) if failed else 0,
        "exit_code": proc.returncode,
        "seconds": round(time.monotonic() - t0, 1),
        "tail": proc.stdout.strip().splitlines()[-1:] if proc.stdout else [],
    }


async def run(args: argparse.Namespace) -> dict[str, object]:
    turn_ms = load_settings(args.config).budgets.turn_ms
    voice = default_synthesizer()
    out: dict[str, object] = {"turn_budget_ms": turn_ms}
    if args.calls:
        server = ServerProcess(args.out_dir / "ramp", config=args.config)
        await server.start()
        try:
            by_calls, best = await ramp(server, args.calls, voice, args.stagger_s, turn_ms)
        finally:
            await server.stop()
        out["by_calls"] = by_calls
        out["max_calls_within_budget"] = best
    if args.soak_minutes > 0:
        soak_calls = args.soak_calls or max(1, int(out.get("max_calls_within_budget") or 1))
        server = ServerProcess(args.out_dir / "soak", config=args.config)
        await server.start()
        try:
            with sqlite3.connect(server.shop_db) as conn:
                seeded = conn.execute("SELECT COUNT(*) FROM bookings").fetchone()[0]
            figures = await soak(server, soak_calls, args.soak_minutes, voice, args.sample_s,
                                 args.warmup_minutes)  # fmt: skip
        finally:
            code = await server.stop()
        figures["server_exit_code"] = code
        figures["bookings"] = bookings_check(server.shop_db, read_jsonl(server.records), seeded)
        out["soak"] = figures
    if args.faults is not None:
        out["faults"] = await run_faults(args.faults or None, args.out_dir / "faults")
    if args.fuzz_cases > 0:
        result = await asyncio.to_thread(fuzz, args.fuzz_cases)
        out["fuzz"] = result
        out["fuzz_cases"] = result["examples_run"]
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--json", type=Path, help="also write the figures here")
    p.add_argument("--calls", type=int, nargs="*", default=[1, 2, 4, 6, 8])
    p.add_argument("--stagger-s", type=float, default=1.0)
    p.add_argument("--soak-minutes", type=float, default=10.0)
    p.add_argument("--soak-calls", type=int, default=0, help="0: the ramp's best N")
    p.add_argument("--sample-s", type=float, default=15.0)
    p.add_argument("--warmup-minutes", type=float, default=1.0, help="soak time not sampled")
    p.add_argument("--fuzz-cases", type=int, default=0, help="FUZZ_CASES for the fuzz tests")
    p.add_argument("--out-dir", type=Path, default=Path("out/load_test"))
    p.add_argument("--faults", nargs="*", choices=sorted(FAULTS), metavar="FAULT",
                   help="make each fault happen (none named: all of them) and report "
                   "survived, calls failed, bookings lost and doubled")  # fmt: skip
    p.add_argument("--config", type=Path, help="TOML settings for the server")
    args = p.parse_args()
    if any(n < 1 or n > 64 for n in args.calls) or args.soak_minutes < 0 or args.soak_minutes > 120:
        p.error("--calls must be 1..64, --soak-minutes 0..120")
    if args.sample_s <= 0 or args.stagger_s < 0 or args.fuzz_cases < 0:
        p.error("--sample-s must be positive, --stagger-s and --fuzz-cases not negative")
    results = asyncio.run(run(args))
    report_json(results, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
