"""The benchmark's plumbing against a real `voice-agent serve` child process (the echo
stand-in, so no models load): start on a free loopback port, calls placed at once, a
clean SIGINT shutdown."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.calls import ServerProcess, join_turns, place_calls, summarize
from voice_agent.speech import EspeakSynthesizer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


async def test_two_calls_at_once_against_a_serve_process(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path, echo=True)
    await server.start()
    try:
        assert server.twilio_url.startswith("ws://127.0.0.1:")
        results = await place_calls(
            server.twilio_url, [("Hello there.",), ("Good morning, hello.", "Bye now.")],
            EspeakSynthesizer(), stagger_s=0.5, max_tail_s=4.0, first_gap_s=1.0, gap_s=3.0,
        )  # fmt: skip
    finally:
        code = await server.stop()
    assert code == 0, "".join(server.output[-20:])
    assert [r.error for r in results] == ["", ""]
    figures = summarize(join_turns(results, []), results)
    # The echo stand-in repeats every turn: each was answered, heard after its end.
    assert figures["turns"] == 3 and figures["turns_unanswered"] == 0
    heard = figures["voice_to_voice_ms"]
    assert heard["n"] == 3 and 0 < heard["p50"] < 5000  # type: ignore[index,operator]
    assert figures["calls_failed"] == 0


async def test_a_server_that_cannot_start_is_reported(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[server]\nmax_calls = 'many'\n")
    server = ServerProcess(tmp_path, echo=True, config=bad)
    with pytest.raises(RuntimeError, match="exited at start"):
        await server.start()
    await server.stop()
