"""A phone call to a restaurant: the second tool pack through the real pipeline and server.

`[tools] pack = "tests.packs.restaurant"` is the only change: real Whisper tiny.en, the
real engine on the shipped brain, espeak-ng voices, the restaurant's own SQLite file.
The brain was trained on the bike shop, so which tool it picks for a restaurant caller is
not judged; what is: the engine decodes under the restaurant's grammar (every call it
makes is one of the restaurant's tools and validates against its schema), the tools run
against the restaurant's database (what it booked is there), and the call is answered.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_pipeline_call import GENEROUS_BUDGETS, RATE_HZ, loud_ms, spoken
from tests.fakes import settings, url
from tests.packs import restaurant
from voice_agent.agent import AgentConfig, ToolOutcome
from voice_agent.pipeline import Pipeline, PipelineSession
from voice_agent.simulator import simulate_call
from voice_agent.transports.server import VoiceServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

LINES = [
    "Hi, do you have a table for two on Friday?",
    "Could I book a table for four tomorrow at seven, the name is Priya Nair.",
    "Yes please, book it.",
]


async def test_a_restaurant_call_goes_through_the_server_with_its_own_pack(
    tmp_path: Path,
) -> None:
    cfg = settings(
        budgets=GENEROUS_BUDGETS,
        models={"tts_backend": "espeak"},
        tools={"pack": "tests.packs.restaurant"},
        pipeline={"records": tmp_path / "turns.jsonl", "shop_db": tmp_path / "calls.sqlite"},
    )
    caller = spoken((4.0, LINES[1]))
    async with Pipeline(cfg) as pipeline:
        assert pipeline.pack is restaurant.PACK
        sessions: list[PipelineSession] = []

        def factory() -> PipelineSession:
            sessions.append(pipeline.new_session())
            return sessions[-1]

        async with VoiceServer(cfg, factory) as server:
            summary, reply = await simulate_call(
                url(server), caller, RATE_HZ, idle_after_reply_s=1.0, max_tail_s=10.0
            )
            assert pipeline.health()["alive"]
        state = pipeline.tool_state
        assert isinstance(state, restaurant.RestaurantState)
        rows = state.db.rows()

        # Lines as text through agents of the same pipeline: more decisions to check.
        calls = [c for s in sessions for t in s.turns for c in t.tool_calls]
        for line in LINES:
            agent = pipeline.new_agent()
            agent.config = AgentConfig(min_confidence=0.0, max_tool_steps=1)
            calls += (await agent.respond(line)).tool_calls
        rows_after = state.db.rows()

    assert summary.close_code == 1000 and summary.turns == 1
    assert loud_ms(reply, summary.turn_end_ms[0], summary.duration_ms) > 300  # answered
    agent = sessions[0].agent
    assert agent.pack is restaurant.PACK and set(agent.grammar.tools) == set(restaurant.PACK.tools)
    models = restaurant.PACK.argument_models
    for call in calls:  # whatever the brain chose: a restaurant tool, schema-valid
        assert call.tool in models
        models[call.tool].model_validate(call.arguments)
    booked = {
        (c.arguments["name"], c.arguments["day"], c.arguments["time"], c.arguments["party_size"])
        for c in calls
        if c.tool == "book_table" and c.outcome is ToolOutcome.OK
    }
    assert set(rows_after) == booked and set(rows) <= booked
