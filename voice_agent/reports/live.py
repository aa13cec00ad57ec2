"""`voice-agent report --mqtt URL`: a rolling latency summary of the turns published on a
broker, redrawn in the terminal: the whole fleet's stages, then one line per node (each
worker publishes under its own `[telemetry] node`).

`RollingSummary` is pure (records in, text out); `watch` subscribes to
`voice-agent/+/calls/+/turns/+` and redraws the summary every `refresh_s` while new
turns come, reconnecting (with backoff) when the broker goes away.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from typing import TYPE_CHECKING, TextIO

from voice_agent.reports import stats
from voice_agent.reports.document import ms
from voice_agent.telemetry import topics
from voice_agent.turn_record import Stage, TurnRecord

if TYPE_CHECKING:
    from voice_agent.telemetry.publisher import BrokerAddress

log = logging.getLogger(__name__)

CLEAR = "\x1b[2J\x1b[H"
"""ANSI: clear the screen, cursor home (only written to a terminal)."""
RECONNECT_MIN_S = 0.2
RECONNECT_MAX_S = 5.0


class RollingSummary:
    """The last `window` turns' latency against their budgets, plus totals since start."""

    def __init__(self, window: int = 200) -> None:
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        self.window = window
        self._recent: collections.deque[TurnRecord] = collections.deque(maxlen=window)
        self.turns_seen = 0
        self.calls: set[tuple[str, str]] = set()
        """(node, call id) of every call seen."""
        self.violations = 0
        """Turns over their voice-to-voice budget, since start."""
        self.bad_messages = 0
        self._nodes: dict[str, collections.deque[TurnRecord]] = {}
        """Each node's last `window` turns (a fleet's workers publish as their nodes)."""
        self._node_turns: collections.Counter[str] = collections.Counter()

    def add(self, node: str, record: TurnRecord) -> None:
        self._recent.append(record)
        self._nodes.setdefault(node, collections.deque(maxlen=self.window)).append(record)
        self._node_turns[node] += 1
        self.turns_seen += 1
        self.calls.add((node, record.call_id))
        self.violations += Stage.TURN in record.over_budget()

    @property
    def nodes(self) -> list[str]:
        """The nodes seen, in name order."""
        return sorted(self._nodes)

    def add_payload(self, payload: bytes) -> TurnRecord | None:
        """A `turn_completed` payload; anything else is counted in `bad_messages`."""
        try:
            data = topics.parse(payload)
            if data["event"] != topics.EventKind.TURN_COMPLETED.value:
                raise ValueError(f"not a turn: {data['event']}")
            record = TurnRecord.from_json_data(data.get("record"))
        except (ValueError, KeyError) as exc:
            self.bad_messages += 1
            log.warning("live view: message skipped: %s", exc)
            return None
        self.add(str(data.get("node", "?")), record)
        return record

    @property
    def recent(self) -> tuple[TurnRecord, ...]:
        return tuple(self._recent)

    def render(self) -> str:
        recent = list(self._recent)
        head = (
            f"voice-agent live: {self.turns_seen} turns from {len(self.calls)} calls; "
            f"{self.violations} over the turn budget"
        )
        if not recent:
            return head + "\n(waiting for turns...)\n"
        lines = [head, f"last {len(recent)} turns:", ""]
        row = "{:<16} {:>5} {:>8} {:>8} {:>8} {:>10} {:>6}"
        lines.append(row.format("stage", "n", "p50 ms", "p95 ms", "max ms", "budget ms", "over"))
        for s in stats.stage_stats(recent, stats.BUDGETED):
            summary = s.summary
            if summary is None:
                continue
            name = "voice to voice" if s.stage is Stage.TURN else s.stage.value
            over = f"{100 * s.share_over:.0f}%"
            lines.append(row.format(name, summary.n, ms(summary.p50), ms(summary.p95),
                                    ms(summary.max), ms(s.budget_ms), over))  # fmt: skip
        if self._nodes:
            lines += ["", f"nodes ({len(self._nodes)}):"]
            node_row = "{:<20} {:>6} {:>6} {:>8} {:>8} {:>6}"
            lines.append(node_row.format("node", "calls", "turns", "p50 ms", "p95 ms", "over"))
            for node in self.nodes:
                turns = stats.stage_stats(list(self._nodes[node]), [Stage.TURN])[0]
                v2v = turns.summary
                calls = sum(1 for n, _ in self.calls if n == node)
                over = f"{100 * turns.share_over:.0f}%" if v2v is not None else "–"
                lines.append(node_row.format(
                    node[:20], calls, self._node_turns[node], ms(v2v.p50 if v2v else None),
                    ms(v2v.p95 if v2v else None), over))  # fmt: skip
        engine = stats.engine_summary(recent)
        if engine.decided_per_forward is not None:
            lines.append("")
            lines.append(f"engine: {engine.decided_per_forward:.2f} decided tokens/forward, "
                         f"{engine.deadline_forced} deadline-forced turns")  # fmt: skip
        return "\n".join(lines) + "\n"


async def watch(
    broker: BrokerAddress,
    out: TextIO,
    *,
    window: int = 200,
    refresh_s: float = 1.0,
    duration_s: float | None = None,
    topic_filter: str = topics.TURNS_FILTER,
    summary: RollingSummary | None = None,
) -> RollingSummary:
    """Show the rolling summary on `out` until cancelled or `duration_s` passes; returns
    it (`summary`, when given, is the one filled: a caller may watch it). Never raises
    for broker trouble: it reconnects."""
    summary = summary or RollingSummary(window)
    changed = asyncio.Event()
    changed.set()
    painter = asyncio.create_task(_paint(summary, changed, out, refresh_s))
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(duration_s):
                await _subscribe(broker, topic_filter, summary, changed)
    finally:
        painter.cancel()
        await asyncio.gather(painter, return_exceptions=True)
    _draw(summary, out)
    return summary


async def _subscribe(
    broker: BrokerAddress, topic_filter: str, summary: RollingSummary, changed: asyncio.Event
) -> None:
    import aiomqtt

    backoff_s = RECONNECT_MIN_S
    while True:
        try:
            async with broker.client(timeout=3.0, keepalive=10) as client:
                backoff_s = RECONNECT_MIN_S
                await client.subscribe(topic_filter, qos=topics.AT_LEAST_ONCE)
                async for message in client.messages:
                    if isinstance(message.payload, bytes | bytearray):
                        summary.add_payload(bytes(message.payload))
                        changed.set()
        except aiomqtt.MqttError as exc:
            log.info("live view: broker %s:%d: %s; retrying in %.1f s", broker.host, broker.port,
                     exc, backoff_s)  # fmt: skip
        await asyncio.sleep(backoff_s)
        backoff_s = min(2 * backoff_s, RECONNECT_MAX_S)


async def _paint(
    summary: RollingSummary, changed: asyncio.Event, out: TextIO, refresh_s: float
) -> None:
    while True:
        await changed.wait()
        changed.clear()
        _draw(summary, out)
        await asyncio.sleep(refresh_s)


def _draw(summary: RollingSummary, out: TextIO) -> None:
    tty = out.isatty()
    out.write((CLEAR if tty else "\n") + summary.render())
    out.flush()
