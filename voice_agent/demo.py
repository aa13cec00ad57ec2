"""The end-to-end demo call: a server on loopback, a simulated caller, a reply WAV.

Until the speech pipeline lands, the server answers with the echo stand-in session, so
the demo exercises the full phone bridge (codec, pacing, marks, barge-in) for real.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from voice_agent.config import Settings
from voice_agent.echo import EchoSession
from voice_agent.events import Pcm16
from voice_agent.simulator import CallSummary, simulate_call
from voice_agent.transports.server import TWILIO_PATH, VoiceServer
from voice_agent.wav import read_wav, write_wav

DEMO_LINES = ("Hi, I'd like to book a tune-up for tomorrow.", "My order number is 4 7 1 1.")
GAP_S = 3.5


def caller_audio(lines: tuple[str, ...] = DEMO_LINES) -> tuple[Pcm16, int]:
    """Caller lines spoken by espeak-ng with pauses between them.

    Raises RuntimeError naming the package when espeak-ng is not installed.
    """
    espeak = shutil.which("espeak-ng")
    if espeak is None:
        raise RuntimeError("espeak-ng not found: install the Debian package espeak-ng")
    parts: list[Pcm16] = []
    rate = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, line in enumerate(lines):
            path = Path(tmp) / f"line{i}.wav"
            subprocess.run([espeak, "-w", str(path), line], check=True, capture_output=True)
            samples, rate = read_wav(path)
            parts += [np.zeros(int(rate * GAP_S), np.int16), samples]
    parts.append(np.zeros(int(rate * 0.2), np.int16))
    return np.concatenate(parts), rate


async def run_demo(settings: Settings, out_dir: Path) -> CallSummary:
    """Serve on an ephemeral loopback port, place one call, write the WAVs."""
    local = settings.model_copy(
        update={"server": settings.server.model_copy(update={"host": "127.0.0.1", "port": 0})}
    )
    caller, rate = caller_audio()
    async with VoiceServer(local, EchoSession) as server:
        url = f"ws://127.0.0.1:{server.port}{TWILIO_PATH}"
        token = settings.auth.twilio_stream_token
        summary, reply = await simulate_call(
            url, caller, rate, token=token.get_secret_value() if token else None
        )
    write_wav(out_dir / "demo-caller.wav", caller, rate)
    write_wav(out_dir / "demo-reply.wav", reply, 8000)
    return summary
