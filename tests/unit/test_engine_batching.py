"""The batching engine: concurrent requests share steps and get the unbatched answers."""

from __future__ import annotations

import asyncio
import time

import pytest

from engine import batching
from engine.batching import Engine, EngineClosed
from engine.generate import FinishReason, Request, generate
from engine.schedule import Schedule
from tests.unit.test_engine_decode import IDS, biased, tiny_model


def requests() -> list[Request]:
    prompts = [
        (2, 9, 10, 11),
        (2, 12),
        (2, 13, 14, 15, 16, 17, 18),
        (2, 19, 20),
        (2, 21, 22, 23, 24),
    ]
    return [
        Request(p, Schedule(threshold=0.5, max_new_tokens=12 + 4 * i))
        for i, p in enumerate(prompts)
    ]


async def test_concurrent_requests_equal_unbatched_ones_and_share_steps() -> None:
    model = tiny_model(5)
    expected = [generate(model, IDS, r, time.monotonic).token_ids for r in requests()]
    async with Engine(model, IDS, max_batch=4) as engine:
        results = await asyncio.gather(*(engine.generate(r) for r in requests()))
        assert max(engine.batch_sizes) == 4  # five requests, four rows: one waited and joined
        assert engine.timer.steps < sum(g.forwards for g in results)
    assert [g.token_ids for g in results] == expected
    assert all(g.token_ids for g in results)


async def test_stream_yields_blocks_as_committed() -> None:
    model = biased(tiny_model(), None, ban=IDS.eos)
    request = Request((2, 9), Schedule(threshold=0.0, max_new_tokens=12))
    async with Engine(model, IDS) as engine:
        blocks = [b async for b in engine.stream(request)]
        full = await engine.generate(request)
    assert [len(b) for b in blocks] == [4, 4, 4]
    assert sum((list(b) for b in blocks), []) == list(full.token_ids)
    assert full.finish_reason is FinishReason.LENGTH


async def test_a_cancelled_request_leaves_the_batch() -> None:
    model = biased(tiny_model(), None, ban=IDS.eos)
    long = Request((2, 9), Schedule(threshold=1.0, max_new_tokens=100))
    short = Request((2, 10), Schedule(threshold=0.0, max_new_tokens=8))
    async with Engine(model, IDS) as engine:
        task = asyncio.create_task(engine.generate(long))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        g = await engine.generate(short)  # the engine keeps serving
        assert len(g.token_ids) == 8
        for _ in range(100):
            if not engine.queue_depth:
                break
            await asyncio.sleep(0.01)
        assert engine.queue_depth == 0


async def test_closed_engine_refuses_and_bad_requests_fail_fast() -> None:
    engine = Engine(tiny_model(), IDS)
    with pytest.raises(ValueError, match="window"):
        await engine.generate(Request(tuple(range(3, 30)) * 5))
    await engine.close()
    with pytest.raises(EngineClosed):
        await engine.generate(Request((2, 9)))


async def test_the_batch_size_history_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # The engine lives as long as the server: a record per step must not grow forever.
    monkeypatch.setattr(batching, "BATCH_SIZE_HISTORY", 3)
    model = biased(tiny_model(), None, ban=IDS.eos)
    request = Request((2, 9), Schedule(threshold=1.0, max_new_tokens=8))
    async with Engine(model, IDS) as engine:
        for _ in range(2):
            await engine.generate(request)
        assert engine.timer.steps > 3
        assert list(engine.batch_sizes) == [1, 1, 1]


async def test_a_step_that_raises_fails_its_requests_and_the_engine_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Before, an exception in a step ended the worker thread: every later request waited
    for ever on a dead engine. Now the batch's requests fail with the error, the crash is
    counted and logged, and the next request is answered."""
    model = tiny_model(5)
    expected = generate(model, IDS, requests()[1], time.monotonic).token_ids
    real_forward, calls = model.forward, {"n": 0}

    def broken_once(*args: object, **kwargs: object) -> object:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("CUDA error: an illegal memory access")
        return real_forward(*args, **kwargs)  # type: ignore[arg-type]

    model.forward = broken_once  # type: ignore[method-assign]
    async with Engine(model, IDS) as engine:
        with pytest.raises(RuntimeError, match="illegal memory access"):
            await engine.generate(requests()[0])
        assert engine.crashes == 1 and "illegal memory access" in engine.last_crash
        assert engine.alive
        answer = await engine.generate(requests()[1])
        assert answer.token_ids == expected
    assert not engine.alive  # closed
    assert "engine step failed" in caplog.text
