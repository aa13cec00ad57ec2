"""Benchmark hearing: streaming ASR accuracy and latency, end-of-turn and barge-in behaviour.

    .venv/bin/python scripts/bench_asr.py --json out/bench_asr.json

Builds a test set of caller utterances in the agent's domain (`speech_data.UTTERANCES`)
spoken by piper's joe voice and two espeak-ng voices, converted to 8 kHz μ-law, a third
of them with white noise at `--snr-db`. Each utterance is streamed in real time, 20 ms at
a time, through a fresh `Listener` (Silero VAD, turn detector, streaming Whisper on a
shared worker), as a call would be. Per model it reports:

- `wer`: word error rate of the final transcripts (normalized text), also split clean /
  noisy, and `wer_one_shot` of one decode of each whole utterance (the reference the
  streaming final must match);
- `final_latency_ms`: from the true end of speech to the final transcript (p50, p95);
- `end_of_turn_delay_ms`: from the true end of speech to the turn detector's decision;
- `rtf`: decode time of the final over the decoded audio's duration.

It also sweeps the end-of-turn silence (turns split inside an utterance vs. delay) and the
barge-in duration on backchannel clips ("mhm", "okay") vs. real interruptions. The
machine's load is recorded: timings on a shared 2-core CPU are noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speech_data import (
    BACKCHANNELS,
    INTERRUPTIONS,
    UTTERANCES,
    VOICES,
    feed_in_real_time,
    phone,
    synthesize,
    trim,
    word_errors,
)

from voice_agent.audio import PHONE_RATE_HZ, pcm16_to_float32, resample
from voice_agent.events import Pcm16
from voice_agent.hearing.asr import ASR_RATE_HZ, AsrConfig, AsrWorker, decode
from voice_agent.hearing.events import BargeIn, FinalTranscript, SpeechEnded
from voice_agent.hearing.listener import Listener
from voice_agent.hearing.streaming import StreamingConfig
from voice_agent.hearing.turns import TurnConfig, TurnDetector
from voice_agent.hearing.vad import SileroVad, VadFrame

CHUNK_MS = 20
LEAD_MS, TRAIL_MS = 600, 1500
EOT_SWEEP_MS = (200, 300, 400, 500, 700)
BARGE_IN_SWEEP_MS = (200, 300, 400, 500, 600, 800)
_SAMPLES_PER_MS = PHONE_RATE_HZ // 1000


@dataclass(frozen=True)
class Clip:
    text: str
    voice: str
    noisy: bool
    stream: Pcm16  # 8 kHz phone audio: lead silence, speech, trailing silence
    speech_start_ms: int
    speech_end_ms: int


def build_clips(texts: tuple[str, ...], snr_db: float, noisy_every: int, seed: int) -> list[Clip]:
    clips = []
    for i, text in enumerate(texts):
        for j, voice in enumerate(VOICES):
            samples, rate = synthesize(text, voice)
            speech = phone(trim(samples), rate)
            lead, trail = (np.zeros(ms * _SAMPLES_PER_MS, np.int16) for ms in (LEAD_MS, TRAIL_MS))
            stream = np.concatenate((lead, speech, trail))
            noisy = noisy_every > 0 and (i + j) % noisy_every == 0
            if noisy:
                stream = add_noise_like(stream, speech, snr_db, seed + i * 10 + j)
            end_ms = LEAD_MS + len(speech) // _SAMPLES_PER_MS
            clips.append(Clip(text, voice, noisy, stream, LEAD_MS, end_ms))
    return clips


def add_noise_like(stream: Pcm16, speech: Pcm16, snr_db: float, seed: int) -> Pcm16:
    """Noise over the whole stream at `snr_db` below the speech's level."""
    rms = float(np.sqrt(np.mean(speech.astype(np.float64) ** 2)))
    noise = np.random.default_rng(seed).normal(0.0, rms / 10 ** (snr_db / 20), len(stream))
    return np.clip(np.rint(stream + noise), -32768, 32767).astype(np.int16)


def percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p95": None}
    return {
        "p50": round(float(np.percentile(values, 50)), 1),
        "p95": round(float(np.percentile(values, 95)), 1),
    }


# ---------------------------------------------------------------- streaming, real time


async def stream_clip(
    worker: AsrWorker, clip: Clip, turn: TurnConfig, streaming: StreamingConfig
) -> dict[str, Any]:
    listener = Listener(worker, PHONE_RATE_HZ, turn, streaming)
    finals: list[tuple[FinalTranscript, float]] = []
    ends: list[SpeechEnded] = []
    partials = 0
    t0 = time.perf_counter()
    speech_end_wall = t0 + clip.speech_end_ms / 1000

    task = asyncio.ensure_future(
        feed_in_real_time(listener, clip.stream, PHONE_RATE_HZ, t0, CHUNK_MS)
    )
    async for event in listener:
        if isinstance(event, FinalTranscript):
            finals.append((event, time.perf_counter()))
        elif isinstance(event, SpeechEnded):
            ends.append(event)
        else:
            partials += type(event).__name__ == "PartialTranscript"
    await task
    text = " ".join(f.text for f, _ in finals)
    last = finals[-1] if finals else None
    return {
        "text": text,
        "turns": len(ends),
        "partials": partials,
        "final_latency_ms": (last[1] - speech_end_wall) * 1000 if last else None,
        "eot_delay_ms": ends[-1].detected_ms - clip.speech_end_ms if ends else None,
        "compute_ms": last[0].compute_ms if last else None,
        "decoded_ms": last[0].end_ms - last[0].start_ms if last else None,
    }


def bench_model(name: str, clips: list[Clip], args: argparse.Namespace) -> dict[str, Any]:
    config = AsrConfig(model=name, cpu_threads=args.cpu_threads, max_pending=4,
                       final_context_s=args.final_context_s)  # fmt: skip
    worker = AsrWorker(config)
    turn = TurnConfig(end_of_turn_silence_ms=args.eot_ms)
    streaming = StreamingConfig(partial_interval_ms=args.partial_ms)
    rows = []
    for i, clip in enumerate(clips):
        row = asyncio.run(stream_clip(worker, clip, turn, streaming))
        whole = resample(
            clip.stream[
                (clip.speech_start_ms - 200) * _SAMPLES_PER_MS : (clip.speech_end_ms + 200)
                * _SAMPLES_PER_MS
            ],
            PHONE_RATE_HZ,
            ASR_RATE_HZ,
        )
        row["one_shot"] = decode(worker._model, pcm16_to_float32(whole), config).text
        row.update(
            text_ref=clip.text,
            voice=clip.voice,
            noisy=clip.noisy,
            speech_ms=clip.speech_end_ms - clip.speech_start_ms,
        )
        rows.append(row)
        latency = row["final_latency_ms"]
        print(
            f"[{name} {i + 1}/{len(clips)}] {latency and round(latency)} ms  "
            f"{clip.voice:18} {row['text']!r}",
            flush=True,
        )
    worker.close()

    def wer(subset: list[dict[str, Any]], key: str = "text") -> float | None:
        errors = [word_errors(r["text_ref"], r[key]) for r in subset]
        total = sum(n for _, n in errors)
        return round(sum(e for e, _ in errors) / total, 4) if total else None

    done = [r for r in rows if r["final_latency_ms"] is not None]
    return {
        "wer": wer(rows),
        "wer_clean": wer([r for r in rows if not r["noisy"]]),
        "wer_noisy": wer([r for r in rows if r["noisy"]]),
        "wer_one_shot": wer(rows, "one_shot"),
        "wer_by_voice": {v: wer([r for r in rows if r["voice"] == v]) for v in VOICES},
        "final_latency_ms": percentiles([r["final_latency_ms"] for r in done]),
        "final_compute_ms": percentiles([r["compute_ms"] for r in done]),
        "end_of_turn_delay_ms": percentiles(
            [r["eot_delay_ms"] for r in rows if r["eot_delay_ms"] is not None]
        ),
        "rtf": round(sum(r["compute_ms"] for r in done) / sum(r["decoded_ms"] for r in done), 3)
        if done
        else None,
        "utterance_ms": percentiles([r["speech_ms"] for r in rows]),
        "missing_finals": len(rows) - len(done),
        "split_turns": sum(r["turns"] > 1 for r in rows),
        "partials_per_utterance": round(statistics.mean(r["partials"] for r in rows), 2),
        "rows": [
            {k: r[k] for k in ("voice", "noisy", "text_ref", "text", "one_shot", "turns")}
            | {k: r[k] and round(r[k]) for k in ("final_latency_ms", "compute_ms")}
            for r in rows
        ],
    }


# ---------------------------------------------------------------- VAD-only sweeps


def vad_frames(stream: Pcm16) -> list[VadFrame]:
    return SileroVad(PHONE_RATE_HZ).process(stream)


def eot_sweep(clips: list[Clip]) -> dict[str, Any]:
    frames = [vad_frames(c.stream) for c in clips]
    out = {}
    for eot in EOT_SWEEP_MS:
        split, missed, delays = 0, 0, []
        for clip, fr in zip(clips, frames, strict=True):
            detector = TurnDetector(TurnConfig(end_of_turn_silence_ms=eot))
            ends = [
                e
                for f in fr
                for e in detector.feed(f.probability, f.start_ms, f.end_ms)
                if isinstance(e, SpeechEnded)
            ]
            split += len(ends) > 1
            missed += not ends
            if ends:
                delays.append(ends[-1].detected_ms - clip.speech_end_ms)
        out[str(eot)] = {
            "split_utterances": split,
            "missed": missed,
            "delay_ms": percentiles(delays),
        }
    return out


def barge_in_sweep(snr_db: float, seed: int) -> dict[str, Any]:
    groups = {
        "backchannel": build_clips(BACKCHANNELS, snr_db, 0, seed),
        "interruption": build_clips(INTERRUPTIONS, snr_db, 0, seed),
    }
    frames = {k: [vad_frames(c.stream) for c in v] for k, v in groups.items()}
    out: dict[str, Any] = {"clips": {k: len(v) for k, v in groups.items()}}
    for barge_ms in BARGE_IN_SWEEP_MS:
        row: dict[str, Any] = {}
        for kind, clips in groups.items():
            hits, delays = 0, []
            for clip, fr in zip(clips, frames[kind], strict=True):
                detector = TurnDetector(TurnConfig(barge_in_ms=barge_ms))
                detector.set_agent_speaking(True)
                barge = [
                    e
                    for f in fr
                    for e in detector.feed(f.probability, f.start_ms, f.end_ms)
                    if isinstance(e, BargeIn)
                ]
                if barge:
                    hits += 1
                    delays.append(barge[0].detected_ms - clip.speech_start_ms)
            row[kind] = {
                "barge_ins": hits,
                "rate": round(hits / len(clips), 3),
                "delay_ms": percentiles(delays),
            }
        out[str(barge_ms)] = row
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", type=Path, required=True, help="where to write the results")
    parser.add_argument("--models", default="tiny.en,base")
    parser.add_argument(
        "--limit", type=int, default=0, help="use only the first N phrases (quick runs)"
    )
    parser.add_argument("--snr-db", type=float, default=15.0)
    parser.add_argument("--eot-ms", type=int, default=TurnConfig().end_of_turn_silence_ms)
    parser.add_argument("--partial-ms", type=int, default=StreamingConfig().partial_interval_ms)
    parser.add_argument("--cpu-threads", type=int, default=2)
    parser.add_argument(
        "--final-context-s", type=float, default=AsrConfig().final_context_s,
        help="[hearing] final_context_s: finals that fit it are decoded in it (0: 30 s)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    started = time.perf_counter()
    texts = UTTERANCES[: args.limit] if args.limit else UTTERANCES
    clips = build_clips(texts, args.snr_db, 3, args.seed)
    print(f"built {len(clips)} utterances in {time.perf_counter() - started:.0f} s", flush=True)
    result: dict[str, Any] = {
        "utterances": len(clips),
        "voices": list(VOICES),
        "noisy_utterances": sum(c.noisy for c in clips),
        "snr_db": args.snr_db,
        "settings": {
            "end_of_turn_silence_ms": args.eot_ms,
            "partial_interval_ms": args.partial_ms,
            "cpu_threads": args.cpu_threads,
            "beam_size": AsrConfig().beam_size,
            "final_context_s": args.final_context_s,
        },
        "machine": {"cpus": os.cpu_count(), "load_average_at_start": os.getloadavg()},
        "end_of_turn_sweep": eot_sweep(clips),
        "barge_in_sweep": barge_in_sweep(args.snr_db, args.seed),
        "models": {},
    }
    for name in args.models.split(","):
        result["models"][name] = bench_model(name, clips, args)
    result["machine"]["load_average_at_end"] = os.getloadavg()
    result["wall_s"] = round(time.perf_counter() - started, 1)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    summary = {
        k: {
            m: v[m]
            for m in ("wer", "wer_one_shot", "final_latency_ms", "end_of_turn_delay_ms", "rtf")
        }
        for k, v in result["models"].items()
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
