"""Regenerate the short speech fixtures of the hearing tests (tests/fixtures/hearing/).

    .venv/bin/python scripts/make_hearing_fixtures.py [STEM ...]

Each fixture is one utterance, trimmed of the TTS engine's padding, as mono PCM16 WAV:
phone fixtures are 8 kHz after a G.711 μ-law round trip (what a Twilio call delivers),
the others 16 kHz. Needs the `tts` extra (piper) and Debian's espeak-ng. Piper samples
its prosody noise at random, so a rerun gives slightly different audio; the committed
WAVs are the ones the tests were checked against.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speech_data import phone, synthesize, trim

from voice_agent.audio import ASR_RATE_HZ, PHONE_RATE_HZ, resample
from voice_agent.wav import write_wav

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "hearing"
# (file stem, voice, text, phone audio?)
CLIPS = (
    (
        "appointment_piper_8k",
        "piper:joe",
        "Can I get an appointment for an oil change on Friday?",
        True,
    ),
    ("order_espeak_16k", "espeak:en-us", "My order number is four seven two nine.", False),
    ("okay_piper_8k", "piper:joe", "okay", True),
    ("zephyr_piper_8k", "piper:joe", "Do you have the Zephyr Tourer in stock?", True),
    # End-of-turn: the halves of a sentence with a pause, and a trailing-off start.
    ("myname_piper_8k", "piper:joe", "My name is", True),
    ("priya_piper_8k", "piper:joe", "Priya Nair.", True),
    ("tuneup_um_piper_8k", "piper:joe", "I'd like to book a tune-up, um", True),
)


def main() -> None:
    """All fixtures, or only the stems named on the command line."""
    FIXTURES.mkdir(parents=True, exist_ok=True)
    only = set(sys.argv[1:])
    for stem, voice, text, is_phone in CLIPS:
        if only and stem not in only:
            continue
        samples, rate = synthesize(text, voice)
        samples = trim(samples)
        if is_phone:
            samples, rate = phone(samples, rate), PHONE_RATE_HZ
        else:
            samples, rate = resample(samples, rate, ASR_RATE_HZ), ASR_RATE_HZ
        path = FIXTURES / f"{stem}.wav"
        write_wav(path, samples, rate)
        print(f"{path.name}: {len(samples) / rate:.2f} s at {rate} Hz  {text!r}")


if __name__ == "__main__":
    main()
