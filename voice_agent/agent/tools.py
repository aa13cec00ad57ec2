"""Running the model's tool calls: off the event loop, under a timeout, at most once.

`ToolRunner.run(call, turn, generation)` runs one decoded call in a worker thread under
its tool's timeout and returns a `ToolRun`: the record, the tool-result turn to feed back
to the model, and a speakable line. Safety rules (barge-in, retries):

- Idempotency: a call is keyed by (turn, tool, canonical arguments); the same call again
  in the same turn is not run, its first outcome is returned as `DUPLICATE`. (The shop's
  tools are idempotent in SQLite as well, so a retry in a later turn cannot double-book.)
- Cancelled before it starts (the awaiting task is cancelled, or the timeout passes while
  the thread pool is busy): the worker checks a discard flag first, so the tool never
  runs. Cancelled while it runs: it is left to finish (no half-done side effects), its
  run is committed to the history through `on_ran` and recorded, then the cancellation
  propagates; its result is never spoken.
- A `ToolError` is a refusal the model talks about; a timeout, any other exception or a
  return value that is not a tool result with a line to say becomes the fixed "tool
  failed" line (logged), never a dead call.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

from tools.core import CallAction, Handoff, ToolError, ToolPack, WriteGate, gated
from voice_agent.agent.reply import ToolCallRecord, ToolOutcome
from voice_agent.clock import Clock, MonotonicClock
from voice_agent.dialogue.format import ERROR_PREFIX, AgentCall, SaysLine, ToolResultTurn
from voice_agent.latency import TurnTracker
from voice_agent.pools import named_pool

log = logging.getLogger(__name__)

RunTool = Callable[[str, Mapping[str, Any], Any], object]
"""`ToolPack.call`'s signature (name, arguments, context): raises only ToolError for bad
input."""
TIMEOUT_KIND = "timeout"
FAILED_KIND = "failed"
"""Error kinds of the result turn fed back for a timed-out or crashed tool."""
_MS_PER_S = 1000.0


@dataclass(frozen=True, slots=True)
class CallKey:
    turn: int
    tool: str
    arguments_json: str
    """Canonical JSON (sorted keys) of the validated arguments."""

    @classmethod
    def of(cls, turn: int, call: AgentCall) -> CallKey:
        return cls(turn, call.tool, json.dumps(dict(call.arguments), sort_keys=True))


@dataclass(frozen=True, slots=True)
class ToolRun:
    record: ToolCallRecord
    result: ToolResultTurn
    """What the model reads next (`error <kind>: ...` for refusals and failures)."""
    line: str
    """Speakable as is: the result's `say`, the refusal's message, or the failure phrase."""
    handoff: CallAction | None = None


class _Discarded(Exception):
    """The turn was cancelled before the worker started the tool."""


TOOL_THREADS = 8
"""Tool calls running at once in the process, on their own pool (`voice_agent.pools`): a
tool stuck on its database cannot delay synthesis or hint encoding, nor they a tool. A
stuck tool holds a thread until its database wait ends (the bike shop's is
`tools.bike_shop.db.BUSY_TIMEOUT_S`)."""


class ToolRunner:
    """One per call. `records` lists every call the agent asked for, in order."""

    def __init__(
        self,
        pack: ToolPack[Any],
        ctx: Any,
        failed_line: str,
        *,
        run_tool: RunTool | None = None,
        timeout_s: float | None = None,
        clock: Clock | None = None,
    ) -> None:
        """`ctx`: the pack's context for this call (a dataclass with a `caller` field).
        `failed_line`: what the caller hears for a timeout or crash. `run_tool` defaults
        to `pack.call` (tests pass a slow or failing one). `timeout_s` overrides every
        tool's own `ToolSpec.timeout_s`."""
        self._pack = pack
        self._ctx = ctx
        self._failed_line = failed_line
        self._tools = pack.tools
        self._run_tool = run_tool or pack.call
        self._timeout_s = timeout_s
        self._clock = clock or MonotonicClock()
        self._done: dict[CallKey, ToolRun] = {}
        self._discard: threading.Event | None = None
        self.records: list[ToolCallRecord] = []

    @property
    def caller(self) -> str | None:
        """Who the tools act for (the context's `caller`)."""
        caller: str | None = self._ctx.caller
        return caller

    def scope_to(self, caller: str) -> None:
        """Act for `caller` from now on: bookings record it and only theirs can be
        cancelled (the bike shop's `ShopContext.caller`). Set by the session, never by the
        model."""
        self._ctx = replace(self._ctx, caller=caller)

    def timeout_for(self, tool: str) -> float:
        if self._timeout_s is not None:
            return self._timeout_s
        spec = self._tools.get(tool)
        return (
            spec.timeout_s if spec is not None else min(s.timeout_s for s in self._tools.values())
        )

    async def run(
        self,
        call: AgentCall,
        turn: int,
        generation: int,
        on_ran: Callable[[ToolRun], None],
        tracker: TurnTracker | None = None,
    ) -> ToolRun:
        """Run `call` (or return its first outcome this turn as `DUPLICATE`). `on_ran` is
        called once for a call that started (whatever its outcome), before this returns or
        re-raises a cancellation: the place to put the call into the dialogue history."""
        key = CallKey.of(turn, call)
        if key in self._done:
            first = self._done[key]
            record = replace(first.record, generation=generation, outcome=ToolOutcome.DUPLICATE,
                             duration_ms=0.0)  # fmt: skip
            self.records.append(record)
            return replace(first, record=record)
        try:  # a barge-in that has already happened is delivered here, before anything runs
            await asyncio.sleep(0)
        except asyncio.CancelledError:
            self._finish(call, turn, generation, self._clock.now(),
                         ToolOutcome.NOT_RUN_CANCELLED, None, None, None)  # fmt: skip
            raise
        handle = tracker.start_tool(call.tool, call.arguments) if tracker is not None else None
        start_s = self._clock.now()
        discarded = self._discard = threading.Event()
        gate = WriteGate()

        def work() -> SaysLine:
            if discarded.is_set():
                raise _Discarded
            with gated(gate):
                result = self._run_tool(call.tool, call.arguments, self._ctx)
                return _checked(result, self._pack.result_types)

        # Submitted to the pool now (not on a later loop step, as `to_thread` would be),
        # so the discard flag alone decides whether a queued tool starts.
        pool = named_pool("tool", TOOL_THREADS)
        job = asyncio.get_running_loop().run_in_executor(pool, work)
        timeout_s = self.timeout_for(call.tool)
        try:
            try:
                outcome: SaysLine | BaseException = await asyncio.wait_for(
                    asyncio.shield(job), timeout_s
                )
            except asyncio.CancelledError:
                discarded.set()
                outcome = await _settle(job, start_s + timeout_s - self._clock.now(), call.tool)
                if isinstance(outcome, _Discarded):
                    self._finish(call, turn, generation, start_s, ToolOutcome.NOT_RUN_CANCELLED,
                                 None, tracker, handle)  # fmt: skip
                else:
                    run = self._finish(call, turn, generation, start_s, ToolOutcome.RAN_CANCELLED,
                                       outcome, tracker, handle)  # fmt: skip
                    on_ran(run)
                raise
        except TimeoutError:
            discarded.set()  # still queued for a thread: never start it
            if gate.abandon():  # nothing committed, and now nothing will
                _outlive(job, call.tool)
                log.warning("tool %s timed out after %.1f s; the caller hears an apology",
                            call.tool, timeout_s)  # fmt: skip
                outcome = TimeoutError(f"no result within {timeout_s:.1f} s")
                run = self._finish(call, turn, generation, start_s, ToolOutcome.TIMEOUT,
                                   outcome, tracker, handle)  # fmt: skip
            else:  # its write committed just now: wait for the result and tell the caller
                run = await self._committed(job, call, turn, generation, start_s, tracker, handle)
        except ToolError as exc:
            run = self._finish(call, turn, generation, start_s, ToolOutcome.REFUSED, exc,
                               tracker, handle)  # fmt: skip
        except Exception as exc:
            log.exception("tool %s failed; the caller hears an apology", call.tool)
            run = self._finish(call, turn, generation, start_s, ToolOutcome.FAILED, exc,
                               tracker, handle)  # fmt: skip
        else:
            run = self._finish(call, turn, generation, start_s, ToolOutcome.OK, outcome,
                               tracker, handle)  # fmt: skip
        finally:
            self._discard = None
        self._done[key] = run
        on_ran(run)
        return run

    async def _committed(
        self,
        job: asyncio.Future[SaysLine],
        call: AgentCall,
        turn: int,
        generation: int,
        start_s: float,
        tracker: TurnTracker | None,
        handle: int | None,
    ) -> ToolRun:
        """The tool's write committed as its timeout passed: what it did stands, so the
        caller is told its result, never an apology for a booking that exists."""
        try:
            result = await job
        except ToolError as exc:
            return self._finish(call, turn, generation, start_s, ToolOutcome.REFUSED, exc,
                                tracker, handle)  # fmt: skip
        except Exception as exc:
            log.exception("tool %s failed after committing", call.tool)
            return self._finish(call, turn, generation, start_s, ToolOutcome.FAILED, exc,
                                tracker, handle)  # fmt: skip
        return self._finish(call, turn, generation, start_s, ToolOutcome.OK, result, tracker,
                            handle)  # fmt: skip

    def discard(self) -> None:
        """Barge-in: the tool submitted but not yet started never starts. Call from the
        event loop; the awaiting task still has to be cancelled."""
        if self._discard is not None:
            self._discard.set()

    def _finish(
        self,
        call: AgentCall,
        turn: int,
        generation: int,
        start_s: float,
        outcome: ToolOutcome,
        result: SaysLine | BaseException | None,
        tracker: TurnTracker | None,
        handle: int | None,
    ) -> ToolRun:
        ran = outcome is not ToolOutcome.NOT_RUN_CANCELLED
        duration_ms = (self._clock.now() - start_s) * _MS_PER_S if ran else 0.0
        error = ""
        if isinstance(result, ToolError):
            error = result.kind.value
        elif isinstance(result, BaseException):
            error = f"{type(result).__name__}: {result}"
        record = ToolCallRecord(turn, generation, call.tool, dict(call.arguments), outcome,
                                duration_ms, error)  # fmt: skip
        self.records.append(record)
        if tracker is not None and handle is not None:
            refusal = error if outcome is ToolOutcome.REFUSED else None
            tracker.end_tool(handle, outcome, refusal)
        return _tool_run(record, call.tool, result, self._failed_line, self._pack.notes)


def _tool_run(
    record: ToolCallRecord,
    tool: str,
    result: SaysLine | BaseException | None,
    failed: str,
    notes: Callable[[object], str],
) -> ToolRun:
    if isinstance(result, ToolError):
        return ToolRun(record, ToolResultTurn.of(tool, result, notes(result)), result.message)
    if result is None or isinstance(result, BaseException):
        kind = TIMEOUT_KIND if isinstance(result, TimeoutError) else FAILED_KIND
        return ToolRun(record, ToolResultTurn(tool, f"{ERROR_PREFIX} {kind}: {failed}", kind),
                       failed)  # fmt: skip
    handoff = result.action if isinstance(result, Handoff) else None
    return ToolRun(record, ToolResultTurn.of(tool, result, notes(result)), result.say, handoff)


def _checked(result: object, result_types: tuple[type, ...]) -> SaysLine:
    """A tool's return value, or TypeError (a failed tool: the apology) when it is not one
    of the pack's results (or a `Handoff`) with a line to say, so garbage never reaches
    the prompt or the caller."""
    if not isinstance(result, (*result_types, Handoff)):
        raise TypeError(f"the tool returned {type(result).__name__}, not a tool result")
    say = getattr(result, "say", None)
    if not isinstance(say, str) or not say.strip():
        raise TypeError(f"the tool's {type(result).__name__} has no line to say")
    return cast(SaysLine, result)


async def _settle(
    job: asyncio.Future[SaysLine], wait_s: float, tool: str
) -> SaysLine | BaseException:
    """The job's result or exception once it is done, waiting at most `wait_s` (its
    timeout's remainder) even if cancelled again meanwhile."""
    try:
        return await asyncio.wait_for(asyncio.shield(job), max(0.0, wait_s))
    except (asyncio.CancelledError, TimeoutError) as exc:
        if job.done() and not job.cancelled():
            return job.exception() or job.result()
        _outlive(job, tool)
        return exc
    except BaseException as exc:
        return exc


def _outlive(job: asyncio.Future[SaysLine], tool: str) -> None:
    """Stop waiting for a tool still running in its thread: its late outcome is logged
    when it comes. (Someone must read it: a cancelled `shield` no longer does, and asyncio
    reports an exception nobody read as "Future exception was never retrieved".)"""

    def late(done: asyncio.Future[SaysLine]) -> None:
        if done.cancelled():
            return
        exc = done.exception()
        if exc is None:
            log.info("tool %s finished after its turn stopped waiting for it", tool)
        elif not isinstance(exc, _Discarded):
            log.warning("tool %s failed after its turn stopped waiting for it: %r", tool, exc)

    job.add_done_callback(late)
