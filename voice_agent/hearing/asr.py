"""Speech recognition with faster-whisper: one shared model, decoded on a worker thread.

`load_whisper` loads a model once per (name, device, compute type) from the installed
packages (`voice_agent.hearing.models`), with `local_files_only=True`. `decode` is the
blocking transcription of one buffer, `decode_batch` of several calls' buffers in one
encoder pass and one batched decode; `AsrWorker` runs decodes on a single worker thread
behind a bounded queue, finals before partials, batching what waits together, so the
event loop never waits on the model.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from voice_agent.hearing.models import locate_model

AudioF32 = npt.NDArray[np.float32]
"""Mono 16 kHz float32 samples in [-1, 1), what Whisper reads."""
ASR_RATE_HZ = 16000
LANGUAGE = "en"
_INSTALL_HINT = "install the `asr` extra: pip install -e '.[asr]'"
_MEL_FRAMES_PER_S = 100  # Whisper's feature hop is 10 ms
_SAMPLES_PER_MEL_FRAME = ASR_RATE_HZ // _MEL_FRAMES_PER_S
# A partial's token budget: generous for speech (3-6 tokens/s), short enough to stop a
# decoder that starts repeating itself.
_MAX_TOKENS_BASE, _MAX_TOKENS_PER_S = 40, 10
WHISPER_WINDOW_S = 30.0
"""Whisper's own encoder window: what a final uses unless `final_context_s` is set."""
_MAX_DECODE_TOKENS = 448


@dataclass(frozen=True, slots=True)
class AsrConfig:
    """How to load and run the recognizer.

    `compute_type` "auto" means int8 on CPU and float16 on CUDA. `initial_prompt` and
    `hotwords` bias recognition toward the tool pack's vocabulary (shop and product
    names). `max_pending` bounds the decodes queued or running on the worker.
    `partial_context_s` is the encoder window of partial decodes (see `decode`).
    """

    model: Literal["tiny.en", "base"] = "tiny.en"
    device: Literal["cpu", "cuda"] = "cpu"
    compute_type: str = "auto"
    cpu_threads: int = 0
    beam_size: int = 1
    initial_prompt: str | None = None
    hotwords: str | None = None
    max_pending: int = 4
    cache_dir: Path | None = None
    partial_context_s: float = 10.0
    final_context_s: float = 0.0
    """0: finals use Whisper's full 30 s window. Otherwise a final of a turn that fits
    this shorter window is decoded in it, as partials are: about half the CPU at 20 s."""
    max_batch: int = 4
    """Decodes of one kind and window that wait together run as one batch (1: one by
    one). A batch costs its longest member's window for each, so a final never waits for
    a partial's batch, nor a short window's batch for a 30 s one."""

    def window_s(self, samples: int, partial: bool) -> float:
        """The encoder window a decode of `samples` (16 kHz) uses."""
        if partial:
            return self.partial_context_s
        if self.final_context_s > 0 and samples <= self.final_context_s * ASR_RATE_HZ:
            return self.final_context_s
        return WHISPER_WINDOW_S

    @property
    def resolved_compute_type(self) -> str:
        if self.compute_type != "auto":
            return self.compute_type
        return "float16" if self.device == "cuda" else "int8"


@dataclass(frozen=True, slots=True)
class Decoded:
    """One decode's text and its wall-clock compute time in milliseconds."""

    text: str
    compute_ms: float


class AsrOverloadedError(RuntimeError):
    """The worker's queue is full; the caller should degrade (e.g. apologize), not wait."""


def load_whisper(config: AsrConfig) -> Any:
    """The shared faster-whisper model for `config` (loaded on first call, then cached).

    Raises ModelNotInstalledError naming a missing model package, RuntimeError when
    faster-whisper itself is missing.
    """
    return _load(
        config.model,
        config.device,
        config.resolved_compute_type,
        config.cpu_threads,
        config.cache_dir,
    )


@lru_cache(maxsize=4)
def _load(
    name: str, device: str, compute_type: str, cpu_threads: int, cache_dir: Path | None
) -> Any:
    try:
        from faster_whisper import WhisperModel
    except ImportError as exc:
        raise RuntimeError(f"speech recognition needs faster-whisper: {_INSTALL_HINT}") from exc
    folder = locate_model(name, cache_dir)
    return WhisperModel(
        str(folder),
        device=device,
        compute_type=compute_type,
        cpu_threads=cpu_threads,
        local_files_only=True,
    )


def decode(model: Any, audio: AudioF32, config: AsrConfig, partial: bool = False) -> Decoded:
    """Transcribe 16 kHz float32 audio in one blocking call (runs on any thread).

    A final (`partial=False`) is faster-whisper's standard transcription: greedy or beam
    search per `config.beam_size`, temperature 0, no timestamps, no conditioning on
    earlier text (a turn is decoded on its own). A partial encodes only
    `config.partial_context_s` of audio instead of Whisper's 30 s window: about four
    times cheaper on a CPU and a little less accurate, good enough for provisional text
    (audio longer than that is cut to its most recent part). With
    `config.final_context_s` set, a final that fits that window is decoded the same way.
    Empty audio gives "".
    """
    started = time.perf_counter()
    if not len(audio):
        return Decoded("", 0.0)
    audio = np.ascontiguousarray(audio, dtype=np.float32)
    short_final = config.final_context_s > 0 and len(audio) <= config.final_context_s * ASR_RATE_HZ
    if partial or short_final:
        context_s = config.partial_context_s if partial else config.final_context_s
        text = _decode_short(model, audio, config, context_s)
    else:
        segments, _info = model.transcribe(
            audio,
            language=LANGUAGE,
            beam_size=config.beam_size,
            temperature=0.0,
            without_timestamps=True,
            condition_on_previous_text=False,
            vad_filter=False,
            initial_prompt=config.initial_prompt,
            hotwords=config.hotwords,
        )
        text = " ".join(segment.text.strip() for segment in segments).strip()
    return Decoded(text, (time.perf_counter() - started) * 1000.0)


def _decode_short(model: Any, audio: AudioF32, config: AsrConfig, context_s: float) -> str:
    """One greedy pass over a shortened encoder window of `context_s` (CTranslate2
    accepts it)."""
    from faster_whisper.tokenizer import Tokenizer
    from faster_whisper.transcribe import get_suppressed_tokens

    frames = int(context_s * _MEL_FRAMES_PER_S)
    features = model.feature_extractor(audio[-frames * _SAMPLES_PER_MEL_FRAME :])
    features = np.pad(features, ((0, 0), (0, max(0, frames - features.shape[-1]))))
    tokenizer = Tokenizer(
        model.hf_tokenizer, model.model.is_multilingual, task="transcribe", language=LANGUAGE
    )
    previous = tokenizer.encode(" " + config.initial_prompt) if config.initial_prompt else []
    prompt = model.get_prompt(
        tokenizer, previous, without_timestamps=True, hotwords=config.hotwords
    )
    seconds = len(audio) / ASR_RATE_HZ
    result = model.model.generate(
        model.encode(features[:, :frames]),
        [prompt],
        beam_size=1,
        max_length=int(_MAX_TOKENS_BASE + _MAX_TOKENS_PER_S * seconds),
        suppress_blank=True,
        suppress_tokens=get_suppressed_tokens(tokenizer, [-1]),
    )[0]
    return str(tokenizer.decode(result.sequences_ids[0])).strip()


def decode_batch(
    model: Any, audios: list[AudioF32], config: AsrConfig, window_s: float
) -> list[Decoded]:
    """Transcribe several buffers together: their last `window_s` of audio each, padded to
    one window, encoded in one pass and decoded greedily (beam `config.beam_size` for a
    30 s window, as a final) as one batch. Each result carries the batch's compute time.
    The text is what one-pass `decode` (a partial's path) gives each buffer on its own in
    the same window; at 30 s a final alone goes through faster-whisper's `transcribe`
    instead, whose words can differ slightly. Empty audio gives "" and costs nothing."""
    from faster_whisper.tokenizer import Tokenizer
    from faster_whisper.transcribe import get_suppressed_tokens

    started = time.perf_counter()
    frames = int(window_s * _MEL_FRAMES_PER_S)
    kept = [i for i, a in enumerate(audios) if len(a)]
    texts = [""] * len(audios)
    if kept:
        batch = np.stack([_features(model, audios[i], frames) for i in kept])
        tokenizer = Tokenizer(
            model.hf_tokenizer, model.model.is_multilingual, task="transcribe", language=LANGUAGE
        )
        previous = tokenizer.encode(" " + config.initial_prompt) if config.initial_prompt else []
        prompt = model.get_prompt(
            tokenizer, previous, without_timestamps=True, hotwords=config.hotwords
        )
        longest_s = max(len(audios[i]) for i in kept) / ASR_RATE_HZ
        full = window_s >= WHISPER_WINDOW_S
        max_length = (
            _MAX_DECODE_TOKENS
            if full
            else min(_MAX_DECODE_TOKENS, int(_MAX_TOKENS_BASE + _MAX_TOKENS_PER_S * longest_s))
        )
        results = model.model.generate(
            model.encode(batch),
            [prompt] * len(kept),
            beam_size=config.beam_size if full else 1,
            max_length=max_length,
            suppress_blank=True,
            suppress_tokens=get_suppressed_tokens(tokenizer, [-1]),
        )
        for i, result in zip(kept, results, strict=True):
            texts[i] = str(tokenizer.decode(result.sequences_ids[0])).strip()
    took_ms = (time.perf_counter() - started) * 1000.0
    return [
        Decoded(text, took_ms if len(a) else 0.0) for text, a in zip(texts, audios, strict=True)
    ]


def _features(model: Any, audio: AudioF32, frames: int) -> npt.NDArray[np.float32]:
    """(n_mels, frames) log-mel features of the last `frames` of `audio`, zero-padded."""
    audio = np.ascontiguousarray(audio[-frames * _SAMPLES_PER_MEL_FRAME :], dtype=np.float32)
    features: npt.NDArray[np.float32] = model.feature_extractor(audio)[:, :frames]
    return np.pad(features, ((0, 0), (0, frames - features.shape[-1])))


BatchDecoder = Callable[[Any, list[AudioF32], AsrConfig, float], list[Decoded]]
BATCH_HISTORY = 256


class AsrWorker:
    """Runs decodes for every call on one thread, so calls share one model.

    At most `config.max_pending` decodes are queued or running. A partial returns None
    instead of queueing when half of that is taken, so partials never pile up ahead of
    finals; a final over the limit raises AsrOverloadedError. Waiting finals run before
    waiting partials (a caller who has finished speaking is waiting; a partial only
    helps one who still speaks), each kind in arrival order; a queued decode whose
    caller gave up (a speculation the caller talked over) is skipped. Up to
    `config.max_batch` decodes of the kind and encoder window at the head of the queue run
    as one batch (`decode_batch`): several calls' finals cost little more than one, and
    a long turn's 30 s window never widens a short window's batch.
    """

    def __init__(
        self,
        config: AsrConfig | None = None,
        model: Any | None = None,
        decoder: Callable[[Any, AudioF32, AsrConfig, bool], Decoded] = decode,
        batch_decoder: BatchDecoder | None = None,
    ) -> None:
        """Loads the model now unless one is passed (tests pass a fake with `decoder`).
        `batch_decoder` defaults to `decode_batch` with the real `decode`, else to none
        (every job decoded alone)."""
        self._config = config or AsrConfig()
        if self._config.max_pending < 1:
            raise ValueError(f"max_pending must be at least 1, got {self._config.max_pending}")
        self._model = model if model is not None else load_whisper(self._config)
        self._decoder = decoder
        self._batch_decoder = batch_decoder or (decode_batch if decoder is decode else None)
        self.batches: list[int] = []
        """Size of every decode run, oldest first (bounded): how often calls shared one."""
        self._pending = 0
        self._wakeup = threading.Condition()  # guards the count, the queue and `_closed`
        self._queue: list[tuple[int, int, Future[Decoded], AudioF32, bool]] = []
        self._arrivals = itertools.count()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="asr-worker", daemon=True)
        self._thread.start()

    @property
    def config(self) -> AsrConfig:
        return self._config

    @property
    def pending(self) -> int:
        return self._pending

    async def transcribe(self, audio: AudioF32, *, partial: bool = False) -> Decoded | None:
        """Decode `audio` on the worker (see `decode`); None only for a partial when the
        queue is busy. Raises AsrOverloadedError for a final when the queue is full,
        RuntimeError after `close`."""
        limit = max(1, self._config.max_pending // 2) if partial else self._config.max_pending
        with self._wakeup:
            if self._pending >= limit:
                if partial:
                    return None
                raise AsrOverloadedError(
                    f"{self._pending} decodes already pending (max_pending={limit})"
                )
            self._pending += 1
        job: Future[Decoded] = Future()
        # Released when the job really ends: a cancelled caller does not stop a decode
        # already running, and the bound must keep counting it.
        job.add_done_callback(self._release)
        with self._wakeup:
            if self._closed:
                job.cancel()
                raise RuntimeError("the speech recognizer is closed")
            heapq.heappush(self._queue, (int(partial), next(self._arrivals), job, audio, partial))
            self._wakeup.notify()
        return await asyncio.wrap_future(job)

    def _run(self) -> None:
        while True:
            with self._wakeup:
                while not self._queue and not self._closed:
                    self._wakeup.wait()
                if not self._queue:
                    return
                taken, partial, window_s = self._take()
            # A job whose caller gave up while it waited is skipped.
            jobs = [(job, audio) for job, audio in taken if job.set_running_or_notify_cancel()]
            if not jobs:
                continue
            self.batches = [*self.batches[-(BATCH_HISTORY - 1) :], len(jobs)]
            try:
                if len(jobs) == 1 or self._batch_decoder is None:
                    results = [self._decoder(self._model, jobs[0][1], self._config, partial)]
                else:
                    audios = [audio for _, audio in jobs]
                    results = self._batch_decoder(self._model, audios, self._config, window_s)
            except BaseException as exc:  # handed to the callers, who decide
                for job, _ in jobs:
                    job.set_exception(exc)
                continue
            for (job, _), result in zip(jobs, results, strict=True):
                job.set_result(result)

    def _take(self) -> tuple[list[tuple[Future[Decoded], AudioF32]], bool, float]:
        """Under the lock: the queue's head job and, when batching, the waiting jobs of
        its kind and window after it (at most `max_batch` in all, in queue order)."""
        _, _, job, audio, partial = heapq.heappop(self._queue)
        window_s = self._config.window_s(len(audio), partial)
        taken = [(job, audio)]
        limit = self._config.max_batch if self._batch_decoder is not None else 1
        if limit > 1 and self._queue:
            rest = []
            for entry in sorted(self._queue):
                _, _, other, samples, kind = entry
                same = kind == partial and self._config.window_s(len(samples), kind) == window_s
                if same and len(taken) < limit:
                    taken.append((other, samples))
                else:
                    rest.append(entry)
            self._queue = rest  # sorted: still a heap
        return taken, partial, window_s

    def _release(self, _job: object) -> None:
        with self._wakeup:  # reentrant: a job cancelled under the lock releases here
            self._pending -= 1

    def close(self) -> None:
        """Stop accepting work; drops what waits, waits for the decode in progress."""
        with self._wakeup:
            self._closed = True
            waiting, self._queue = self._queue, []
            self._wakeup.notify_all()
        for _, _, job, _, _ in waiting:
            job.cancel()
        self._thread.join()
