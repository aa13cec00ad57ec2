"""A stand-in call session until the pipeline lands: it repeats what the caller said.

It is deliberately simple and fully real on the transport side: energy-based end of
turn, playback through the paced player with marks, barge-in with `clear`, a beep for
each DTMF key. The pipeline issue replaces it with the real agent.
"""

from __future__ import annotations

import numpy as np

from voice_agent.audio import rms_dbfs
from voice_agent.events import AudioReceived, CallStarted, CallStopped, DtmfReceived, Pcm16
from voice_agent.transports.call import Inbound
from voice_agent.transports.player import AudioPlayer

SPEECH_DBFS = -40.0
END_OF_TURN_MS = 500.0
MIN_SPEECH_MS = 200.0
BARGE_IN_MS = 200.0
MAX_ECHO_MS = 10_000.0
BEEP_HZ = 660.0
BEEP_MS = 150.0
BEEP_AMPLITUDE = 8000


def tone(
    freq_hz: float, duration_ms: float, rate_hz: int, amplitude: int = BEEP_AMPLITUDE
) -> Pcm16:
    """A sine tone with 5 ms fades (no clicks)."""
    n = int(rate_hz * duration_ms / 1000)
    t = np.arange(n) / rate_hz
    ramp = np.minimum(1.0, np.minimum(np.arange(n), np.arange(n)[::-1]) / (0.005 * rate_hz))
    return (amplitude * ramp * np.sin(2 * np.pi * freq_hz * t)).astype(np.int16)


class EchoSession:
    """Greets with a chime, replays each caller turn after 500 ms of silence."""

    def __init__(self, *, greet: bool = True) -> None:
        self._greet = greet
        self.turns = 0

    async def run(self, call: CallStarted, inbound: Inbound, player: AudioPlayer) -> None:
        rate = call.sample_rate_hz
        if self._greet:
            player.play(np.concatenate([tone(523, 120, rate), tone(784, 160, rate)]), rate)
        speech: list[Pcm16] = []
        speech_ms = silence_ms = 0.0
        async for event in inbound:
            if isinstance(event, CallStopped):
                return
            if isinstance(event, DtmfReceived):
                player.play(tone(BEEP_HZ, BEEP_MS, rate), rate)
                continue
            if not isinstance(event, AudioReceived):
                continue
            chunk_ms = 1000 * len(event.samples) / event.sample_rate_hz
            if rms_dbfs(event.samples) > SPEECH_DBFS:
                speech.append(event.samples)
                speech_ms += chunk_ms
                silence_ms = 0.0
                if speech_ms >= BARGE_IN_MS and player.speaking:
                    await player.clear()
            elif speech:
                silence_ms += chunk_ms
                speech.append(event.samples)
                if silence_ms >= END_OF_TURN_MS:
                    if speech_ms >= MIN_SPEECH_MS:
                        self.turns += 1
                        # Replay up to the last loud chunk, not the silence that ended the turn.
                        voiced = speech[: len(speech) - round(silence_ms / chunk_ms)]
                        utterance = np.concatenate(voiced)[: int(rate * MAX_ECHO_MS / 1000)]
                        player.play(utterance, event.sample_rate_hz)
                    speech, speech_ms, silence_ms = [], 0.0, 0.0
