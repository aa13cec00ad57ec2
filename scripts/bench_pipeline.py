"""Voice-to-voice latency of the whole pipeline, one call and 4 and 8 calls at once.

    python scripts/bench_pipeline.py --json out/bench_pipeline.json

A `voice-agent serve` process on loopback (the embedded defaults: Whisper tiny.en, the
shipped brain, Piper) answers scripted bike-shop calls (scripts/calls.py: caller lines
spoken by Piper, streamed through the Twilio protocol at real time). Voice to voice is
what each simulated caller heard: from the end of their speech in the stream to the
first non-silent reply frame (a filler counts: it is what the caller hears);
`voice_to_voice_answer_ms` is when the answer itself began (a filler is not an answer:
the server's records say how long after the first frame the answer's first frame went
out). The stage breakdown (p50 and p95 of each stage) comes from the server's turn
records. `single` places the calls one after the
other until at least `--turns` turns; `concurrent` places N calls at once (staggered by
`--stagger-s`), for each N; each concurrent figure also has its ratio to `single`.
`--compare-preemptive` also runs the single calls on a second server with preemptive
generation off (`preemptive_off`), and the ratio of the two medians.

Writes {"single": {"voice_to_voice_ms": {"p50", "p95", "n"}, "voice_to_voice_answer_ms":
{...}, "stages_ms": {...}, "false_cutoffs": share, ...},
"concurrent": {"4": {...}, "8": {...}}, "turns": N, ...}.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

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
from voice_agent.speech import Synthesizer, default_synthesizer
from voice_agent.turn_record import read_jsonl


def _ratio(a: object, b: object) -> float | None:
    if isinstance(a, int | float) and isinstance(b, int | float) and b:
        return round(a / b, 2)
    return None


async def single_calls(server: ServerProcess, turns: int, voice: Synthesizer) -> list[CallResult]:
    """Calls one after the other until at least `turns` caller turns."""
    results: list[CallResult] = []
    for script in scripts_for(math.ceil(turns / len(SCRIPTS[0]))):
        results += await place_calls(server.twilio_url, [script], voice)
    return results


async def without_preemption(args: argparse.Namespace, voice: Synthesizer) -> dict[str, object]:
    server = ServerProcess(args.out_dir / "preemptive-off", config=args.config,
                           env={"VOICE_AGENT_PIPELINE__PREEMPTIVE": "false"})  # fmt: skip
    await server.start()
    try:
        results = await single_calls(server, args.turns, voice)
    finally:
        await server.stop()
    records = read_jsonl(server.records)
    return summarize(join_turns(results, records), results, records)


async def bench(args: argparse.Namespace) -> dict[str, object]:
    voice = default_synthesizer()
    server = ServerProcess(args.out_dir, echo=args.echo, config=args.config)
    t0 = time.monotonic()
    await server.start()
    load_s = round(time.monotonic() - t0, 1)
    results: dict[str, object] = {"server_start_s": load_s, "echo": args.echo}
    try:
        single_results = await single_calls(server, args.turns, voice)
        concurrent_results = {}
        for n in args.concurrent:
            concurrent_results[n] = await place_calls(
                server.twilio_url, scripts_for(n, offset=n), voice, stagger_s=args.stagger_s
            )
    finally:
        code = await server.stop()
    records = read_jsonl(server.records) if server.records.exists() else []
    single = summarize(join_turns(single_results, records), single_results, records)
    results["single"] = single
    by_n: dict[str, object] = {}
    for n, res in concurrent_results.items():
        figures = summarize(join_turns(res, records), res, records)
        for key in ("p50", "p95"):
            figures[f"voice_to_voice_{key}_vs_single"] = _ratio(
                figures["voice_to_voice_ms"][key],  # type: ignore[index]
                single["voice_to_voice_ms"][key],  # type: ignore[index]
            )
        by_n[str(n)] = figures
    results["concurrent"] = by_n
    if args.compare_preemptive:
        off = await without_preemption(args, voice)
        results["preemptive_off"] = off
        for key in ("p50", "p95"):
            results[f"preemptive_on_vs_off_{key}"] = _ratio(
                single["voice_to_voice_ms"][key],  # type: ignore[index]
                off["voice_to_voice_ms"][key],  # type: ignore[index]
            )
    results["turns"] = single["turns"]
    results["server_exit_code"] = code
    results["wall_s"] = round(time.monotonic() - t0, 1)
    return results


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--json", type=Path, help="also write the figures here")
    p.add_argument("--turns", type=int, default=21, help="at least this many single-call turns")
    p.add_argument("--concurrent", type=int, nargs="*", default=[4, 8])
    p.add_argument("--stagger-s", type=float, default=1.0)
    p.add_argument("--out-dir", type=Path, default=Path("out/bench_pipeline"))
    p.add_argument("--config", type=Path, help="TOML settings for the server")
    p.add_argument("--echo", action="store_true", help="the echo stand-in (no models)")
    p.add_argument(
        "--compare-preemptive",
        action="store_true",
        help="also run the single calls with preemptive generation off",
    )
    args = p.parse_args()
    if args.turns < 1 or any(n < 1 for n in args.concurrent) or args.stagger_s < 0:
        p.error("--turns and --concurrent must be positive, --stagger-s not negative")
    results = asyncio.run(bench(args))
    report_json(results, args.json)
    return 0 if results["server_exit_code"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
