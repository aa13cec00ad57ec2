"""Scripted calls against a `voice-agent serve` process, for benchmarks and load tests.

    server = ServerProcess(out_dir)          # `voice-agent serve` on a free loopback port
    await server.start()
    results = await place_calls(server.twilio_url, [script, ...], stagger_s=1.0)
    await server.stop()
    turns = join_turns(results, read_jsonl(server.records))

The server runs in its own process (as in production: the callers' simulators do not
share its interpreter), with a fresh shop file and a turn-records file in `out_dir`. The
callers are `voice_agent.simulator.simulate_call`s (Twilio protocol, μ-law 8 kHz, real
time) speaking scripted lines synthesized once by a TTS voice. What a caller heard
(end of their speech to the first non-silent reply frame) is joined with the server's
turn record of the same turn (call id + turn number) for the per-stage breakdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from voice_agent.events import Pcm16
from voice_agent.simulator import CallSummary, simulate_call
from voice_agent.speech import Synthesizer, default_synthesizer
from voice_agent.turn_record import DegradeAction, Stage, ToolOutcome, TurnRecord, read_jsonl

SCRIPTS: tuple[tuple[str, ...], ...] = (
    (
        "Hi, I'd like to book a tune-up for tomorrow at 10 am. My name is Anna.",
        "Yes please.",
        "Thanks, bye.",
    ),
    ("When are you open on Saturday?", "And on Sunday?", "Okay, thank you. Goodbye."),
    (
        "Hi, where is my order? The number is 4 0 2 1 3.",
        "When will it arrive?",
        "Great, that's all, bye.",
    ),
    (
        "Do you have any front lights?",
        "Can you reserve one for me? My name is Tom Becker.",
        "Thanks, goodbye.",
    ),
    (
        "Can I get a flat repair on Friday?",
        "Two in the afternoon please, my name is Lena.",
        "Perfect, bye.",
    ),
    ("How much is a brake check?", "Book one for Monday at 3 pm, I'm Sam.", "Thanks, bye."),
    ("Do you sell bike locks?", "What about a cable lock?", "Okay, thanks. Bye."),
)
"""Multi-turn calls in the bike shop's domain, most with a tool call; the last line of
each says goodbye (the agent may end the call then)."""

FIRST_GAP_S = 5.0
"""Silence before the first line: the greeting plays meanwhile."""
GAP_S = 7.0
"""Silence after each line: room for the reply before the caller goes on."""
TAIL_S = 0.3
SERVE_START_S = 240.0
"""Longest wait for the server to load its models and print its address."""
STOP_S = 30.0
_SERVING = re.compile(rb"serving (ws://[\d.]+:(\d+))/twilio")


def script_audio(
    lines: Sequence[str],
    voice: Synthesizer,
    cache: dict[str, Pcm16],
    first_gap_s: float = FIRST_GAP_S,
    gap_s: float = GAP_S,
) -> tuple[Pcm16, int]:
    """The caller's side of one call: silence, then each line followed by a gap."""
    rate = voice.sample_rate_hz
    parts: list[Pcm16] = []
    for i, line in enumerate(lines):
        if line not in cache:
            cache[line] = voice.synthesize(line)
        parts += [np.zeros(int(rate * (gap_s if i else first_gap_s)), np.int16), cache[line]]
    parts.append(np.zeros(int(rate * TAIL_S), np.int16))
    return np.concatenate(parts), rate


def scripts_for(calls: int, offset: int = 0) -> list[tuple[str, ...]]:
    """`calls` scripts, round robin from `SCRIPTS[offset]`."""
    return [SCRIPTS[(offset + i) % len(SCRIPTS)] for i in range(calls)]


@dataclass(slots=True)
class ServerProcess:
    """`voice-agent serve` in a child process on 127.0.0.1 with a free port."""

    out_dir: Path
    echo: bool = False
    config: Path | None = None
    extra_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment, e.g. settings as VOICE_AGENT_PIPELINE__PREEMPTIVE=false."""
    launcher: tuple[str, ...] = ()
    """Put before the server's command line, e.g. a shell that sets how signals are
    handled before it execs the server (the process is still the server itself)."""
    proc: asyncio.subprocess.Process | None = None
    url: str = ""
    output: list[str] = field(default_factory=list)
    _drain: asyncio.Task[None] | None = None

    @property
    def records(self) -> Path:
        return self.out_dir / "turns.jsonl"

    @property
    def shop_db(self) -> Path:
        return self.out_dir / "shop.sqlite"

    @property
    def twilio_url(self) -> str:
        return f"{self.url}/twilio"

    async def start(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for stale in (self.records, self.shop_db):
            stale.unlink(missing_ok=True)
        args = [*self.launcher, sys.executable, "-m", "voice_agent.cli"]
        if self.config is not None:
            args += ["--config", str(self.config)]
        args += ["serve", "--host", "127.0.0.1", "--port", "0", "--records", str(self.records),
                 "--shop-db", str(self.shop_db), *self.extra_args]  # fmt: skip
        if self.echo:
            args.append("--echo")
        self.proc = await asyncio.create_subprocess_exec(
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + SERVE_START_S
        while not self.url:
            left = deadline - time.monotonic()
            if left <= 0:
                await self.stop()
                raise RuntimeError(f"server did not start in {SERVE_START_S:.0f} s")
            line = await asyncio.wait_for(self.proc.stdout.readline(), left)
            if not line:
                raise RuntimeError("server exited at start:\n" + "".join(self.output[-20:]))
            self.output.append(line.decode(errors="replace"))
            if found := _SERVING.search(line):
                self.url = found.group(1).decode()
        self._drain = asyncio.create_task(self._keep_reading())

    async def _keep_reading(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            self.output.append(line.decode(errors="replace"))

    def booked(self) -> bool:
        """Whether the server has recorded a turn whose `book_service` call ran OK (a
        record is written when its turn ends; a line still being written is not read)."""
        try:
            records = read_jsonl(self.records)
        except (FileNotFoundError, ValueError):
            return False
        return any(c.name == "book_service" and c.outcome is ToolOutcome.OK
                   for r in records for c in r.tool_calls)  # fmt: skip

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise RuntimeError("the server is not running")
        return self.proc.pid

    async def stop(self) -> int | None:
        """SIGINT (the server's clean shutdown), then SIGKILL after `STOP_S`."""
        if self.proc is None:
            return None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(self.proc.wait(), STOP_S)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self._drain is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._drain, 5)
        return self.proc.returncode


@dataclass(frozen=True, slots=True)
class CallResult:
    script: tuple[str, ...]
    summary: CallSummary | None
    error: str = ""


async def place_calls(
    url: str,
    scripts: Sequence[tuple[str, ...]],
    voice: Synthesizer | None = None,
    *,
    stagger_s: float = 1.0,
    max_tail_s: float = 12.0,
    first_gap_s: float = FIRST_GAP_S,
    gap_s: float = GAP_S,
) -> list[CallResult]:
    """One simulated call per script, all at once, the k-th starting `k * stagger_s`
    late. A call that fails (refused, dropped) is reported, not raised."""
    voice = voice or default_synthesizer()
    cache: dict[str, Pcm16] = {}
    audio = [
        await asyncio.to_thread(script_audio, s, voice, cache, first_gap_s, gap_s) for s in scripts
    ]

    async def one(k: int) -> CallResult:
        await asyncio.sleep(k * stagger_s)
        samples, rate = audio[k]
        try:
            summary, _ = await simulate_call(url, samples, rate, max_tail_s=max_tail_s)
        except (OSError, RuntimeError, ValueError) as exc:
            return CallResult(scripts[k], None, f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # websockets' handshake/closing errors
            return CallResult(scripts[k], None, f"{type(exc).__name__}: {exc}")
        return CallResult(scripts[k], summary)

    return list(await asyncio.gather(*(one(k) for k in range(len(scripts)))))


@dataclass(frozen=True, slots=True)
class TurnResult:
    """One caller turn: what the caller heard, and the server's record of it."""

    call_id: str
    turn: int
    heard_ms: int | None
    """End of the caller's speech to the first non-silent reply frame they heard."""
    record: TurnRecord | None


def join_turns(results: Sequence[CallResult], records: Sequence[TurnRecord]) -> list[TurnResult]:
    """Pair each caller turn with the server's record (same call, same turn number).
    The server numbers the turns it answered; a turn it merged or never heard has no
    record."""
    by_key = {(r.call_id, r.turn): r for r in records}
    turns: list[TurnResult] = []
    for result in results:
        if result.summary is None:
            continue
        s = result.summary
        for k in range(s.turns):
            heard = s.first_reply_ms[k] if k < len(s.first_reply_ms) else None
            turns.append(TurnResult(s.call_sid, k + 1, heard, by_key.get((s.call_sid, k + 1))))
    return turns


def percentiles(values: Sequence[float]) -> dict[str, float | int | None]:
    """Median, p95 and count (nearest-rank p95 on few samples; None when empty)."""
    if not values:
        return {"p50": None, "p95": None, "n": 0}
    arr = np.asarray(values, dtype=float)
    return {
        "p50": round(float(np.percentile(arr, 50)), 1),
        "p95": round(float(np.percentile(arr, 95)), 1),
        "n": len(values),
    }


def answer_heard_ms(turn: TurnResult) -> float | None:
    """When the caller heard the answer itself: the first sound they heard, moved on by
    the server's time from its first frame (a filler, if one played) to the answer's
    first frame. None when unknown (no record, or no answer was sent)."""
    r = turn.record
    if turn.heard_ms is None or r is None:
        return None
    first, answer = r.first_audio_sent_at_ms, r.answer_audio_sent_at_ms
    if first is None or answer is None:
        return None
    return turn.heard_ms + max(0.0, answer - first)


def summarize(
    turns: Sequence[TurnResult],
    results: Sequence[CallResult],
    all_records: Sequence[TurnRecord] = (),
) -> dict[str, object]:
    """Voice to voice as the callers heard it (the first sound, and the answer itself),
    each stage from the server's records, fillers played, turns unanswered, calls
    failed; with all the server's records, also `false_cutoffs`: the share of caller
    turns the server split in two (it answered more turns than the caller spoke)."""
    heard = [t.heard_ms for t in turns if t.heard_ms is not None]
    answers = [a for t in turns if (a := answer_heard_ms(t)) is not None]
    records = [t.record for t in turns if t.record is not None]
    stages: dict[str, object] = {}
    for stage in Stage:
        values = [d for r in records if (d := r.duration_ms(stage)) is not None]
        stages[stage.value] = percentiles(values)
    fillers = sum(any(d.action is DegradeAction.PLAY_FILLER for d in r.degrades) for r in records)
    return {
        "voice_to_voice_ms": percentiles(heard),
        "voice_to_voice_answer_ms": percentiles(answers),
        "stages_ms": stages,
        "turns": len(turns),
        "turns_unanswered": sum(t.heard_ms is None for t in turns),
        "turns_without_record": sum(t.record is None for t in turns),
        "fillers": fillers,
        "false_cutoffs": _split_share(results, all_records) if all_records else None,
        "preempted_turns": sum(bool(r.preempted) for r in records),
        "degraded_turns": sum(bool(r.degrades) for r in records),
        "calls": len(results),
        "calls_failed": sum(r.summary is None for r in results),
        "errors": sorted({r.error for r in results if r.error})[:5],
    }


def _split_share(results: Sequence[CallResult], records: Sequence[TurnRecord]) -> float | None:
    spoken = {r.summary.call_sid: r.summary.turns for r in results if r.summary is not None}
    answered: dict[str, int] = {}
    for record in records:
        if record.call_id in spoken:
            answered[record.call_id] = answered.get(record.call_id, 0) + 1
    split = sum(max(0, answered.get(call, 0) - turns) for call, turns in spoken.items())
    total = sum(spoken.values())
    return round(split / total, 3) if total else None


def report_json(results: dict[str, object], path: Path | None) -> None:
    """Print the figures as JSON, and write them to `path` when given."""
    text = json.dumps(results, indent=2)
    print(text)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
