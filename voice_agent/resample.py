"""Low-latency sample-rate conversion: one polyphase FIR filter, used whole or streamed.

A rate change `in_rate_hz -> out_rate_hz` is the rational ratio up/down (8k -> 16k is 2/1,
22050 -> 8000 is 160/441): conceptually, insert `up - 1` zeros between input samples, low-pass
at the lower rate's Nyquist, keep every `down`-th sample. One linear-phase Kaiser FIR is
designed per ratio and shared by both paths, so `StreamResampler` fed in chunks of any size
matches `resample` of the whole signal to within rounding (1 LSB).

The filter's group delay is compensated: output sample `n` lies at time `n / out_rate_hz`,
like input sample `i` at `i / in_rate_hz`. The stream therefore emits output only once the
filter has seen the input it needs, which puts it `latency_ms` (about 4.3 ms with an 8 kHz
side, 2.1 ms with a 16 kHz one) behind the input; `flush` emits the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from math import ceil, gcd

import numpy as np
import numpy.typing as npt
from scipy import signal as sps

from voice_agent.events import Pcm16

PASSBAND_EDGE = 0.85
"""Highest frequency passed flat, as a fraction of the lower rate's Nyquist (3.4 kHz at 8k)."""
STOPBAND_EDGE = 1.0
"""Lowest frequency fully attenuated, as a fraction of the lower rate's Nyquist: nothing
that would fold back (downsampling) or mirror up (upsampling) escapes the stopband."""
STOPBAND_ATTENUATION_DB = 80.0
"""Kaiser design target, comfortably below what 16-bit quantization leaves audible."""

_PCM16_MIN, _PCM16_MAX = -32768, 32767
_MAX_OUTPUTS_PER_BLOCK = 4096  # bounds the (outputs, taps) gather when fed long chunks
_F64 = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class _PolyphaseFilter:
    """The low-pass for one up/down ratio, at the upsampled rate `in_rate * up`."""

    up: int
    down: int
    taps: _F64
    """Symmetric, odd length, scaled by `up` so zero-stuffing keeps the signal's level."""
    delay: int
    """Group delay in upsampled samples: `(len(taps) - 1) // 2`, a multiple of `down`."""
    bank: _F64
    """`(up, taps_per_phase)`: `bank[p, k] = taps[p + k * up]`, zero past the end."""


@lru_cache(maxsize=32)
def _design(up: int, down: int) -> _PolyphaseFilter:
    """Design the filter for `up/down` (already reduced); cached, arrays read-only."""
    widest = max(up, down)  # the lower rate's Nyquist is 1/widest of the upsampled one
    width = (STOPBAND_EDGE - PASSBAND_EDGE) / widest
    numtaps, beta = sps.kaiserord(STOPBAND_ATTENUATION_DB, width)
    # A delay on the output grid lets `resample` drop it by slicing upfirdn's output.
    delay = ceil(numtaps / 2 / down) * down
    cutoff = (PASSBAND_EDGE + STOPBAND_EDGE) / 2 / widest
    taps = sps.firwin(2 * delay + 1, cutoff, window=("kaiser", beta)) * up
    per_phase = ceil(len(taps) / up)
    bank = np.zeros(per_phase * up)
    bank[: len(taps)] = taps
    bank = np.ascontiguousarray(bank.reshape(per_phase, up).T)
    taps.setflags(write=False)
    bank.setflags(write=False)
    return _PolyphaseFilter(up, down, taps, delay, bank)


def _ratio(in_rate_hz: int, out_rate_hz: int) -> tuple[int, int]:
    in_rate_hz = _check_positive_int(in_rate_hz, "in_rate_hz")
    out_rate_hz = _check_positive_int(out_rate_hz, "out_rate_hz")
    common = gcd(in_rate_hz, out_rate_hz)
    return out_rate_hz // common, in_rate_hz // common


def _output_length(n_in: int, up: int, down: int) -> int:
    """`round(n_in * up / down)`, exact and half-to-even like Python's `round`."""
    return round(Fraction(n_in * up, down))


def _to_pcm16(values: _F64) -> Pcm16:
    return np.clip(np.rint(values), _PCM16_MIN, _PCM16_MAX).astype(np.int16)


def resample(samples: Pcm16, in_rate_hz: int, out_rate_hz: int) -> Pcm16:
    """Resample a whole signal; returns a new array aligned in time with the input.

    Output length is `round(len(samples) * out_rate_hz / in_rate_hz)` (half to even); the
    signal beyond either end is taken as silence. Raises ValueError on a rate that is not
    a positive integer, TypeError/ValueError on samples that are not mono int16.
    """
    up, down = _ratio(in_rate_hz, out_rate_hz)
    samples = _check_pcm16(samples)
    if up == down:
        return samples.copy()
    fir = _design(up, down)
    n_out = _output_length(len(samples), up, down)
    # Trailing zeros let upfirdn reach the last output's full filter span.
    padded = np.concatenate((samples.astype(np.float64), np.zeros(fir.bank.shape[1] + 1)))
    full = sps.upfirdn(fir.taps, padded, up, down)  # output n sits at full[n + delay/down]
    skip = fir.delay // down
    return _to_pcm16(full[skip : skip + n_out])


class StreamResampler:
    """Resample one continuous signal delivered in chunks of any size (empty included).

    Each `process` returns every output sample the input so far determines, so the output
    trails the input by only `latency_ms` plus under one output sample; no internal
    blocking. Concatenating every `process` result and the final `flush` equals `resample`
    of the whole signal to within 1 LSB. When the rates are equal it passes samples
    straight through with no delay.
    """

    def __init__(self, in_rate_hz: int, out_rate_hz: int) -> None:
        """Raises ValueError on a rate that is not a positive integer."""
        up, down = _ratio(in_rate_hz, out_rate_hz)
        self._in_rate_hz, self._out_rate_hz = int(in_rate_hz), int(out_rate_hz)
        self._fir = None if up == down else _design(up, down)
        self._n_in = 0  # input samples consumed; input index i is absolute, from 0
        self._n_out = 0  # index of the next output sample
        self._history_start = 0
        self._history: _F64 = np.zeros(0)  # input from index _history_start on
        self._reset()

    @property
    def in_rate_hz(self) -> int:
        return self._in_rate_hz

    @property
    def out_rate_hz(self) -> int:
        return self._out_rate_hz

    @property
    def latency_ms(self) -> float:
        """How far the output trails the input: the filter's look-ahead (0 when equal)."""
        if self._fir is None:
            return 0.0
        return 1000.0 * self._fir.delay / (self._in_rate_hz * self._fir.up)

    def process(self, samples: Pcm16) -> Pcm16:
        """Feed the next chunk; returns the output it completes (empty if none, a new array).

        Raises TypeError/ValueError on samples that are not mono int16; the stream is then
        unchanged.
        """
        samples = _check_pcm16(samples)
        if self._fir is None:
            return samples.copy()
        fir = self._fir
        self._history = np.concatenate((self._history, samples.astype(np.float64)))
        self._n_in += len(samples)
        # Output n needs input up to index (n * down + delay) // up.
        ready = (self._n_in * fir.up - 1 - fir.delay) // fir.down + 1
        return self._emit(max(ready, self._n_out))

    def flush(self) -> Pcm16:
        """End the signal: returns the remaining output and resets for a fresh signal.

        Brings the total output to `round(n_in * out_rate_hz / in_rate_hz)`, treating the
        input beyond its end as silence.
        """
        if self._fir is None:
            return np.zeros(0, dtype=np.int16)
        fir = self._fir
        stop = _output_length(self._n_in, fir.up, fir.down)
        if stop > self._n_out:
            needed = ((stop - 1) * fir.down + fir.delay) // fir.up + 1
            silence = np.zeros(max(0, needed - self._n_in))
            self._history = np.concatenate((self._history, silence))
        tail = self._emit(stop)
        self._reset()
        return tail

    def _reset(self) -> None:
        self._n_in = self._n_out = 0
        per_phase = 0 if self._fir is None else self._fir.bank.shape[1]
        # The first outputs' filter spans start before the signal: silence there.
        self._history_start = -per_phase
        self._history = np.zeros(per_phase)

    def _emit(self, stop: int) -> Pcm16:
        """Compute outputs `[_n_out, stop)` from the history, then drop unneeded input."""
        assert self._fir is not None
        fir = self._fir
        per_phase = fir.bank.shape[1]
        blocks = []
        for start in range(self._n_out, stop, _MAX_OUTPUTS_PER_BLOCK):
            n = np.arange(start, min(stop, start + _MAX_OUTPUTS_PER_BLOCK))
            position = n * fir.down + fir.delay  # in upsampled samples
            newest = position // fir.up - self._history_start  # (outputs,)
            window = newest[:, None] - np.arange(per_phase)  # (outputs, taps_per_phase)
            phase = position % fir.up
            blocks.append(np.einsum("ij,ij->i", fir.bank[phase], self._history[window]))
        self._n_out = max(stop, self._n_out)
        oldest_needed = (self._n_out * fir.down + fir.delay) // fir.up - per_phase + 1
        if oldest_needed > self._history_start:
            self._history = self._history[oldest_needed - self._history_start :]
            self._history_start = oldest_needed
        return _to_pcm16(np.concatenate(blocks)) if blocks else np.zeros(0, dtype=np.int16)


# The same checks as voice_agent.audio's; duplicated because audio re-exports this module.
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
