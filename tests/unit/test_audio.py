"""Unit tests for voice_agent.audio: μ-law, PCM16 conversions, resampling, framing, level."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from voice_agent.audio import (
    ASR_RATE_HZ,
    PHONE_RATE_HZ,
    SILENCE_DBFS,
    Framer,
    StreamResampler,
    bytes_to_pcm16,
    float32_to_pcm16,
    pcm16_to_bytes,
    pcm16_to_float32,
    pcm16_to_ulaw,
    resample,
    rms_dbfs,
    samples_per_frame,
    ulaw_to_pcm16,
)
from voice_agent.events import Pcm16

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import audioop

ALL_PCM16 = np.arange(-32768, 32768, dtype=np.int16)
ALL_ULAW_CODES = bytes(range(256))
ULAW_NEGATIVE_ZERO = 0x7F  # decodes to 0, which re-encodes as positive zero 0xFF
ULAW_MAX_MAGNITUDE = 32124
RESAMPLE_PAIRS = [(8000, 16000), (16000, 8000), (22050, 8000), (24000, 16000), (8000, 22050)]


def tone(freq_hz: float, rate_hz: int, duration_s: float, amplitude: float = 0.5) -> Pcm16:
    t = np.arange(round(rate_hz * duration_s)) / rate_hz
    return float32_to_pcm16(amplitude * np.sin(2 * np.pi * freq_hz * t))


def peak_frequency_hz(samples: Pcm16, rate_hz: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    freqs = np.fft.rfftfreq(len(samples), 1 / rate_hz)
    return float(freqs[np.argmax(spectrum)])


def stream_in_frames(signal: Pcm16, in_rate_hz: int, out_rate_hz: int) -> Pcm16:
    """The streaming path: 20 ms chunks through a StreamResampler, then flush."""
    stream = StreamResampler(in_rate_hz, out_rate_hz)
    chunk = samples_per_frame(in_rate_hz)
    pieces = [stream.process(signal[i : i + chunk]) for i in range(0, len(signal), chunk)]
    return np.concatenate([*pieces, stream.flush()])


RESAMPLE_PATHS = {"one_shot": resample, "stream": stream_in_frames}


# ---------------------------------------------------------------- μ-law


def test_ulaw_encode_bit_exact_against_audioop_for_every_pcm16_value() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        expected = audioop.lin2ulaw(ALL_PCM16.astype("<i2").tobytes(), 2)
    assert pcm16_to_ulaw(ALL_PCM16) == expected


def test_ulaw_decode_bit_exact_against_audioop_for_every_code() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        expected = np.frombuffer(audioop.ulaw2lin(ALL_ULAW_CODES, 2), dtype="<i2")
    decoded = ulaw_to_pcm16(ALL_ULAW_CODES)
    assert decoded.dtype == np.int16
    np.testing.assert_array_equal(decoded, expected)


def test_ulaw_code_roundtrip_is_identity_except_negative_zero() -> None:
    reencoded = pcm16_to_ulaw(ulaw_to_pcm16(ALL_ULAW_CODES))
    for code, back in zip(ALL_ULAW_CODES, reencoded, strict=True):
        assert back == (0xFF if code == ULAW_NEGATIVE_ZERO else code)


def test_ulaw_pcm_roundtrip_error_is_within_quantization_step() -> None:
    decoded = ulaw_to_pcm16(pcm16_to_ulaw(ALL_PCM16)).astype(np.int64)
    original = ALL_PCM16.astype(np.int64)
    in_range = np.abs(original) <= ULAW_MAX_MAGNITUDE
    error = np.abs(decoded - original)[in_range]
    # μ-law steps grow with magnitude: about 1/16 of it, so half a step is ~1/32.
    assert np.all(error <= np.abs(original[in_range]) / 32 + 8)
    assert np.all(np.diff(decoded) >= 0), "decoded levels must be monotonic in the input"
    assert np.abs(decoded).max() == ULAW_MAX_MAGNITUDE


def test_ulaw_empty_and_non_int16_input() -> None:
    assert pcm16_to_ulaw(np.zeros(0, dtype=np.int16)) == b""
    assert ulaw_to_pcm16(b"").shape == (0,)
    with pytest.raises(TypeError, match="int16"):
        pcm16_to_ulaw(np.zeros(4, dtype=np.float32))


# ---------------------------------------------------------------- PCM16 conversions


def test_pcm16_bytes_are_little_endian_and_roundtrip() -> None:
    samples = np.array([1, -2, 32767, -32768], dtype=np.int16)
    data = pcm16_to_bytes(samples)
    assert data == b"\x01\x00\xfe\xff\xff\x7f\x00\x80"
    np.testing.assert_array_equal(bytes_to_pcm16(data), samples)


def test_bytes_to_pcm16_odd_length_raises() -> None:
    with pytest.raises(ValueError, match="odd length"):
        bytes_to_pcm16(b"\x01\x00\x02")


def test_float32_to_pcm16_rounds_and_clips() -> None:
    floats = np.array([0.0, 1.0, -1.0, 2.0, -3.0, 0.6 / 32768, -0.6 / 32768], dtype=np.float64)
    np.testing.assert_array_equal(
        float32_to_pcm16(floats), np.array([0, 32767, -32768, 32767, -32768, 1, -1])
    )
    with pytest.raises(ValueError, match="NaN"):
        float32_to_pcm16(np.array([np.nan], dtype=np.float32))


def test_pcm16_float_roundtrip_is_lossless() -> None:
    floats = pcm16_to_float32(ALL_PCM16)
    assert floats.dtype == np.float32
    assert floats.min() == -1.0 and floats.max() < 1.0
    np.testing.assert_array_equal(float32_to_pcm16(floats), ALL_PCM16)


def test_samples_per_frame() -> None:
    assert samples_per_frame(PHONE_RATE_HZ) == 160
    assert samples_per_frame(ASR_RATE_HZ) == 320
    assert samples_per_frame(22050) == 441
    assert samples_per_frame(24000, frame_ms=10) == 240
    with pytest.raises(ValueError, match="whole number"):
        samples_per_frame(11025, frame_ms=2)
    with pytest.raises(ValueError, match="positive"):
        samples_per_frame(0)


# ---------------------------------------------------------------- resampling


@pytest.mark.parametrize(("in_rate_hz", "out_rate_hz"), RESAMPLE_PAIRS)
def test_stream_resampler_matches_one_shot_without_clicks(
    in_rate_hz: int, out_rate_hz: int
) -> None:
    signal = tone(440.0, in_rate_hz, 1.0, amplitude=0.8)
    expected = resample(signal, in_rate_hz, out_rate_hz)
    assert len(expected) == round(len(signal) * out_rate_hz / in_rate_hz)

    stream = StreamResampler(in_rate_hz, out_rate_hz)
    chunk = samples_per_frame(in_rate_hz)
    pieces = [stream.process(signal[i : i + chunk]) for i in range(0, len(signal), chunk)]
    pieces.append(stream.flush())
    streamed = np.concatenate(pieces)

    assert streamed.dtype == np.int16
    assert len(streamed) == len(expected)
    assert np.abs(streamed.astype(np.int32) - expected).max() <= 1

    # Filter transients at the very start and end of the signal are not chunk artifacts.
    edge = samples_per_frame(out_rate_hz)
    jumps = np.abs(np.diff(streamed.astype(np.int32)))[edge:-edge]
    joins = np.cumsum([len(p) for p in pieces if len(p)]) - 1 - edge
    joins = joins[(joins >= 0) & (joins < len(jumps))]
    assert len(joins) > 1, "the stream should have produced several output chunks"
    # A smooth 440 Hz sine moves at most its peak slope per sample: no clicks anywhere,
    # in particular not where one output chunk meets the next.
    max_slope = 0.8 * 32768 * 2 * np.pi * 440 / out_rate_hz
    assert jumps[joins].max() <= max_slope * 1.02
    assert jumps.max() <= max_slope * 1.02


def test_stream_resampler_flush_resets_for_a_fresh_signal() -> None:
    signal = tone(300.0, PHONE_RATE_HZ, 0.2)
    stream = StreamResampler(PHONE_RATE_HZ, ASR_RATE_HZ)
    first = np.concatenate([stream.process(signal), stream.flush()])
    second = np.concatenate([stream.process(signal), stream.flush()])
    np.testing.assert_array_equal(first, second)


def test_equal_rates_pass_through() -> None:
    signal = tone(300.0, ASR_RATE_HZ, 0.05)
    stream = StreamResampler(ASR_RATE_HZ, ASR_RATE_HZ)
    np.testing.assert_array_equal(stream.process(signal), signal)
    assert len(stream.flush()) == 0
    np.testing.assert_array_equal(resample(signal, ASR_RATE_HZ, ASR_RATE_HZ), signal)


@pytest.mark.parametrize("bad_rate", [0, -8000, 8000.0, True])
def test_invalid_rates_raise(bad_rate: int) -> None:
    with pytest.raises(ValueError, match="positive integer"):
        StreamResampler(bad_rate, ASR_RATE_HZ)
    with pytest.raises(ValueError, match="positive integer"):
        resample(np.zeros(10, dtype=np.int16), PHONE_RATE_HZ, bad_rate)


@pytest.mark.parametrize("path", RESAMPLE_PATHS)
@pytest.mark.parametrize(
    ("in_rate_hz", "out_rate_hz"), [(PHONE_RATE_HZ, ASR_RATE_HZ), (ASR_RATE_HZ, PHONE_RATE_HZ)]
)
def test_in_band_tone_keeps_frequency_and_level(
    path: str, in_rate_hz: int, out_rate_hz: int
) -> None:
    signal = tone(1000.0, in_rate_hz, 1.0)
    out = RESAMPLE_PATHS[path](signal, in_rate_hz, out_rate_hz)
    assert abs(peak_frequency_hz(out, out_rate_hz) - 1000.0) <= 2.0
    assert abs(rms_dbfs(out) - rms_dbfs(signal)) < 0.5


@pytest.mark.parametrize("path", RESAMPLE_PATHS)
@pytest.mark.parametrize("in_rate_hz", [ASR_RATE_HZ, 24000])
def test_out_of_band_tone_is_filtered_not_aliased(path: str, in_rate_hz: int) -> None:
    signal = tone(6000.0, in_rate_hz, 1.0)
    # Plain decimation would fold 6 kHz down to 2 kHz at full level.
    out = RESAMPLE_PATHS[path](signal, in_rate_hz, PHONE_RATE_HZ)
    assert rms_dbfs(signal) - rms_dbfs(out) > 40.0


@pytest.mark.parametrize(("in_rate_hz", "out_rate_hz"), RESAMPLE_PAIRS)
def test_stream_in_random_chunks_matches_one_shot(in_rate_hz: int, out_rate_hz: int) -> None:
    rng = np.random.default_rng(in_rate_hz + out_rate_hz)
    # Full-band noise reaches every filter phase and, near full scale, the clipping.
    signal = rng.integers(-30000, 30000, in_rate_hz // 2, dtype=np.int16)
    sizes = rng.choice(
        [0, 1, 2, 7, 160, 441, 1000], len(signal), p=[0.3, 0.3, 0.1, 0.1, 0.1, 0.05, 0.05]
    )
    starts = np.cumsum(sizes) - sizes
    chunks = [signal[i : i + n] for i, n in zip(starts, sizes, strict=True) if i < len(signal)]
    assert any(not len(c) for c in chunks) and any(len(c) == 1 for c in chunks)
    stream = StreamResampler(in_rate_hz, out_rate_hz)
    pieces = [stream.process(c) for c in chunks]
    streamed = np.concatenate([*pieces, stream.flush()])

    expected = resample(signal, in_rate_hz, out_rate_hz)
    assert len(streamed) == len(expected) == round(len(signal) * out_rate_hz / in_rate_hz)
    assert np.abs(streamed.astype(np.int32) - expected).max() <= 1


@pytest.mark.parametrize(("in_rate_hz", "out_rate_hz"), RESAMPLE_PAIRS)
def test_stream_output_trails_input_by_under_10_ms(in_rate_hz: int, out_rate_hz: int) -> None:
    stream = StreamResampler(in_rate_hz, out_rate_hz)
    chunk = samples_per_frame(in_rate_hz)
    signal = tone(440.0, in_rate_hz, 0.5)
    n_in = n_out = 0
    for start in range(0, len(signal), chunk):
        n_in += len(signal[start : start + chunk])
        n_out += len(stream.process(signal[start : start + chunk]))
        assert n_out >= (n_in / in_rate_hz - 0.010) * out_rate_hz
        assert n_out <= n_in * out_rate_hz / in_rate_hz  # never ahead of the input
    assert stream.latency_ms < 10.0


@pytest.mark.parametrize(("in_rate_hz", "out_rate_hz"), RESAMPLE_PAIRS)
def test_filter_delay_is_compensated(in_rate_hz: int, out_rate_hz: int) -> None:
    # A click at 100 ms in the input peaks at 100 ms in the output, on both paths.
    click = np.zeros(in_rate_hz // 5, dtype=np.int16)
    click[in_rate_hz // 10] = 20000
    for path in RESAMPLE_PATHS.values():
        out = path(click, in_rate_hz, out_rate_hz)
        assert abs(int(np.argmax(out)) - out_rate_hz // 10) <= 1


# ---------------------------------------------------------------- framing and level


def test_framer_cuts_odd_chunks_into_exact_frames() -> None:
    frame = samples_per_frame(PHONE_RATE_HZ)
    signal = np.random.default_rng(0).integers(-32768, 32768, 5 * frame + 37, dtype=np.int16)
    framer = Framer(frame)
    frames: list[Pcm16] = []
    start = 0
    for size in [7, 159, 1, 333, 0, 161, 100]:
        frames.extend(framer.push(signal[start : start + size]))
        start += size
    frames.extend(framer.push(signal[start:]))

    assert all(len(f) == frame and f.dtype == np.int16 for f in frames)
    assert len(frames) == 5 and framer.pending_samples == 37
    np.testing.assert_array_equal(np.concatenate(frames), signal[: 5 * frame])

    signal[:] = 0  # frames must not alias the caller's buffer
    assert np.concatenate(frames).any()


def test_framer_flush_pads_with_zeros_and_empties() -> None:
    framer = Framer(160)
    assert framer.push(np.arange(1, 51, dtype=np.int16)) == []
    tail = framer.flush()
    assert tail is not None and len(tail) == 160
    np.testing.assert_array_equal(tail[:50], np.arange(1, 51))
    assert not tail[50:].any()
    assert framer.pending_samples == 0
    assert framer.flush() is None


def test_framer_flush_without_padding_returns_partial() -> None:
    framer = Framer(160)
    framer.push(np.ones(30, dtype=np.int16))
    tail = framer.flush(pad=False)
    assert tail is not None and len(tail) == 30
    with pytest.raises(ValueError, match="positive integer"):
        Framer(0)


def test_rms_dbfs_levels() -> None:
    assert rms_dbfs(np.zeros(160, dtype=np.int16)) == SILENCE_DBFS
    assert rms_dbfs(np.zeros(0, dtype=np.int16)) == SILENCE_DBFS
    square = np.array([-32768, -32768], dtype=np.int16)
    assert rms_dbfs(square) == pytest.approx(0.0)
    assert rms_dbfs(tone(1000.0, PHONE_RATE_HZ, 1.0, amplitude=0.5)) == pytest.approx(
        -3.01 - 6.02, abs=0.05
    )
