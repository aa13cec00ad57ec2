"""A call left open in silence is ended politely: the real pipeline (espeak voice) greets,
hears nothing for `[pipeline] silence_hangup_s`, says goodbye and hangs up, long before
the caller's line would have closed by itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes import settings, silence, url
from voice_agent.pipeline import Pipeline, PipelineSession
from voice_agent.simulator import simulate_call
from voice_agent.transports.call import CallSession
from voice_agent.transports.server import VoiceServer

from .test_pipeline_call import RATE_HZ

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


async def test_a_silent_line_gets_the_goodbye_and_is_hung_up(tmp_path: Path) -> None:
    cfg = settings(
        models={"tts_backend": "espeak"},
        pipeline={"shop_db": tmp_path / "shop.sqlite", "silence_hangup_s": 2.0},
    )
    sessions: list[PipelineSession] = []
    async with Pipeline(cfg) as pipeline:

        def factory() -> CallSession:
            sessions.append(pipeline.new_session())
            return sessions[-1]

        async with VoiceServer(cfg, factory) as server:
            summary, _ = await simulate_call(url(server), silence(0.5, RATE_HZ), RATE_HZ,
                                             max_tail_s=40.0)  # fmt: skip
    [session] = sessions
    assert session.ended_by_limit == "no caller speech for 2 s"
    assert summary.close_code == 1000 and summary.turns == 0
    assert summary.duration_ms < 30_000  # ended by the agent, not by the caller's tail
