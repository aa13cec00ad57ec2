"""Semantic end-of-turn: does the caller's audio so far sound like a finished utterance?

Smart Turn v3.2 (Daily, BSD-2-Clause) is a small Whisper-encoder classifier over the
last 8 s of 16 kHz audio that returns the probability that the speaker has finished. Its
ONNX file ships inside the `pipecat-ai` wheel; `scripts/setup.sh` installs that wheel
without its dependencies, and this module reads two files from it:

- the model, `pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx`;
- the feature code, `pipecat/audio/turn/smart_turn/_whisper_features.py` (numpy only),
  loaded by path. Importing the `pipecat` package itself is avoided on purpose: on Python
  3.11 its `__init__` replaces `asyncio.wait_for` process-wide and needs its logging
  dependencies.

The model hears prosody, and synthetic or flat-voiced speech often sounds finished in
mid-sentence ("my name is ..."). `sounds_unfinished` adds the words: a transcript that
ends on an article, a preposition, a conjunction, a possessive or a filler is not a
finished turn, whatever the audio sounds like. The listener applies it to the
speculative final decoded at the pause.

`TurnModelWorker` runs the model on one thread for every call in the process and
decodes the questions that queued while it was busy as one batch (the model's batch
dimension is dynamic), so eight calls pausing together cost one larger run rather than
eight in a row.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import numpy as np

from voice_agent.hearing.asr import ASR_RATE_HZ, AudioF32

log = logging.getLogger(__name__)

WINDOW_S = 8
"""Smart Turn looks at the last 8 s of audio, zero-padded in front when shorter."""
_WINDOW = WINDOW_S * ASR_RATE_HZ
_PACKAGE = "pipecat"
_MODEL = Path("audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx")
_FEATURES = Path("audio/turn/smart_turn/_whisper_features.py")
MISSING = (
    "semantic end-of-turn needs Smart Turn v3.2 from the `pipecat-ai` wheel "
    "(scripts/setup.sh installs it: pip install --no-deps pipecat-ai==1.14.0); "
    'or set [hearing] end_of_turn = "silence"'
)


# A turn whose transcript ends on one of these is not finished ("my name is", "for the",
# "um"). English function words only, no domain vocabulary, and none that often ends a
# finished sentence ("thank you", "I think so", "yes I do", "come in").
_DANGLING = frozenset(
    {
        *("a", "an", "the", "my", "your", "our", "their", "its"),  # articles, possessives
        *("to", "for", "of", "at", "with", "from", "by", "into", "than", "as"),
        *("and", "or", "but", "because", "if"),  # conjunctions
        *("is", "are", "was", "were", "be", "i", "i'm", "we", "we're", "it's", "there's"),
        *("um", "uh", "er", "erm", "uhm", "hmm", "mm", "like"),  # fillers
    }
)


def sounds_unfinished(text: str) -> bool:
    """Whether a transcript stops mid-sentence: its last word is an article, preposition,
    conjunction, possessive, auxiliary or filler, or it trails off ("...", "-")."""
    stripped = text.strip()
    if stripped.endswith(("...", "…", "-", "—")):
        return True
    words = stripped.lower().replace("’", "'").split()
    if not words:
        return False
    return words[-1].strip(".,!?;:\"'") in _DANGLING


class EndOfTurnModel(Protocol):
    """What the listener asks: the probability that the turn's audio so far is complete
    (None when the question could not be answered in time, e.g. the worker is full)."""

    async def complete_probability(self, audio: AudioF32) -> float | None: ...


def _package_dir() -> Path:
    spec = importlib.util.find_spec(_PACKAGE)  # locates, does not import
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(MISSING)
    return Path(next(iter(spec.submodule_search_locations)))


def model_path() -> Path:
    """The Smart Turn v3.2 ONNX file inside the installed `pipecat-ai` wheel."""
    path = _package_dir() / _MODEL
    if not path.is_file():
        raise FileNotFoundError(f"{MISSING} (no {path})")
    return path


def _feature_module() -> ModuleType:
    path = _package_dir() / _FEATURES
    spec = importlib.util.spec_from_file_location("_smart_turn_features", path)
    if spec is None or spec.loader is None or not path.is_file():
        raise FileNotFoundError(f"{MISSING} (no {path})")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def last_window(audio: AudioF32) -> AudioF32:
    """The last 8 s of 16 kHz audio, zero-padded in front to exactly 8 s."""
    audio = np.asarray(audio, dtype=np.float32)
    if audio.ndim != 1:
        raise ValueError(f"expected mono audio (one dimension), got shape {audio.shape}")
    if len(audio) >= _WINDOW:
        return audio[-_WINDOW:]
    return np.pad(audio, (_WINDOW - len(audio), 0))


class SmartTurnModel:
    """Smart Turn v3.2 on ONNX Runtime (CPU). `predict` is blocking and not re-entrant:
    call it from one thread (`TurnModelWorker` does)."""

    def __init__(self, path: Path | None = None, threads: int = 1) -> None:
        """Raises FileNotFoundError (with the set-up hint) when the model is missing."""
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(
            str(path or model_path()), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._features: Callable[..., np.ndarray] = (
            _feature_module().compute_whisper_log_mel_features
        )

    def predict(self, batch: Sequence[AudioF32]) -> list[float]:
        """Probability of a finished utterance for each 16 kHz clip (any length; only
        its last 8 s count)."""
        if not batch:
            return []
        # (batch, 80 mel bins, 800 frames of 10 ms)
        features = np.stack([self._features(last_window(a), do_normalize=True) for a in batch])
        (probabilities,) = self._session.run(None, {"input_features": features})
        return [float(p) for p in np.asarray(probabilities).reshape(len(batch))]


@dataclass(frozen=True, slots=True)
class TurnModelStats:
    questions: int
    batches: int
    dropped: int
    failed: int
    last_compute_ms: float


class TurnModelWorker:
    """One model thread shared by every call; questions that arrive while it is busy
    run together as the next batch. Use from one event loop."""

    def __init__(self, model: Any, max_batch: int = 8, max_pending: int = 32) -> None:
        """`model` has `predict(list of clips) -> list of probabilities`."""
        if max_batch < 1 or max_pending < 1:
            raise ValueError("max_batch and max_pending must be positive")
        self._model = model
        self._max_batch, self._max_pending = max_batch, max_pending
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="end-of-turn")
        self._pending: list[tuple[AudioF32, asyncio.Future[float | None]]] = []
        self._busy = False
        self._questions = self._batches = self._dropped = self._failed = 0
        self._last_compute_ms = 0.0

    @property
    def stats(self) -> TurnModelStats:
        return TurnModelStats(self._questions, self._batches, self._dropped, self._failed,
                              self._last_compute_ms)  # fmt: skip

    async def complete_probability(self, audio: AudioF32) -> float | None:
        """None when too many questions wait (the caller's turn then ends on the longer
        silence) or the model failed (logged)."""
        self._questions += 1
        if len(self._pending) >= self._max_pending:
            self._dropped += 1
            return None
        future: asyncio.Future[float | None] = asyncio.get_running_loop().create_future()
        self._pending.append((audio, future))
        self._start_next()
        return await future

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _start_next(self) -> None:
        self._pending = [(a, f) for a, f in self._pending if not f.done()]
        if self._busy or not self._pending:
            return
        batch, self._pending = self._pending[: self._max_batch], self._pending[self._max_batch :]
        self._busy = True
        loop = asyncio.get_running_loop()
        run = loop.run_in_executor(self._executor, self._timed, [a for a, _ in batch])
        run.add_done_callback(lambda done: self._finish(batch, done))

    def _timed(self, clips: list[AudioF32]) -> tuple[list[float], float]:
        began = time.perf_counter()
        probabilities = self._model.predict(clips)
        return probabilities, (time.perf_counter() - began) * 1000

    def _finish(
        self,
        batch: list[tuple[AudioF32, asyncio.Future[float | None]]],
        done: asyncio.Future[tuple[list[float], float]],
    ) -> None:
        self._busy = False
        self._batches += 1
        error = None if done.cancelled() else done.exception()
        if done.cancelled() or error is not None:
            self._failed += len(batch)
            if error is not None:
                log.error("the end-of-turn model failed: %r", error)
            results: list[float | None] = [None] * len(batch)
        else:
            probabilities, self._last_compute_ms = done.result()
            results = list(probabilities)
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)
        self._start_next()
