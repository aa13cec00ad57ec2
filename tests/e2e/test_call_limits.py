"""A call left open in silence is ended politely: the real pipeline (espeak voice) greets,
hears nothing for `[pipeline] silence_hangup_s`, says goodbye and hangs up, long before
the caller's line would have closed by itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes import settings, silence, url
from voice_agent.simulator import simulate_call

from .test_pipeline_call import RATE_HZ
from .test_pipeline_faults import serving

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


async def test_a_silent_line_gets_the_goodbye_and_is_hung_up(tmp_path: Path) -> None:
    cfg = settings(
        models={"tts_backend": "espeak"},
        pipeline={"shop_db": tmp_path / "shop.sqlite", "silence_hangup_s": 2.0},
    )
    async with serving(cfg) as (server, _, sessions):
        summary, _ = await simulate_call(url(server), silence(0.5, RATE_HZ), RATE_HZ,
                                         max_tail_s=40.0)  # fmt: skip
    [session] = sessions
    assert session.ended_by_limit == "no caller speech for 2 s"
    assert summary.close_code == 1000 and summary.turns == 0
    assert summary.duration_ms < 30_000  # ended by the agent, not by the caller's tail
