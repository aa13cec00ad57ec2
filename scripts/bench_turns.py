"""Benchmark end-of-turn rules on a pause set: false cut-offs vs. end-of-turn delay.

    .venv/bin/python scripts/bench_turns.py --json out/bench_turns.json

The pause set: caller utterances with a mid-sentence pause (a name after "my name is",
an order number read in groups, "um", "let me check", a sentence restarted) and
complete ones, spoken by piper's joe voice and two espeak-ng voices, as 8 kHz μ-law
phone audio. A paused utterance has 500-1,000 ms of silence at its "|", made one of two
ways (`--split`):

- `inside`: the whole sentence is spoken once and the silence is put inside
  it, at the quietest 10 ms within 100 ms of where the first half's words end (the first
  half's own length, scaled to the whole sentence's). The first half keeps the pitch of
  a sentence that goes on, as a caller who stops to think does;
- `halves` (default): the two halves are spoken separately: each half then ends with the
  falling pitch of a finished sentence, which is hard for a prosody model.

Each clip is streamed in real time, 20 ms at a time, through a fresh `Listener` (Silero
VAD, the turn detector, streaming Whisper and, for the semantic rule, Smart Turn v3.2
on the shared worker), once per rule:

- `fixed`: the turn ends after `[hearing] end_of_turn_silence_ms` (400 ms) of silence;
- `semantic`: Smart Turn v3.2 and the pause's words, `complete_silence_ms` (160) when
  finished, `incomplete_silence_ms` (1,200) when not;
- `semantic_audio` (with `--rules`): the same without the words check.

Per rule: `false_cutoffs` (share of paused utterances whose turn ended in the pause),
`delay_ms.{p50,p95}` (true end of speech to the turn's end, complete utterances) and
`delay_paused_ms` (the same for the paused ones' real end). The machine's load is
recorded: a shared 2-core CPU is noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speech_data import VOICES, feed_in_real_time, phone, synthesize, trim

from voice_agent.audio import PHONE_RATE_HZ
from voice_agent.events import Pcm16
from voice_agent.hearing.asr import AsrConfig, AsrWorker
from voice_agent.hearing.endpoint import SmartTurnModel, TurnModelWorker
from voice_agent.hearing.events import SpeechEnded
from voice_agent.hearing.listener import Listener
from voice_agent.hearing.turns import TurnConfig

# "|" marks the caller's pause.
PAUSED = (
    "My name is | Priya Nair.",
    "My order number is four two | seven nine one.",
    "I'd like to book a tune-up, um | for Thursday morning.",
    "Let me check | yes, Friday at ten works.",
    "Could you look at my | rear brakes?",
    "The phone number is five five five | two one nine eight.",
    "I was wondering if | you have any helmets.",
    "Can I come in on | Saturday morning?",
    "It's making a kind of | clicking noise when I pedal.",
    "My last name is | Okafor.",
    "I need a new chain and | maybe a cassette.",
    "Uh | I want to cancel my booking.",
)
COMPLETE = (
    "Can I book a tune-up for Friday?",
    "Yes, that works.",
    "No thanks.",
    "What time do you close today?",
    "My name is Priya Nair.",
    "Thanks, bye.",
    "Do you have the Zephyr Tourer in stock?",
    "I'd like to speak to a person.",
)
PAUSES_MS = (500, 650, 800, 1000)
CHUNK_MS, LEAD_MS, TRAIL_MS = 20, 400, 1600
_PER_MS = PHONE_RATE_HZ // 1000
RULES = {
    "fixed": TurnConfig(end_of_turn="silence"),
    "semantic": TurnConfig(end_of_turn="semantic"),
    "semantic_audio": TurnConfig(end_of_turn="semantic", check_words=False),
}


@dataclass(frozen=True)
class Clip:
    text: str
    voice: str
    stream: Pcm16  # 8 kHz: lead silence, speech (with its pause), trailing silence
    resume_ms: int | None  # where speech resumes after the pause (None: no pause)
    speech_end_ms: int


SPLITS = ("inside", "halves")
_SEARCH_MS = 100
_FRAME_MS = 10


def spoken_halves(text: str, voice: str, split: str) -> list[Pcm16]:
    """The utterance as 8 kHz phone audio: one piece, or two around the "|" pause."""
    parts = [p.strip() for p in text.split("|")]
    alone = [phone(trim(s), r) for s, r in (synthesize(p, voice) for p in parts)]
    if len(parts) == 1 or split == "halves":
        return alone
    samples, rate_hz = synthesize(" ".join(parts), voice)
    whole = phone(trim(samples), rate_hz)
    return cut_inside(whole, len(alone[0]) / (len(alone[0]) + len(alone[1])))


def cut_inside(whole: Pcm16, share: float) -> list[Pcm16]:
    """`whole` cut in two at its quietest 10 ms frame within `_SEARCH_MS` of `share` of
    its length (where the first half's words end, estimated from the halves' lengths)."""
    frame = _FRAME_MS * _PER_MS
    guess = round(len(whole) * share)
    lo = max(frame, guess - _SEARCH_MS * _PER_MS)
    hi = min(len(whole) - 2 * frame, guess + _SEARCH_MS * _PER_MS)
    starts = range(lo, max(lo + 1, hi), frame // 2)
    level = [float(np.abs(whole[t : t + frame].astype(np.int32)).mean()) for t in starts]
    cut = starts[int(np.argmin(level))] + frame // 2
    return [whole[:cut], whole[cut:]]


def build_clips(voices: tuple[str, ...], split: str = "halves") -> list[Clip]:
    clips = []
    for i, text in enumerate(PAUSED + COMPLETE):
        for j, voice in enumerate(voices):
            halves = spoken_halves(text, voice, split)
            parts = [np.zeros(LEAD_MS * _PER_MS, np.int16), halves[0]]
            resume_ms = None
            if len(halves) == 2:
                pause = PAUSES_MS[(i + j) % len(PAUSES_MS)]
                parts.append(np.zeros(pause * _PER_MS, np.int16))
                resume_ms = (sum(map(len, parts))) // _PER_MS
                parts.append(halves[1])
            end_ms = sum(map(len, parts)) // _PER_MS
            parts.append(np.zeros(TRAIL_MS * _PER_MS, np.int16))
            clips.append(Clip(text, voice, np.concatenate(parts), resume_ms, end_ms))
    return clips


async def stream_clip(
    asr: AsrWorker, model: TurnModelWorker, clip: Clip, turn: TurnConfig
) -> dict[str, Any]:
    listener = Listener(asr, PHONE_RATE_HZ, turn, end_of_turn=model)
    ends: list[tuple[SpeechEnded, float]] = []
    t0 = time.perf_counter()

    task = asyncio.ensure_future(
        feed_in_real_time(listener, clip.stream, PHONE_RATE_HZ, t0, CHUNK_MS)
    )
    async for event in listener:
        if isinstance(event, SpeechEnded):
            ends.append((event, (time.perf_counter() - t0) * 1000))
    await task
    cut = clip.resume_ms is not None and any(e.detected_ms < clip.resume_ms for e, _ in ends)
    return {
        "text": clip.text,
        "voice": clip.voice,
        "turns": len(ends),
        "cut_off": cut,
        "delay_ms": round(ends[-1][1] - clip.speech_end_ms, 1) if ends else None,
    }


def percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p95": None}
    return {q: round(float(np.percentile(values, int(q[1:]))), 1) for q in ("p50", "p95")}


def delays(rows: list[dict[str, Any]]) -> list[float]:
    return [r["delay_ms"] for r in rows if r["delay_ms"] is not None]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    voices = tuple(args.voices.split(",")) if args.voices else VOICES
    clips = build_clips(voices, args.split)
    if args.limit:
        clips = clips[: args.limit]
    asr = AsrWorker(
        AsrConfig(model=args.asr_model, cpu_threads=2, final_context_s=args.final_context_s)
    )
    model = TurnModelWorker(SmartTurnModel())
    load_before = os.getloadavg()
    result: dict[str, Any] = {
        "clips": len(clips),
        "paused": sum(c.resume_ms is not None for c in clips),
        "voices": list(voices),
        "asr_model": args.asr_model,
        "final_context_s": args.final_context_s,
        "split": args.split,
        "end_of_turn": {},
    }
    try:
        for name in args.rules.split(","):
            turn = RULES[name]
            if args.complete_silence_ms and turn.end_of_turn == "semantic":
                turn = replace(turn, complete_silence_ms=args.complete_silence_ms)
            rows = [await stream_clip(asr, model, clip, turn) for clip in clips]
            paused = [r for r, c in zip(rows, clips, strict=True) if c.resume_ms is not None]
            whole = [r for r, c in zip(rows, clips, strict=True) if c.resume_ms is None]
            result["end_of_turn"][name] = {
                "false_cutoffs": round(sum(r["cut_off"] for r in paused) / max(1, len(paused)), 3),
                "cut_off": sorted({f"{r['text']} ({r['voice']})" for r in paused if r["cut_off"]}),
                "delay_ms": percentiles(delays(whole)),
                "delay_paused_ms": percentiles(delays(paused)),
                "missed_turns": sum(r["turns"] == 0 for r in rows),
                "settings": {k: getattr(turn, k) for k in ("end_of_turn", "end_of_turn_silence_ms",
                             "complete_silence_ms", "incomplete_silence_ms", "check_words")},
            }  # fmt: skip
            print(name, json.dumps(result["end_of_turn"][name]), flush=True)
    finally:
        asr.close()
        model.close()
    stats = model.stats
    result["turn_model"] = {"questions": stats.questions, "batches": stats.batches,
                            "last_compute_ms": round(stats.last_compute_ms, 1)}  # fmt: skip
    result["load_avg"] = {"before": load_before, "after": os.getloadavg()}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument(
        "--rules", default="fixed,semantic", help=f"comma-separated, of {', '.join(RULES)}"
    )
    parser.add_argument("--voices", help=f"comma-separated (default {','.join(VOICES)})")
    parser.add_argument("--limit", type=int, default=0, help="only the first N clips (a smoke run)")
    parser.add_argument("--asr-model", default="tiny.en", choices=("tiny.en", "base"))
    parser.add_argument(
        "--final-context-s", type=float, default=0.0, help="[hearing] final_context_s (0: 30 s)"
    )
    parser.add_argument(
        "--complete-silence-ms", type=int, default=0,
        help="the semantic rules' [hearing] complete_silence_ms (0: the default, 160)",
    )  # fmt: skip
    parser.add_argument(
        "--split", default="halves", choices=SPLITS, help="how a pause is made (see above)"
    )
    args = parser.parse_args()
    if args.complete_silence_ms:
        try:
            TurnConfig(end_of_turn="semantic", complete_silence_ms=args.complete_silence_ms)
        except ValueError as exc:
            parser.error(f"--complete-silence-ms: {exc}")
    unknown = set(args.rules.split(",")) - set(RULES)
    if unknown:
        parser.error(f"unknown rules {sorted(unknown)}; choose from {', '.join(RULES)}")
    result = asyncio.run(run(args))
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
