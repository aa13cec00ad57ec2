"""Streaming voice activity detection with the Silero v6 ONNX model shipped in faster-whisper.

The model reads 16 kHz audio in windows of 512 samples (32 ms) plus the 64 samples before
each window, and carries an LSTM state (`h`, `c`) from window to window. `SileroVad` keeps
that state and the context across calls, so feeding a call's audio in chunks of any size
gives the same probabilities as feeding it whole. Other input rates (8 kHz phone audio)
are resampled to 16 kHz first; the resampler compensates its delay, so frame times stay
on the input stream's clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voice_agent.audio import StreamResampler, pcm16_to_float32
from voice_agent.events import Pcm16

VAD_RATE_HZ = 16000
"""The only rate the shipped Silero model reads."""
WINDOW_SAMPLES = 512
"""Samples per model window at 16 kHz."""
WINDOW_MS = 32
"""Duration of one model window (512 samples at 16 kHz)."""
CONTEXT_SAMPLES = 64
"""Samples of the previous window the model sees before each window."""
MIN_RATE_HZ = 8000
"""Lowest input rate accepted (telephone audio)."""
SILERO_ASSET = "silero_vad_v6.onnx"
_STATE_SHAPE = (1, 1, 128)
_INSTALL_HINT = "install the `asr` extra: pip install -e '.[asr]' (faster-whisper, onnxruntime)"


@dataclass(frozen=True, slots=True)
class VadFrame:
    """The speech probability of one 32 ms window, `start_ms`..`end_ms` on the stream."""

    probability: float
    start_ms: int
    end_ms: int


def silero_model_path() -> Path:
    """The Silero ONNX file inside the installed faster-whisper package.

    Raises RuntimeError naming the package to install when it is missing.
    """
    try:
        import faster_whisper
    except ImportError as exc:
        raise RuntimeError(f"the VAD needs faster-whisper's Silero model: {_INSTALL_HINT}") from exc
    path = Path(faster_whisper.__file__).parent / "assets" / SILERO_ASSET
    if not path.is_file():
        raise RuntimeError(f"{path} is missing from the faster-whisper package; {_INSTALL_HINT}")
    return path


@lru_cache(maxsize=4)
def load_silero_session(path: Path | None = None) -> Any:
    """One ONNX session per model file, shared by every stream (it holds no stream state).

    Single-threaded: a 32 ms window costs well under a millisecond, and calls run side by
    side. Raises RuntimeError when onnxruntime or the model is missing.
    """
    try:
        import onnxruntime
    except ImportError as exc:
        raise RuntimeError(f"the VAD needs onnxruntime: {_INSTALL_HINT}") from exc
    options = onnxruntime.SessionOptions()
    options.inter_op_num_threads = 1
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    return onnxruntime.InferenceSession(
        str(path or silero_model_path()), providers=["CPUExecutionProvider"], sess_options=options
    )


def check_rate(sample_rate_hz: int) -> int:
    """Returns the rate as an int. Raises ValueError unless it is an integer >= 8000 Hz."""
    if isinstance(sample_rate_hz, bool) or not isinstance(sample_rate_hz, int | np.integer):
        raise ValueError(f"sample_rate_hz must be an integer, got {sample_rate_hz!r}")
    if sample_rate_hz < MIN_RATE_HZ:
        raise ValueError(f"hearing needs audio of at least {MIN_RATE_HZ} Hz, got {sample_rate_hz}")
    return int(sample_rate_hz)


class SileroVad:
    """Speech probabilities for one audio stream, window by window. Not thread-safe."""

    def __init__(self, sample_rate_hz: int, session: Any | None = None) -> None:
        """`session` defaults to the shared Silero session.

        Raises ValueError when `sample_rate_hz` is not an integer of at least 8000.
        """
        self._rate_hz = check_rate(sample_rate_hz)
        self._session = session if session is not None else load_silero_session()
        self._resampler = StreamResampler(self._rate_hz, VAD_RATE_HZ)
        self.reset()

    @property
    def sample_rate_hz(self) -> int:
        return self._rate_hz

    def reset(self) -> None:
        """Forget the stream: state, context, buffered samples and the frame count."""
        self._h: npt.NDArray[np.float32] = np.zeros(_STATE_SHAPE, np.float32)
        self._c: npt.NDArray[np.float32] = np.zeros(_STATE_SHAPE, np.float32)
        self._context: npt.NDArray[np.float32] = np.zeros(CONTEXT_SAMPLES, np.float32)
        self._pending: npt.NDArray[np.float32] = np.zeros(0, np.float32)
        self._windows_done = 0
        self._resampler = StreamResampler(self._rate_hz, VAD_RATE_HZ)

    def process(self, samples: Pcm16) -> list[VadFrame]:
        """Feed the next chunk (any length, empty included); returns the windows it completes.

        Raises TypeError/ValueError on samples that are not mono int16.
        """
        audio = pcm16_to_float32(self._resampler.process(samples))
        self._pending = np.concatenate((self._pending, audio))
        n_windows = len(self._pending) // WINDOW_SAMPLES
        if not n_windows:
            return []
        windows = self._pending[: n_windows * WINDOW_SAMPLES].reshape(n_windows, WINDOW_SAMPLES)
        self._pending = self._pending[n_windows * WINDOW_SAMPLES :]
        probabilities = self._run(windows)
        first = self._windows_done
        self._windows_done += n_windows
        return [
            VadFrame(float(p), (first + i) * WINDOW_MS, (first + i + 1) * WINDOW_MS)
            for i, p in enumerate(probabilities)
        ]

    def _run(self, windows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Run whole windows in one call; the model's LSTM steps along the batch axis."""
        previous = np.vstack((self._context[None, :], windows[:-1, -CONTEXT_SAMPLES:]))
        batch = np.hstack((previous, windows))  # (windows, 64 + 512)
        self._context = windows[-1, -CONTEXT_SAMPLES:].copy()
        probabilities, self._h, self._c = self._session.run(
            None, {"input": batch, "h": self._h, "c": self._c}
        )
        return np.asarray(probabilities, dtype=np.float32).reshape(-1)
