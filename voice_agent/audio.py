"""Audio primitives: G.711 μ-law, PCM16 byte and float conversion, resampling, framing, level.

Everything works on mono `Pcm16` arrays (1-D `int16`) and is vectorized with numpy. The
μ-law codec is bit-exact against CPython's `audioop.lin2ulaw` / `audioop.ulaw2lin`
(width 2), which the Twilio path relied on before `audioop` was removed in 3.13.
Resampling lives in `voice_agent.resample`; `resample` and `StreamResampler` are
re-exported here.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from voice_agent.events import Pcm16
from voice_agent.resample import StreamResampler as StreamResampler
from voice_agent.resample import resample as resample

PHONE_RATE_HZ = 8000
"""Telephone (G.711) sample rate."""
ASR_RATE_HZ = 16000
"""Sample rate the speech recognizer and VAD consume."""
FRAME_MS = 20
"""Duration of one wire / processing frame (Twilio sends 20 ms μ-law frames)."""
SILENCE_DBFS = -120.0
"""What `rms_dbfs` reports for digital silence (and empty input) instead of -inf."""

_MS_PER_S = 1000
_PCM16_FULL_SCALE = 32768.0  # |int16 min|; float ±1.0 maps to it
_PCM16_MIN, _PCM16_MAX = -32768, 32767

# G.711 μ-law constants, as in the ITU reference code CPython's audioop follows.
_ULAW_BIAS = 0x84  # added to the 16-bit magnitude before segmenting
_ULAW_CLIP_14BIT = 8159  # largest encodable magnitude in the 14-bit domain
_ULAW_SEG_END_14BIT = np.array([0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF])
_ULAW_SEGMENTS = 8
_ULAW_QUANT_MASK, _ULAW_SEG_MASK, _ULAW_SEG_SHIFT, _ULAW_SIGN_BIT = 0x0F, 0x70, 4, 0x80
_ULAW_MASK_POSITIVE = 0xFF  # μ-law transmits every bit inverted...
_ULAW_MASK_NEGATIVE = 0x7F  # ...except the sign bit of negative values
_ULAW_MAX_CODE = 0x7F
_PCM16_TO_14BIT_SHIFT = 2


def samples_per_frame(rate_hz: int, frame_ms: int = FRAME_MS) -> int:
    """Samples in one `frame_ms` frame at `rate_hz` (160 for 8 kHz, 20 ms).

    Raises ValueError when either argument is not a positive integer or the frame
    would not hold a whole number of samples.
    """
    rate_hz = _check_positive_int(rate_hz, "rate_hz")
    frame_ms = _check_positive_int(frame_ms, "frame_ms")
    samples, remainder = divmod(rate_hz * frame_ms, _MS_PER_S)
    if remainder:
        raise ValueError(f"a {frame_ms} ms frame at {rate_hz} Hz is not a whole number of samples")
    return samples


# ---------------------------------------------------------------- G.711 μ-law


def _ulaw_encode(pcm: npt.NDArray[np.int32]) -> npt.NDArray[np.uint8]:
    """Encode 16-bit sample values (held in int32) exactly as audioop.lin2ulaw does."""
    value = pcm >> _PCM16_TO_14BIT_SHIFT  # arithmetic shift: floors negatives, like C
    negative = value < 0
    mask = np.where(negative, _ULAW_MASK_NEGATIVE, _ULAW_MASK_POSITIVE)
    magnitude = np.minimum(np.abs(value), _ULAW_CLIP_14BIT) + (_ULAW_BIAS >> 2)
    segment = np.searchsorted(_ULAW_SEG_END_14BIT, magnitude, side="left")
    mantissa = (magnitude >> (segment + 1)) & _ULAW_QUANT_MASK
    code = np.where(
        segment >= _ULAW_SEGMENTS,
        _ULAW_MAX_CODE,
        (segment << _ULAW_SEG_SHIFT) | mantissa,
    )
    return (code ^ mask).astype(np.uint8)


def _ulaw_decode(codes: npt.NDArray[np.int32]) -> npt.NDArray[np.int16]:
    """Decode μ-law codes (0..255, held in int32) exactly as audioop.ulaw2lin does."""
    u = ~codes & 0xFF
    t = ((u & _ULAW_QUANT_MASK) << 3) + _ULAW_BIAS
    t <<= (u & _ULAW_SEG_MASK) >> _ULAW_SEG_SHIFT
    return np.where(u & _ULAW_SIGN_BIT, _ULAW_BIAS - t, t - _ULAW_BIAS).astype(np.int16)


# Indexed by the sample's bit pattern read as uint16, so encoding is one gather.
_ULAW_ENCODE_TABLE = _ulaw_encode(
    np.arange(1 << 16, dtype=np.uint16).view(np.int16).astype(np.int32)
)
_ULAW_DECODE_TABLE = _ulaw_decode(np.arange(1 << 8, dtype=np.int32))


def pcm16_to_ulaw(samples: Pcm16) -> bytes:
    """Encode PCM16 samples as G.711 μ-law, one byte per sample (no resampling)."""
    samples = _check_pcm16(samples)
    return _ULAW_ENCODE_TABLE[samples.view(np.uint16)].tobytes()


def ulaw_to_pcm16(data: bytes) -> Pcm16:
    """Decode G.711 μ-law bytes into a new PCM16 array, one sample per byte."""
    return _ULAW_DECODE_TABLE[np.frombuffer(data, dtype=np.uint8)]


# ---------------------------------------------------------------- PCM16 conversions


def pcm16_to_bytes(samples: Pcm16) -> bytes:
    """Serialize samples as PCM16 little-endian (two bytes per sample)."""
    return _check_pcm16(samples).astype("<i2", copy=False).tobytes()


def bytes_to_pcm16(data: bytes) -> Pcm16:
    """Parse PCM16 little-endian bytes into a new native-order array.

    Raises ValueError when `len(data)` is odd (a torn sample).
    """
    if len(data) % 2:
        raise ValueError(
            f"PCM16 data must hold whole 2-byte samples; got {len(data)} bytes (odd length)"
        )
    return np.frombuffer(data, dtype="<i2").astype(np.int16)


def pcm16_to_float32(samples: Pcm16) -> npt.NDArray[np.float32]:
    """Scale samples to float32 in [-1.0, 1.0): the value divided by 32768."""
    return _check_pcm16(samples).astype(np.float32) / np.float32(_PCM16_FULL_SCALE)


def float32_to_pcm16(samples: npt.NDArray[np.floating]) -> Pcm16:
    """Scale floats in [-1.0, 1.0] to PCM16, rounding to nearest and clipping overshoot.

    Raises ValueError when any value is NaN.
    """
    scaled = np.asarray(samples, dtype=np.float64) * _PCM16_FULL_SCALE
    if np.isnan(scaled).any():
        raise ValueError("cannot convert NaN samples to PCM16")
    return np.clip(np.rint(scaled), _PCM16_MIN, _PCM16_MAX).astype(np.int16)


# ---------------------------------------------------------------- framing and level


class Framer:
    """Cut a stream of arbitrarily sized chunks into frames of exactly `frame_samples`."""

    def __init__(self, frame_samples: int) -> None:
        """Raises ValueError when `frame_samples` is not a positive integer."""
        self._frame_samples = _check_positive_int(frame_samples, "frame_samples")
        self._pending: Pcm16 = np.zeros(0, dtype=np.int16)

    @property
    def pending_samples(self) -> int:
        """Samples held back until the next push completes a frame."""
        return len(self._pending)

    def push(self, samples: Pcm16) -> list[Pcm16]:
        """Append samples; returns every frame now complete, oldest first (maybe none).

        The frames are new arrays: later changes to `samples` do not affect them.
        """
        buffer = np.concatenate((self._pending, _check_pcm16(samples)))
        n_frames = len(buffer) // self._frame_samples
        n_framed = n_frames * self._frame_samples
        self._pending = buffer[n_framed:].copy()
        return list(buffer[:n_framed].reshape(n_frames, self._frame_samples))

    def flush(self, pad: bool = True) -> Pcm16 | None:
        """Return the held-back partial frame (zero-padded to full size when `pad`).

        Returns None when nothing is pending. The framer is empty afterwards.
        """
        if not len(self._pending):
            return None
        tail, self._pending = self._pending, np.zeros(0, dtype=np.int16)
        if pad:
            tail = np.pad(tail, (0, self._frame_samples - len(tail)))
        return tail


def rms_dbfs(samples: Pcm16) -> float:
    """RMS level in dB relative to full scale 32768 (a full-scale square wave is 0 dBFS,
    a full-scale sine about -3 dBFS); silence and empty input give `SILENCE_DBFS`."""
    samples = _check_pcm16(samples)
    if not len(samples):
        return SILENCE_DBFS
    mean_square = float(np.mean(np.square(samples, dtype=np.float64)))
    if mean_square == 0.0:
        return SILENCE_DBFS
    level = 10.0 * np.log10(mean_square / _PCM16_FULL_SCALE**2)
    return max(float(level), SILENCE_DBFS)


# ---------------------------------------------------------------- validation


def _check_pcm16(samples: Pcm16) -> Pcm16:
    if not isinstance(samples, np.ndarray) or samples.dtype != np.int16:
        got = getattr(samples, "dtype", type(samples).__name__)
        raise TypeError(f"expected a numpy int16 array of PCM16 samples, got {got}")
    if samples.ndim != 1:
        raise ValueError(f"expected mono (1-D) PCM16 samples, got shape {samples.shape}")
    return samples


def _check_positive_int(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)
