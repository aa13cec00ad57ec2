"""The command-line names others rely on: `serve`, `call`, `twiml`, run as processes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree

import numpy as np

from tests.fakes import silence, voiced
from voice_agent.transports.auth import CallTokens
from voice_agent.wav import read_wav, write_wav

CLI = [sys.executable, "-m", "voice_agent.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listening on {port}")


def test_serve_then_call_prints_the_summary(tmp_path: Path) -> None:
    port = free_port()
    wav = tmp_path / "caller.wav"
    write_wav(
        wav, np.concatenate([silence(0.3, 16000), voiced(0.8, 16000), silence(0.2, 16000)]), 16000
    )
    server = subprocess.Popen(
        [*CLI, "serve", "--echo", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_port(port)
        out = tmp_path / "reply.wav"
        done = subprocess.run(
            [*CLI, "call", f"ws://127.0.0.1:{port}/twilio", "--wav", str(wav), "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        server.terminate()
        server.communicate(timeout=10)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["turns"] == 1 and summary["close_code"] == 1000
    assert summary["first_reply_ms"][0] is not None and summary["frames_received"] > 40
    reply, rate = read_wav(out)
    assert rate == 8000 and len(reply) == summary["duration_ms"] * 8


def test_call_reports_bad_input_and_unreachable_servers(tmp_path: Path) -> None:
    missing = subprocess.run(
        [
            *CLI,
            "call",
            "ws://127.0.0.1:9/twilio",
            "--wav",
            str(tmp_path / "none.wav"),
            "--out",
            "x.wav",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert missing.returncode == 2 and "no such file" in missing.stderr
    wav = tmp_path / "a.wav"
    write_wav(wav, voiced(0.1), 8000)
    refused = subprocess.run(
        [
            *CLI,
            "call",
            f"ws://127.0.0.1:{free_port()}/twilio",
            "--wav",
            str(wav),
            "--out",
            str(tmp_path / "o.wav"),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert refused.returncode == 1 and "cannot call" in refused.stderr


def test_serve_refuses_bad_settings_with_a_clear_message() -> None:
    done = subprocess.run(
        [*CLI, "serve", "--port", "70000"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 2 and "server.port" in done.stderr


def test_twiml_prints_the_snippet() -> None:
    done = subprocess.run(
        [*CLI, "twiml", "--url", "wss://a.example.com/twilio", "--param", "token=abc"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0
    assert '<Stream url="wss://a.example.com/twilio">' in done.stdout
    assert '<Parameter name="token" value="abc" />' in done.stdout
    bad = subprocess.run(
        [*CLI, "twiml", "--url", "http://x"], capture_output=True, text=True, timeout=30
    )
    assert bad.returncode == 2 and "wss://" in bad.stderr


def test_twiml_mints_a_call_token_the_server_admits_once() -> None:
    sid, caller = "CA" + "4" * 32, "+15557654321"
    argv = [*CLI, "twiml", "--url", "wss://a.example.com/twilio", "--call-sid", sid,
            "--caller", caller, "--ttl-s", "120"]  # fmt: skip
    env = {**os.environ, "VOICE_AGENT_AUTH__TWILIO_CALL_TOKEN_SECRET": "webhook-secret"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env)
    assert done.returncode == 0, done.stderr
    params = {
        p.get("name"): p.get("value") for p in ElementTree.fromstring(done.stdout).iter("Parameter")
    }
    assert params["caller"] == caller
    tokens = CallTokens("webhook-secret")
    assert tokens.check(params["token"], sid, caller) is None
    assert tokens.check(params["token"], sid, caller) == "call token already used"
    without = {k: v for k, v in env.items() if k != "VOICE_AGENT_AUTH__TWILIO_CALL_TOKEN_SECRET"}
    refused = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=without)
    assert refused.returncode == 2 and "twilio_call_token_secret" in refused.stderr
