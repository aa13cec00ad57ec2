"""`voice-agent mic --input-wav --output-wav`: a headless call through the real pipeline.

Real Whisper tiny.en, the engine on the available checkpoint, espeak-ng for the caller
and the agent (fast on a shared 2-core CPU). What is checked are the mechanics, not the
brain's words: the reply WAV lines up with the input and has the agent speaking after the
caller's turn, one turn record was written, and the conversation and latency table print.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voice_agent.audio import resample, rms_dbfs
from voice_agent.cli import main
from voice_agent.simulator import REPLY_DBFS, caller_turn_ends_ms
from voice_agent.speech import EspeakSynthesizer
from voice_agent.turn_record import read_jsonl
from voice_agent.wav import read_wav, write_wav

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

GREETING_S = 5.0
"""Silence before the caller speaks: the greeting plays meanwhile."""


def test_a_headless_call_writes_the_reply_on_the_input_timeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    voice = EspeakSynthesizer()
    rate = voice.sample_rate_hz  # 22050: the command resamples to 16 kHz
    caller = np.concatenate([np.zeros(int(rate * GREETING_S), np.int16),
                             voice.synthesize("When do you open on Saturday?"),
                             np.zeros(int(rate * 0.3), np.int16)])  # fmt: skip
    caller_wav, reply_wav = tmp_path / "caller.wav", tmp_path / "reply.wav"
    write_wav(caller_wav, caller, rate)
    config = tmp_path / "voice-agent.toml"
    config.write_text('[models]\ntts_backend = "espeak"\n')
    records = tmp_path / "turns.jsonl"

    code = main(["--config", str(config), "mic", "--input-wav", str(caller_wav),
                 "--output-wav", str(reply_wav), "--records", str(records),
                 "--shop-db", str(tmp_path / "shop.sqlite"), "--max-tail-s", "12"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0

    reply, reply_rate = read_wav(reply_wav)
    assert reply_rate == 16000
    assert len(reply) >= len(caller) * 16000 // rate  # the input's whole timeline, and more
    [turn_end_ms] = caller_turn_ends_ms(resample(caller, rate, 8000))
    frames = reply[: len(reply) // 320 * 320].reshape(-1, 320)  # 20 ms
    loud_ms = [i * 20 for i, f in enumerate(frames) if rms_dbfs(f) > REPLY_DBFS]
    assert [t for t in loud_ms if t < GREETING_S * 1000]  # the greeting, before the caller
    assert sum(t >= turn_end_ms for t in loud_ms) >= 25  # ≥ 0.5 s of reply after the turn

    [record] = read_jsonl(records)
    assert record.turn == 1 and record.call_id.startswith("local-")
    assert "conversation:" in out and "caller: " in out and "latency per turn" in out
    row = next(line.split() for line in out.splitlines() if line.strip().startswith("1 "))
    assert row[-1] != "-"  # heard_ms measured on the reply WAV
