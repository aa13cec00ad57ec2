"""One engine per process: requests from many calls share forward passes.

A worker thread owns the model's backend (engine/backend.py): the shipped model with a
pool of KV-cache rows, or an open dLLM's adapter. Between denoising steps it
admits waiting requests (up to `max_batch`) and retires finished or cancelled ones, so
requests join and leave the batch at step boundaries (step-level batching). The asyncio
side never blocks: results and committed blocks travel back with
`loop.call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import torch

from engine.backend import BlockBackend, NativeBackend
from engine.generate import (
    CommittedBlock,
    DecodeState,
    Generation,
    Request,
    check_capacity,
    decode_step,
    new_state,
)
from engine.model import DiffusionLM
from engine.pacing import StepTimer
from engine.tokenizer import SpecialIds

_log = logging.getLogger(__name__)

IDLE_POLL_S = 0.05
"""How often an idle worker checks whether it should stop."""
BATCH_SIZE_HISTORY = 4096
"""Steps whose batch size `Engine.batch_sizes` keeps: the engine lives as long as the
server, so an unbounded list would grow by every step of every call."""


class EngineClosed(RuntimeError):
    """The engine was closed before or while the request ran."""


@dataclass(eq=False)
class _Job:
    state: DecodeState
    loop: asyncio.AbstractEventLoop
    blocks: asyncio.Queue[tuple[int, ...] | Generation | BaseException]
    start_s: float
    cancelled: threading.Event = field(default_factory=threading.Event)


class Engine:
    """Thread-backed batching engine. Use `async with Engine(...)` or start()/close()."""

    def __init__(
        self,
        model: DiffusionLM | BlockBackend,
        ids: SpecialIds | None = None,
        *,
        max_batch: int = 32,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`model`: the shipped model with its tokenizer's `ids` (a pool of `max_batch`
        cache rows is made for it), or a backend with its own rows and ids (engine/
        adapters: `Adapter.backend(rows)`); `max_batch` is then at most its rows."""
        if isinstance(model, torch.nn.Module):  # the shipped model (or a wrapper of it)
            if ids is None:
                raise ValueError("the shipped model needs its tokenizer's special ids")
            self.backend: BlockBackend = NativeBackend(model.eval(), ids, max_batch)
        else:
            self.backend = model
        self.max_batch = min(max_batch, self.backend.rows)
        self.clock = clock
        self._inbox: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._waiting = 0
        self._active: list[_Job] = []
        self._thread: threading.Thread | None = None
        self._closed = False
        self.timer = StepTimer()
        """The model thread's steps: how many, and how long one takes."""
        self.crashes = 0
        """Steps that raised; each failed its batch's requests and the engine went on."""
        self.last_crash = ""
        self.batch_sizes: collections.deque[int] = collections.deque(maxlen=BATCH_SIZE_HISTORY)
        """Rows in each of the latest `BATCH_SIZE_HISTORY` steps, oldest first."""

    # ------------------------------------------------------------------ asyncio side

    @property
    def queue_depth(self) -> int:
        """Requests waiting to join plus those in the batch (for admission policies)."""
        return self._waiting + len(self._active)

    @property
    def alive(self) -> bool:
        """The worker thread is running (or not started yet) and the engine is open."""
        return not self._closed and (self._thread is None or self._thread.is_alive())

    def start(self) -> None:
        """Start the worker thread; again if it died (a BaseException out of a step)."""
        if self._closed:
            return
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="engine", daemon=True)
            self._thread.start()

    async def close(self) -> None:
        self._closed = True
        self._inbox.put(None)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)

    async def __aenter__(self) -> Engine:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def stream(self, request: Request) -> AsyncIterator[tuple[int, ...]]:
        """Yield each committed block of answer tokens; cancelling stops the request."""
        async for item in self._submit(request):
            if isinstance(item, tuple):
                yield item

    async def stream_result(self, request: Request) -> AsyncIterator[tuple[int, ...] | Generation]:
        """Each committed block of answer tokens, as `stream` yields them, then the
        `Generation` with the request's figures (forwards, confidence, deadline). The
        agent streams speech from the blocks and judges the answer by the figures."""
        async for item in self._submit(request):
            yield item

    async def generate(self, request: Request) -> Generation:
        """The complete answer. Raises ValueError for a request that cannot fit."""
        result: Generation | None = None
        async for item in self._submit(request):
            if isinstance(item, Generation):
                result = item
        assert result is not None
        return result

    async def _submit(self, request: Request) -> AsyncIterator[tuple[int, ...] | Generation]:
        if self._closed:
            raise EngineClosed("engine is closed")
        self.start()
        backend = self.backend
        check_capacity(request, backend.block_size, backend.max_seq_len)
        job = _Job(new_state(request, backend.block_size, backend.ids),
                   asyncio.get_running_loop(), asyncio.Queue(), self.clock())  # fmt: skip
        self._waiting += 1
        self._inbox.put(job)
        try:
            while True:
                item = await job.blocks.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                if isinstance(item, Generation):
                    return
        finally:
            job.cancelled.set()  # no-op when finished; stops the work when abandoned

    # ------------------------------------------------------------------ worker thread

    def _run(self) -> None:
        try:
            while not (self._closed and not self._active):
                try:
                    self._admit()
                    if self._active:
                        self._step()
                except Exception as exc:
                    self._crashed(exc)
        finally:
            self._drain(EngineClosed("engine closed"))

    def _crashed(self, exc: Exception) -> None:
        """A step raised (a model bug, out of memory): fail the requests in the batch with
        the error, free their rows and go on serving, so one bad step does not leave every
        later call waiting on a dead thread. Counted in `crashes` for health checks."""
        self.crashes += 1
        self.last_crash = f"{type(exc).__name__}: {exc}"
        _log.exception("engine step failed; %d requests fail with it", len(self._active))
        for job in self._active:
            self._deliver(job, exc)
        self._active.clear()

    def _admit(self) -> None:
        block = not self._active
        while len(self._active) < self.max_batch:
            try:
                job = self._inbox.get(timeout=IDLE_POLL_S) if block else self._inbox.get_nowait()
            except queue.Empty:
                return
            block = False
            if job is None:
                continue  # close() wake-up
            self._waiting -= 1
            if job.cancelled.is_set():
                continue
            self.backend.clear(len(self._active))
            self._active.append(job)

    def _step(self) -> None:
        states = [job.state for job in self._active]
        t0 = self.clock()
        done = decode_step(self.backend, states, t0, self.timer.estimate_s)
        self.timer.add(self.clock() - t0)
        self.batch_sizes.append(len(states))
        by_state = {id(job.state): job for job in self._active}
        for block in done:
            tokens = CommittedBlock(block.tokens, block.state.min_confidence)
            self._deliver(by_state[id(block.state)], tokens)
        for job in list(self._active):
            s = job.state
            if s.finish is not None:
                gen = Generation(tuple(s.answer), s.finish, s.forced, s.forwards, s.decided,
                                 self.clock() - job.start_s, s.min_confidence)  # fmt: skip
                self._deliver(job, gen)
                self._retire(job)
            elif job.cancelled.is_set():
                self._retire(job)

    def _retire(self, job: _Job) -> None:
        """Free the job's cache row by moving the last active row into it, then empty the
        last row (an adapter's row holds its cache until then)."""
        slot, last = self._active.index(job), len(self._active) - 1
        if slot != last:
            self.backend.move(last, slot)
            self._active[slot] = self._active[last]
        self.backend.clear(last)
        self._active.pop()

    def _deliver(self, job: _Job, item: tuple[int, ...] | Generation | BaseException) -> None:
        with contextlib.suppress(RuntimeError):  # the caller's loop has closed
            job.loop.call_soon_threadsafe(job.blocks.put_nowait, item)

    def _drain(self, exc: BaseException) -> None:
        for job in self._active:
            self._deliver(job, exc)
        self._active.clear()
        while True:
            try:
                pending = self._inbox.get_nowait()
            except queue.Empty:
                return
            if pending is not None:
                self._deliver(pending, exc)
