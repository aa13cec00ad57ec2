"""The end-to-end demo call: a server on loopback, a scripted caller, a reply WAV.

The server answers with the real pipeline (Whisper, the diffusion-LLM agent with the
bike-shop tools on a fresh SQLite file, streaming TTS); `echo=True` answers with the
echo stand-in instead, which needs no models. The caller's lines are spoken by a TTS voice
(Piper, else espeak-ng) with pauses long enough for the agent's replies, and streamed
through the Twilio protocol by the call simulator.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from voice_agent.config import Settings
from voice_agent.echo import EchoSession
from voice_agent.events import Pcm16
from voice_agent.pipeline import Pipeline, PipelineSession, TurnSummary
from voice_agent.simulator import CallSummary, simulate_call
from voice_agent.speech import Synthesizer, default_synthesizer
from voice_agent.transports.call import CallSession, SessionFactory
from voice_agent.transports.server import TWILIO_PATH, VoiceServer
from voice_agent.turn_record import DegradeAction, Stage
from voice_agent.wav import write_wav

DEMO_LINES = (
    "Hi, I'd like to book a tune-up for tomorrow at 10 am. My name is Anna.",
    "Yes please.",
    "Thanks, bye.",
)
FIRST_GAP_S = 6.0
"""Silence before the first line: the greeting plays meanwhile."""
GAP_S = 8.0
"""Silence after each line: room for the agent's reply before the caller goes on."""
TAIL_S = 0.2
DETAIL_CHARS = 90
"""Degrade details (e.g. an unparseable answer) are cut to this many characters."""
REPLY_RATE_HZ = 8000
TABLE_STAGES = (
    Stage.END_OF_TURN,
    Stage.ASR_FINAL,
    Stage.ENGINE,
    Stage.TOOL,
    Stage.TTS_FIRST_AUDIO,
    Stage.SEND,
    Stage.TURN,
)


@dataclass(slots=True)
class DemoResult:
    summary: CallSummary
    greeting: str = ""
    turns: list[TurnSummary] = field(default_factory=list)
    records_path: Path | None = None


def caller_audio(
    lines: tuple[str, ...] = DEMO_LINES,
    first_gap_s: float = FIRST_GAP_S,
    gap_s: float = GAP_S,
    voice: Synthesizer | None = None,
) -> tuple[Pcm16, int]:
    """Caller lines spoken by `voice` (default: Piper's joe voice, else espeak-ng, whose
    robotic voice Whisper tiny.en mishears more often), `first_gap_s` of silence before
    the first line and `gap_s` before each later one. Raises TtsUnavailable (a
    RuntimeError) naming what to install when no synthesizer works."""
    voice = voice or default_synthesizer()
    rate = voice.sample_rate_hz
    parts: list[Pcm16] = []
    for i, line in enumerate(lines):
        parts += [np.zeros(int(rate * (gap_s if i else first_gap_s)), np.int16)]
        parts.append(voice.synthesize(line))
    parts.append(np.zeros(int(rate * TAIL_S), np.int16))
    return np.concatenate(parts), rate


async def run_demo(settings: Settings, out_dir: Path, *, echo: bool = False) -> DemoResult:
    """Serve on an ephemeral loopback port, place one scripted call, write the WAVs (and,
    with the pipeline, the turn records and the shop file) into `out_dir`."""
    records, shop = _fresh_outputs(out_dir)
    local = settings.model_copy(
        update={
            "server": settings.server.model_copy(update={"host": "127.0.0.1", "port": 0}),
            "pipeline": settings.pipeline.model_copy(update={"records": records, "shop_db": shop}),
        }
    )
    if echo:
        caller, rate = await asyncio.to_thread(caller_audio, DEMO_LINES, 3.5, 3.5)
        summary, reply = await _call(local, EchoSession, caller, rate)
        result = DemoResult(summary)
    else:
        caller, rate = await asyncio.to_thread(caller_audio)
        sessions: list[PipelineSession] = []
        async with Pipeline(local) as pipeline:

            def factory() -> CallSession:
                sessions.append(pipeline.new_session())
                return sessions[-1]

            summary, reply = await _call(local, factory, caller, rate)
        result = DemoResult(summary, records_path=records)
        if sessions:
            result.greeting, result.turns = sessions[0].greeting, sessions[0].turns
    write_wav(out_dir / "demo-caller.wav", caller, rate)
    write_wav(out_dir / "demo-reply.wav", reply, REPLY_RATE_HZ)
    return result


def _fresh_outputs(out_dir: Path) -> tuple[Path, Path]:
    """The records file and the shop file of a new demo run (a fresh shop each time)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    records, shop = out_dir / "demo-turns.jsonl", out_dir / "demo-shop.sqlite"
    for stale in (records, shop):
        stale.unlink(missing_ok=True)
    return records, shop


async def _call(
    settings: Settings, factory: SessionFactory, caller: Pcm16, rate: int
) -> tuple[CallSummary, Pcm16]:
    async with VoiceServer(settings, factory) as server:
        url = f"ws://127.0.0.1:{server.port}{TWILIO_PATH}"
        token = settings.auth.twilio_stream_token
        return await simulate_call(
            url, caller, rate, token=token.get_secret_value() if token else None
        )


def call_report(
    greeting: str, turns: Sequence[TurnSummary], heard_ms: Sequence[int | None]
) -> list[str]:
    """What `demo` and `mic` print after a call: the conversation, then the latency
    table (`heard_ms`: per caller turn, end of their speech to the first reply heard)."""
    return [
        "conversation:",
        *conversation_lines(greeting, turns),
        "",
        "latency per turn (ms; heard_ms: end of caller speech to first reply heard):",
        *latency_table(turns, heard_ms),
        "",
    ]


def conversation_lines(greeting: str, turns: Sequence[TurnSummary]) -> list[str]:
    """The call as text: caller lines as transcribed, agent lines, tool calls."""
    lines = [f"agent:  {greeting}"] if greeting else []
    for turn in turns:
        lines.append(f"caller: {turn.caller_text}")
        for call in turn.tool_calls:
            args = ", ".join(f"{k}={v!r}" for k, v in call.arguments.items())
            lines.append(f"  tool: {call.tool}({args}) -> {call.outcome.value}")
        note = " [interrupted]" if turn.interrupted else " [failed]" if turn.failed else ""
        kind = ""
        if turn.reply is not None:
            why = ", ".join(_short(f"{d.kind.value} {d.detail}") for d in turn.reply.degrades)
            kind = f" ({turn.reply.kind.value}{': ' + why if why else ''})"
        lines.append(f"agent:  {turn.agent_text}{kind}{note}")
    return lines


def _short(text: str, limit: int = DETAIL_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def latency_table(turns: Sequence[TurnSummary], heard_ms: Sequence[int | None]) -> list[str]:
    """Per turn: each stage's duration (ms) from the turn record, whether the filler
    played (then `send` counts from the reply's first audio to the filler's first frame,
    so it is negative), and `heard_ms`: what the caller measured (end of their speech to
    the first reply audio they heard; "-" where missing)."""
    heads = ["turn", *(s.value for s in TABLE_STAGES), "filler", "heard_ms"]
    rows = [heads]
    for i, turn in enumerate(turns):
        cells = [str(turn.number)]
        for stage in TABLE_STAGES:
            ms = turn.record.duration_ms(stage)
            cells.append("-" if ms is None else f"{ms:.0f}")
        filler = any(d.action is DegradeAction.PLAY_FILLER for d in turn.record.degrades)
        cells.append("yes" if filler else "-")
        cells.append(str(heard_ms[i]) if i < len(heard_ms) and heard_ms[i] is not None else "-")
        rows.append(cells)
    widths = [max(len(row[c]) for row in rows) for c in range(len(heads))]
    return ["  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
