"""Telemetry against a real mosquitto on loopback: events arrive with their topics, QoS
and retain flags; a broker restart mid-run loses nothing (events wait in the buffer and
go out after the reconnect); without a broker nothing blocks and overflow is counted;
the live view follows the turns."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiomqtt
import pytest

from tests.mqtt_broker import Broker, broker, free_port
from voice_agent.config import load_settings
from voice_agent.pipeline.pipeline import Pipeline
from voice_agent.reports.live import RollingSummary, watch
from voice_agent.telemetry import CallTelemetry, Message, topics
from voice_agent.telemetry.publisher import BrokerAddress, MqttPublisher, PublisherConfig
from voice_agent.telemetry.topics import NodeState
from voice_agent.turn_record import Budgets, ToolCallRecord, ToolOutcome, TurnRecord, read_jsonl

__all__ = ["broker"]  # the fixture
pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "reports" / "tiny-en.jsonl"
FAST = PublisherConfig(buffer_size=100, reconnect_min_s=0.05, reconnect_max_s=0.2,
                       close_timeout_s=2.0, keepalive_s=5)  # fmt: skip
WAIT_S = 20.0
"""Generous: under a full test run a broker restart's redelivery took over 10 s once."""


def publisher(b: Broker, config: PublisherConfig = FAST, node: str = "n1") -> MqttPublisher:
    offline = topics.status(node, NodeState.OFFLINE, 1.0)
    return MqttPublisher(BrokerAddress.parse(b.url), config, will=offline,
                         on_connect=topics.status(node, NodeState.ONLINE, 1.0),
                         on_close=offline)  # fmt: skip


class Subscriber:
    """Collects messages on `voice-agent/#`; with `client_id`, a persistent session that
    reconnects after a broker restart (its QoS-1 queue survives in the broker)."""

    def __init__(self, b: Broker, client_id: str | None = None) -> None:
        self.broker = b
        self.client_id = client_id
        self.messages: list[aiomqtt.Message] = []
        self.connections = 0
        self.subscribed = asyncio.Event()

    async def run(self) -> None:
        while True:
            try:
                async with aiomqtt.Client("127.0.0.1", self.broker.port, identifier=self.client_id,
                                          clean_session=self.client_id is None) as client:  # fmt: skip
                    self.connections += 1
                    await client.subscribe(topics.ALL_FILTER, qos=1)
                    self.subscribed.set()
                    async for message in client.messages:
                        self.messages.append(message)
            except aiomqtt.MqttError:
                await asyncio.sleep(0.05)

    def events(self, kind: str) -> list[dict[str, object]]:
        data = [topics.parse(bytes(m.payload)) for m in self.messages]  # type: ignore[arg-type]
        return [d for d in data if d["event"] == kind]

    async def wait_for(self, count: int, kind: str) -> None:
        async with asyncio.timeout(WAIT_S):
            while len(self.events(kind)) < count:
                await asyncio.sleep(0.02)


@asynccontextmanager
async def subscribed(b: Broker, client_id: str | None = None) -> AsyncIterator[Subscriber]:
    sub = Subscriber(b, client_id)
    task = asyncio.create_task(sub.run())
    try:
        async with asyncio.timeout(WAIT_S):
            await sub.subscribed.wait()
        yield sub
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def slow_turn(call_id: str = "CA1", turn: int = 1) -> TurnRecord:
    return TurnRecord(call_id, turn, Budgets.default(), end_of_turn_at_ms=400,
                      final_transcript_at_ms=500, engine_start_at_ms=500, engine_done_at_ms=700,
                      tts_start_at_ms=650, first_tts_audio_at_ms=1250,
                      first_audio_sent_at_ms=1300)  # fmt: skip


async def test_call_events_reach_a_subscriber_with_their_topics_qos_and_retain(
    broker: Broker,
) -> None:
    pub = publisher(broker)
    telemetry = CallTelemetry("n1", pub, lambda: 1.7e9)
    async with subscribed(broker) as sub:
        await pub.start()
        telemetry.call_started("CA1", 1)
        telemetry.tool_called("CA1", 1, ToolCallRecord("lookup_order", 10, 30, ToolOutcome.OK))
        telemetry.turn_completed(slow_turn())
        telemetry.call_ended("CA1", 1, 0)
        await sub.wait_for(1, "call_ended")
        assert await pub.wait_idle(WAIT_S)
        got = {str(m.topic): m for m in sub.messages}
        base = "voice-agent/n1/calls/CA1"
        for name, qos in (("started", 1), ("tools/lookup_order", 0), ("turns/1", 1),
                          ("violations/tts_first_audio", 1), ("violations/turn", 1),
                          ("ended", 1)):  # fmt: skip
            assert got[f"{base}/{name}"].qos == qos and not got[f"{base}/{name}"].retain, name
        [turn] = sub.events("turn_completed")
        assert TurnRecord.from_json_data(turn["record"]) == slow_turn()
        assert [e["state"] for e in sub.events("status")] == ["online"]
        await pub.close()
    assert pub.stats.delivered == 7 and pub.stats.dropped == 0  # 6 events + offline at close
    async with subscribed(broker) as late:  # the retained status: the node went offline
        async with asyncio.timeout(WAIT_S):
            while not late.events("status"):
                await asyncio.sleep(0.02)
        [status] = late.messages
        assert status.retain and topics.parse(bytes(status.payload))["state"] == "offline"  # type: ignore[arg-type]


async def test_an_unsendable_message_is_dropped_and_counted_and_the_rest_go_on(
    broker: Broker,
) -> None:
    """A topic the client cannot encode (a lone surrogate) once stalled the publisher:
    requeued for ever, with every later message behind it."""
    pub = publisher(broker)
    async with subscribed(broker) as sub:
        await pub.start()
        pub.publish(Message("voice-agent/n1/calls/CA\ud800/started", b"{}", 1))
        CallTelemetry("n1", pub, lambda: 1.7e9).call_started("CA2", 1)
        await sub.wait_for(1, "call_started")
        assert await pub.wait_idle(WAIT_S)
        assert pub.stats.unsendable == 1 and pub.stats.dropped == 1
        assert "voice-agent/n1/calls/CA2/started" in {str(m.topic) for m in sub.messages}
        await pub.close()


async def test_a_broker_restart_mid_run_delays_events_and_loses_none(broker: Broker) -> None:
    pub = publisher(broker)
    telemetry = CallTelemetry("n1", pub, lambda: 1.7e9)
    async with subscribed(broker, client_id="collector") as sub:
        await pub.start()
        for turn in range(1, 11):
            telemetry.turn_completed(slow_turn(turn=turn))
        await sub.wait_for(10, "turn_completed")
        broker.stop()
        async with asyncio.timeout(WAIT_S):
            while pub.stats.connected:
                await asyncio.sleep(0.02)
        for turn in range(11, 21):  # the broker is down: buffered, the caller never waits
            telemetry.turn_completed(slow_turn(turn=turn))
        stats = pub.stats
        assert stats.waiting >= 10 and not stats.connected and stats.dropped == 0
        broker.start()
        await sub.wait_for(20, "turn_completed")
        assert await pub.wait_idle(WAIT_S)
        turns = [int(e["record"]["turn"]) for e in sub.events("turn_completed")]  # type: ignore[index]
        assert sorted(set(turns)) == list(range(1, 21))
        after = [t for t in turns[turns.index(10) + 1:] if t > 10]  # fmt: skip
        assert after == sorted(after)  # delivered in order after the reconnect
        assert sub.connections >= 2
    stats = pub.stats
    assert stats.connections == 2 and stats.dropped == 0
    assert stats.accepted == stats.delivered == 20 * 3  # each turn: record + 2 violations
    await pub.close()


async def test_without_a_broker_publishing_never_blocks_and_overflow_is_counted() -> None:
    absent = BrokerAddress("127.0.0.1", free_port())
    config = PublisherConfig(buffer_size=5, reconnect_min_s=0.05, reconnect_max_s=0.1,
                             close_timeout_s=0.2)  # fmt: skip
    pub = MqttPublisher(absent, config)
    await pub.start()
    message = Message("voice-agent/n1/x", b"{}", 1)
    for _ in range(12):
        pub.publish(message)
    await asyncio.sleep(0.3)  # several failed connection attempts meanwhile
    stats = pub.stats
    assert (stats.accepted, stats.waiting, stats.dropped, stats.delivered) == (12, 5, 7, 0)
    assert not stats.connected and stats.connections == 0
    await pub.close()
    assert (pub.stats.dropped, pub.stats.waiting) == (12, 0)


async def test_the_pipeline_goes_on_without_its_broker(tmp_path: Path) -> None:
    """The hooks a session calls, with telemetry on and no broker: nothing raises or
    waits, records still reach their file, events wait in the buffer."""
    url = f"mqtt://127.0.0.1:{free_port()}"
    records = tmp_path / "turns.jsonl"
    settings = load_settings(None, telemetry={"broker_url": url, "node": "n1", "buffer_size": 4,
                                              "close_timeout_s": 0.1},
                             pipeline={"records": records})  # fmt: skip
    pipeline = Pipeline(settings)
    await pipeline._start_telemetry()
    pipeline.call_started("CA1")
    assert pipeline.active_calls == 1
    pipeline.tool_called("CA1", 1, ToolCallRecord("lookup_order", 10, 30, ToolOutcome.OK))
    pipeline.write_record(slow_turn())
    pipeline.call_ended("CA1", 1)
    assert pipeline.active_calls == 0
    await pipeline.close()  # the records' writer thread has written what it was given
    assert read_jsonl(records) == [slow_turn()]
    assert pipeline._publisher is not None
    stats = pipeline._publisher.stats
    assert stats.delivered == 0 and stats.accepted == 7  # 6 events + offline at close
    assert stats.dropped == 7  # 3 overflowed the buffer of 4, 4 left at close


async def test_the_live_view_summarizes_published_turns(broker: Broker) -> None:
    records = read_jsonl(FIXTURE)
    pub = publisher(broker)
    telemetry = CallTelemetry("n1", pub, lambda: 1.7e9)
    out, summary = io.StringIO(), RollingSummary(window=5)
    viewer = asyncio.create_task(watch(BrokerAddress("127.0.0.1", broker.port), out, refresh_s=0.05,
                                       duration_s=WAIT_S, summary=summary))  # fmt: skip
    await pub.start()
    async with asyncio.timeout(WAIT_S):
        while not summary.turns_seen:  # until the viewer has subscribed
            telemetry.turn_completed(slow_turn("CA-probe"))
            await asyncio.sleep(0.1)
        assert await pub.wait_idle(WAIT_S)
        probes = summary.turns_seen
        for record in records:
            telemetry.turn_completed(record)
        while summary.turns_seen < probes + len(records):
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)  # a redraw
    viewer.cancel()
    await asyncio.gather(viewer, return_exceptions=True)
    await pub.close()
    assert summary.recent == tuple(records[-5:])
    assert len(summary.calls) == 1 + len({r.call_id for r in records})
    text = out.getvalue()
    assert f"{probes + len(records)} turns from {len(summary.calls)} calls" in text
    assert "last 5 turns" in text and "voice to voice" in text
