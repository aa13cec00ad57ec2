"""`/metrics` in the Prometheus text format on the server's own port: a real server on
loopback, a real call, a refused handshake, and turn records fed as the pipeline does;
the text is read back with prometheus-client's own parser."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.fakes import settings, url
from tests.integration.test_server import start_message
from voice_agent.echo import EchoSession
from voice_agent.telemetry.metrics import Metrics
from voice_agent.transports.server import VoiceServer
from voice_agent.turn_record import (
    Budgets,
    DegradeAction,
    DegradeCause,
    DegradeRecord,
    Stage,
    ToolCallRecord,
    ToolOutcome,
    TurnRecord,
)

pytestmark = pytest.mark.integration


def scrape(server: VoiceServer) -> tuple[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as resp:
        content_type, text = resp.headers["Content-Type"], resp.read().decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    return content_type, samples


async def test_metrics_count_calls_refusals_and_turn_stages() -> None:
    metrics = Metrics("agent-7")
    server = VoiceServer(settings(), EchoSession, metrics=metrics)
    async with server:
        async with connect(url(server, "/twilio")) as ws:
            await ws.send(start_message())
            await asyncio.sleep(0.2)
        with pytest.raises(InvalidStatus):
            async with connect(url(server, "/nowhere")):
                pass
        for _ in range(100):
            if server.calls:
                break
            await asyncio.sleep(0.02)
        metrics.call_started()
        metrics.turn(
            TurnRecord(
                "CA1", 1, Budgets.default(), end_of_turn_at_ms=160.0,
                final_transcript_at_ms=200.0, engine_start_at_ms=210.0,
                engine_done_at_ms=300.0, tts_start_at_ms=305.0, first_tts_audio_at_ms=345.0,
                first_audio_sent_at_ms=350.0, answer_audio_sent_at_ms=350.0,
                tool_calls=(ToolCallRecord("opening_hours", 220.0, 230.0, ToolOutcome.OK),),
                degrades=(DegradeRecord(Stage.ENGINE, DegradeCause.TURN_BUDGET,
                                        DegradeAction.LOWER_EFFORT, 205.0),),
            )
        )  # fmt: skip
        content_type, samples = await asyncio.to_thread(scrape, server)
    assert content_type.startswith("text/plain")
    assert samples[("target_info", (("node", "agent-7"),))] == 1
    assert samples[("voice_agent_closes_total", (("code", "1000"), ("path", "/twilio")))] == 1
    assert samples[("voice_agent_http_refusals_total", (("status", "404"),))] == 1
    assert samples[("voice_agent_calls_in_progress", ())] == 1
    assert samples[("voice_agent_turns_total", ())] == 1
    turn = ("voice_agent_stage_seconds_bucket", (("le", "0.45"), ("stage", "turn")))
    assert samples[turn] == 1  # 350 ms voice to voice
    assert samples[("voice_agent_stage_seconds_bucket", (("le", "0.3"), ("stage", "turn")))] == 0
    assert samples[("voice_agent_answer_seconds_count", ())] == 1
    assert (
        samples[("voice_agent_degrades_total", (("action", "lower_effort"), ("stage", "engine")))]
        == 1
    )
    assert (
        samples[("voice_agent_tool_calls_total", (("outcome", "ok"), ("tool", "opening_hours")))]
        == 1
    )


async def test_a_server_without_metrics_answers_404() -> None:
    async with VoiceServer(settings(), EchoSession) as server:
        address = f"http://127.0.0.1:{server.port}/metrics"
        with pytest.raises(urllib.error.HTTPError) as caught:
            await asyncio.to_thread(urllib.request.urlopen, address, None, 5)
    assert caught.value.code == 404
