"""The fleet on loopback, short: mosquitto, PostgreSQL, nginx and two real workers; a
booking call through nginx, its worker killed once it has committed the booking mid-call,
the dropped call placed again. Nothing lost or doubled in PostgreSQL, new calls
reach the survivor, the live report shows both nodes (scripts/fleet.py runs it longer)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from scripts.fleet import run_fleet
from scripts.services import nginx_available, postgres_available

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(420),
    pytest.mark.skipif(
        not (postgres_available() and nginx_available()),
        reason="PostgreSQL and nginx are not installed (scripts/setup.sh installs them)",
    ),
]


async def test_a_fleet_loses_a_worker_mid_call_and_nothing_is_lost_or_doubled(
    tmp_path: Path,
) -> None:
    # Short: one booking call, and the agent speaks with espeak-ng (quick to load).
    worker_env = [("VOICE_AGENT_MODELS__TTS_BACKEND", "espeak"),
                  ("VOICE_AGENT_PIPELINE__RECORD_TEXT", "true")]  # fmt: skip
    args = argparse.Namespace(workers=2, calls=1, stagger_s=1.0, compare_calls=0,
                              first_gap_s=5.0, gap_s=8.0, worker_env=worker_env)  # fmt: skip
    figures = await run_fleet(args, tmp_path)
    assert figures["killed_mid_call"] and figures["calls_failed_by_kill"] == 1, figures
    assert figures["reroute_ms"] is not None, figures["reroute_error"]
    assert figures["calls_retried_ok"] == figures["retried_on_survivor"] == 1, figures
    assert figures["bookings_doubled"] == 0
    assert figures["bookings_found"] == figures["bookings_expected"] >= 1, figures["bookings"]
    assert figures["report_nodes"] == ["worker-1", "worker-2"]
    assert figures["ok"] is True
