"""Benchmark speech synthesis: time to first audio and real-time factor, per engine.

    .venv/bin/python scripts/bench_tts.py --json out/bench_tts.json

For Piper's joe voice, hibari's heart voice and espeak-ng, on a short reply (one
sentence) and a long one (a long first sentence, then more): the synthesizer's time for
the whole text, its real-time factor (synthesis time / audio duration), and `speak()`'s
time to the first 8 kHz chunk (what the caller waits for; the splitter cuts a long first
sentence at a clause break). Medians of `--repeats` runs after one warm-up. The
machine's load is recorded: timings on a shared 2-core CPU are noisy.

`phone_wer` is how well each voice survives the phone line: eight agent replies are
spoken, sent through 8 kHz μ-law and transcribed by Whisper tiny.en; the word error rate
against the text (numbers normalized as in `speech_data.word_errors`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from speech_data import phone, word_errors

from voice_agent.audio import ASR_RATE_HZ, PHONE_RATE_HZ, pcm16_to_float32, resample
from voice_agent.hearing.asr import AsrConfig, decode, load_whisper
from voice_agent.speech.sentences import speakable
from voice_agent.speech.stream import speak
from voice_agent.speech.tts import (
    EspeakSynthesizer,
    HibariSynthesizer,
    PiperSynthesizer,
    Synthesizer,
)

PHONE_REPLIES = (
    "Your tune-up is booked for Thursday at half past two.",
    "We open at nine and close at six on Saturdays.",
    "The Zephyr Tourer is in stock for eight hundred forty-nine dollars.",
    "Order four zero two one three shipped yesterday.",
    "I can hold one for you until tomorrow evening.",
    "Sorry, I didn't catch that. Could you say it again?",
    "A brake bleed takes about forty-five minutes.",
    "Is there anything else I can help you with today?",
)
REPLIES = {
    "short": "Sure, I can book that for you.",
    "long": "Your bike is booked in for a full service on Friday at half past two, and it "
    "should be ready by five o'clock the same day. Anything else I can help with?",
}
_MS_PER_S = 1000.0


async def first_chunk_s(synth: Synthesizer, text: str) -> float:
    async def reply() -> AsyncIterator[str]:
        yield text

    start = time.perf_counter()
    stream = speak(reply(), synth, PHONE_RATE_HZ)
    await anext(stream)
    elapsed = time.perf_counter() - start
    await stream.aclose()
    return elapsed


def measure(synth: Synthesizer, text: str, repeats: int) -> dict[str, float]:
    synth.synthesize("Warm up.")
    synth_s, rtf, first_s = [], [], []
    for _ in range(repeats):
        start = time.perf_counter()
        samples = synth.synthesize(text)
        took = time.perf_counter() - start
        synth_s.append(took)
        rtf.append(took / (len(samples) / synth.sample_rate_hz))
        first_s.append(asyncio.run(first_chunk_s(synth, text)))
    return {
        "chars": len(text),
        "audio_s": round(len(samples) / synth.sample_rate_hz, 3),
        "synthesize_ms": round(statistics.median(synth_s) * _MS_PER_S, 1),
        "rtf": round(statistics.median(rtf), 4),
        "first_chunk_ms": round(statistics.median(first_s) * _MS_PER_S, 1),
    }


def phone_wer(synth: Synthesizer, model: Any, config: AsrConfig) -> dict[str, float]:
    errors = words = 0
    for text in PHONE_REPLIES:
        line = phone(synth.synthesize(speakable(text)), synth.sample_rate_hz)
        heard = decode(model, pcm16_to_float32(resample(line, PHONE_RATE_HZ, ASR_RATE_HZ)), config)
        wrong, total = word_errors(text, heard.text)
        errors, words = errors + wrong, words + total
    return {"wer": round(errors / words, 3), "words": words}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    piper = PiperSynthesizer()
    loaded = time.perf_counter()
    hibari = HibariSynthesizer()
    results: dict[str, Any] = {
        "load_avg_1m": os.getloadavg()[0],
        "piper_load_ms": round((loaded - start) * _MS_PER_S, 1),
        "hibari_load_ms": round((time.perf_counter() - loaded) * _MS_PER_S, 1),
    }
    config = AsrConfig(model="tiny.en", cpu_threads=2)
    whisper = load_whisper(config)
    for synth in (piper, hibari, EspeakSynthesizer()):
        results[synth.voice] = {
            name: measure(synth, text, args.repeats) for name, text in REPLIES.items()
        }
        results[synth.voice]["phone_wer"] = phone_wer(synth, whisper, config)
    results["hibari_vs_piper_first_chunk"] = {
        name: round(
            results[hibari.voice][name]["first_chunk_ms"]
            / results[piper.voice][name]["first_chunk_ms"],
            2,
        )
        for name in REPLIES
    }
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
