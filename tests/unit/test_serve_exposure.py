"""Fail closed: a server on a non-loopback address needs auth on every enabled endpoint
(`transports.server.open_endpoints`), and `voice-agent serve` refuses to start without
it unless told `--insecure` (then it says so loudly)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.fakes import settings
from voice_agent.transports.server import is_loopback, open_endpoints


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.8.9.1", True), ("::1", True), ("localhost", True),
     ("0.0.0.0", False), ("::", False), ("10.0.0.5", False), ("agent.example.com", False)],
)  # fmt: skip
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_every_enabled_endpoint_needs_auth_off_loopback() -> None:
    assert open_endpoints(settings(server={"host": "127.0.0.1"})) == []
    both = open_endpoints(settings(server={"host": "0.0.0.0"}))
    assert len(both) == 2 and "/twilio" in both[0] and "/pcm" in both[1]
    # half-secured is open: /twilio signed but /pcm left open
    half = settings(server={"host": "0.0.0.0"}, auth={"twilio_auth_token": "t"})
    assert [p.split()[0] for p in open_endpoints(half)] == ["/pcm"]
    pcm_off = settings(server={"host": "0.0.0.0", "pcm_enabled": False},
                       auth={"twilio_stream_token": "s"})  # fmt: skip
    assert open_endpoints(pcm_off) == []
    full = settings(server={"host": "0.0.0.0"}, auth={"twilio_auth_token": "t", "pcm_secret": "p"})
    assert open_endpoints(full) == []


def test_telemetry_to_another_host_needs_tls_and_a_login() -> None:
    from voice_agent.transports.server import open_telemetry

    assert open_telemetry(settings()) == []  # no broker
    assert open_telemetry(settings(telemetry={"broker_url": "mqtt://127.0.0.1"})) == []
    clear = open_telemetry(settings(telemetry={"broker_url": "mqtt://mq.internal"}))
    assert len(clear) == 2 and "in the clear" in clear[0] and "anonymously" in clear[1]
    safe = settings(telemetry={"broker_url": "mqtts://mq.internal", "username": "agent",
                               "password": "p"})  # fmt: skip
    assert open_telemetry(safe) == []


def test_serve_refuses_telemetry_in_the_clear_to_another_host() -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "voice_agent.cli", "serve", "--echo", "--port", "0"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "VOICE_AGENT_TELEMETRY__BROKER_URL": "mqtt://192.0.2.10"},
    )  # fmt: skip
    assert refused.returncode == 2
    assert "telemetry goes to 192.0.2.10 in the clear" in refused.stderr


def test_serve_refuses_an_open_public_address_and_insecure_says_so() -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "voice_agent.cli", "serve", "--echo", "--host", "0.0.0.0",
         "--port", "0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 2
    assert "refusing to serve 0.0.0.0" in refused.stderr and "--insecure" in refused.stderr
    lab = subprocess.Popen(
        [sys.executable, "-m", "voice_agent.cli", "serve", "--echo", "--host", "0.0.0.0",
         "--port", "0", "--insecure", "--no-pcm"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert lab.stdout is not None
        banner = lab.stdout.readline()
        assert "/twilio" in banner and "/pcm" not in banner
    finally:
        lab.terminate()
        _, err = lab.communicate(timeout=30)
    assert lab.returncode == 0
    assert "INSECURE: /twilio has no auth" in err and "/pcm" not in err


def test_one_address_may_hold_a_few_connections_and_the_waiting_are_bounded() -> None:
    from voice_agent.transports.server import refusal

    cfg = settings(server={"max_waiting": 3, "max_per_address": 2}).server
    assert refusal(cfg, 0, "203.0.113.9", 1) == ""
    assert "203.0.113.9" in refusal(cfg, 0, "203.0.113.9", 2)
    assert refusal(cfg, 0, None, 50) == ""  # a loopback peer (a local proxy) is exempt
    assert "waiting to start" in refusal(cfg, 3, None, 0)


def test_behind_a_trusted_proxy_the_callers_address_comes_from_x_forwarded_for() -> None:
    from voice_agent.transports.server import client_address

    local = ("127.0.0.1", "::1")
    assert client_address("127.0.0.1", "203.0.113.9", local) == "203.0.113.9"
    # a client's own entries are to the left of what the proxy saw: never chosen
    assert client_address("127.0.0.1", "6.6.6.6, 203.0.113.9", local) == "203.0.113.9"
    assert client_address("127.0.0.1", "203.0.113.9, 127.0.0.1", local) == "203.0.113.9"
    assert client_address("127.0.0.1", None, local) == "127.0.0.1"  # no header: the proxy
    assert client_address("198.51.100.7", "203.0.113.9", local) == "198.51.100.7"  # untrusted
    assert client_address("127.0.0.1", "203.0.113.9", ()) == "127.0.0.1"  # trusts nobody
    assert len(client_address("127.0.0.1", "x" * 5000, local) or "") == 64


def test_trusted_proxies_must_be_addresses() -> None:
    from voice_agent.config import ConfigError, load_settings

    with pytest.raises(ConfigError) as bad:
        load_settings(server={"trusted_proxies": ["nginx.local"]})
    assert "trusted_proxies" in str(bad.value)
