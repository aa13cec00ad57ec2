"""Hearing the caller: VAD, turn detection and streaming speech recognition.

- `vad`: Silero v6 (ONNX, shipped in faster-whisper), streamed window by window.
- `turns`: sans-I/O turn detector (hysteresis, end-of-turn silence, barge-in).
- `models`, `asr`: Whisper models from installed packages; one shared model on a worker.
- `streaming`, `listener`: what to decode when, and the per-call async pipeline.

Importing this package is cheap: onnxruntime and faster-whisper load on first use.
"""

from voice_agent.hearing.events import (
    BargeIn,
    FinalTranscript,
    HearingEvent,
    PartialTranscript,
    PausedTranscript,
    SpeechEnded,
    SpeechStarted,
    TranscriptionFailed,
    TurnEvent,
)
from voice_agent.hearing.turns import TurnConfig, TurnDetector

__all__ = [
    "BargeIn",
    "FinalTranscript",
    "HearingEvent",
    "PartialTranscript",
    "PausedTranscript",
    "SpeechEnded",
    "SpeechStarted",
    "TranscriptionFailed",
    "TurnConfig",
    "TurnDetector",
    "TurnEvent",
]
