"""`voice-agent mic` through real audio devices: PortAudio → ALSA → a PulseAudio server of
the test's own with two null sinks. The caller's WAV is played into the sink whose monitor
is the default source (the virtual microphone); the agent's speech is recorded from the
default sink's monitor (the virtual speakers).

The caller talks over the greeting: barge-in must clear what was queued for the speakers,
so the greeting heard stops well short of its full length, and the question must then be
answered aloud. Real Whisper tiny.en and the shipped brain; espeak-ng speaks for both
sides and the fixed end of turn is used (quick to load on a shared 2-core CPU).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from voice_agent.audio import rms_dbfs
from voice_agent.dialogue.phrases import phrases
from voice_agent.simulator import REPLY_DBFS
from voice_agent.speech import EspeakSynthesizer
from voice_agent.turn_record import read_jsonl
from voice_agent.wav import read_wav, write_wav

PULSE_PROGRAMS = ("pulseaudio", "pactl", "paplay", "parecord")
pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(240),
    pytest.mark.skipif(
        any(shutil.which(p) is None for p in PULSE_PROGRAMS),
        reason="PulseAudio is not installed (scripts/setup.sh installs it)",
    ),
]

RATE_HZ = 16000
FRAME = RATE_HZ // 50
START_S = 90.0
"""Longest wait for the models to load."""
TALK_OVER_S = 1.0
"""How far into the greeting the caller starts talking."""
ANSWER_WAIT_S = 15.0


STOP_S = 30.0
"""Longest wait for the mic command to hang up after Ctrl-C."""


def stopped(process: subprocess.Popen[str]) -> tuple[str, str]:
    """The output of a process sent Ctrl-C; one that does not stop in `STOP_S` fails the
    test with every thread's stack (the CLI dumps them on SIGUSR1)."""
    try:
        return process.communicate(timeout=STOP_S)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGUSR1)
        time.sleep(1.0)
        process.kill()
        _out, err = process.communicate()
        pytest.fail(f"no exit {STOP_S:g} s after Ctrl-C; stacks:\n{err[-6000:]}")


class PulseServer:
    """PulseAudio with no hardware and no D-Bus, in its own folder: sink `speaker` is the
    default output (record `speaker.monitor`), sink `caller`'s monitor the default input."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="voice-agent-pulse-"))
        socket = self.folder / "native"
        self.env = {**os.environ, "PULSE_SERVER": f"unix:{socket}", "HOME": str(self.folder),
                    "XDG_RUNTIME_DIR": str(self.folder), "PULSE_RUNTIME_PATH": str(self.folder)}  # fmt: skip
        self._proc = subprocess.Popen(
            ["pulseaudio", "--daemonize=no", "-n", "--exit-idle-time=-1", "--disallow-exit",
             f"--log-target=file:{self.folder / 'pulse.log'}",
             "-L", f"module-native-protocol-unix auth-anonymous=1 socket={socket}",
             "-L", "module-null-sink sink_name=speaker", "-L", "module-null-sink sink_name=caller"],
            env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while not socket.exists():
            if time.monotonic() > deadline or self._proc.poll() is not None:
                self.stop()
                raise RuntimeError("pulseaudio did not start")
            time.sleep(0.05)
        for argv in (["pactl", "set-default-sink", "speaker"],
                     ["pactl", "set-default-source", "caller.monitor"]):  # fmt: skip
            subprocess.run(argv, env=self.env, check=True, capture_output=True, timeout=10)

    def stop(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture
def pulse() -> Iterator[PulseServer]:
    server = PulseServer()
    yield server
    server.stop()


def voiced_runs_s(audio: np.ndarray) -> list[tuple[float, float]]:
    """(start, end) in seconds of the stretches where the recording is not silent,
    gaps shorter than 0.3 s bridged (pauses between words)."""
    loud = [rms_dbfs(audio[i : i + FRAME]) > REPLY_DBFS for i in range(0, len(audio), FRAME)]
    runs: list[list[float]] = []
    for k, on in enumerate(loud):
        t = k * FRAME / RATE_HZ
        if not on:
            continue
        if runs and t - runs[-1][1] < 0.3:
            runs[-1][1] = t + FRAME / RATE_HZ
        else:
            runs.append([t, t + FRAME / RATE_HZ])
    return [(a, b) for a, b in runs]


def test_the_mic_demo_hears_through_real_devices_and_barge_in_clears_the_speakers(
    pulse: PulseServer, tmp_path: Path
) -> None:
    voice = EspeakSynthesizer()
    greeting_s = len(voice.synthesize(phrases().greeting)) / voice.sample_rate_hz
    question = voice.synthesize("Sorry to interrupt, when are you open on Saturday?")
    caller_wav, heard_wav = tmp_path / "caller.wav", tmp_path / "heard.wav"
    write_wav(caller_wav, question, voice.sample_rate_hz)
    records = tmp_path / "turns.jsonl"
    env = {**pulse.env, "VOICE_AGENT_MODELS__TTS_BACKEND": "espeak",
           "VOICE_AGENT_HEARING__END_OF_TURN": "silence", "PYTHONUNBUFFERED": "1"}  # fmt: skip
    # Started as a background job of a non-interactive shell is (CI's may be): with SIGINT
    # ignored, which asyncio.run alone leaves so, and Ctrl-C would not stop it.
    mic = subprocess.Popen(
        [sys.executable, "-m", "voice_agent.cli", "mic", "--records", str(records)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )  # fmt: skip
    recorder = subprocess.Popen(
        ["parecord", "--device=speaker.monitor", f"--rate={RATE_HZ}", "--channels=1",
         "--file-format=wav", str(heard_wav)], env=pulse.env,
    )  # fmt: skip
    try:
        assert mic.stderr is not None
        deadline = time.monotonic() + START_S
        said = ""
        while "listening on" not in said:
            assert time.monotonic() < deadline and mic.poll() is None, said
            said += mic.stderr.readline()
        time.sleep(TALK_OVER_S)
        subprocess.run(["paplay", "--device=caller", str(caller_wav)], env=pulse.env,
                       check=True, timeout=30)  # fmt: skip
        deadline = time.monotonic() + ANSWER_WAIT_S
        while not (records.exists() and read_jsonl(records)) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(4.0)  # the answer plays
    finally:
        recorder.send_signal(signal.SIGINT)
        recorder.wait(10)
        mic.send_signal(signal.SIGINT)  # Ctrl-C hangs up; the call is printed
        out, err = stopped(mic)
    assert mic.returncode == 0, err[-2000:]
    assert "listening on 'default' and speaking on 'default'" in said
    # The question was heard and answered (the words are the brain's; the tool is not).
    assert "saturday" in out.lower() and "opening_hours" in out, out
    assert len(read_jsonl(records)) >= 1
    audio, rate = read_wav(heard_wav)
    assert rate == RATE_HZ
    runs = voiced_runs_s(audio)  # recorded from before the models loaded
    assert len(runs) >= 2, runs  # the greeting's start, then the answer
    greeting_heard = runs[0][1] - runs[0][0]  # barge-in cleared the rest of it
    assert greeting_heard < greeting_s - 1.0, (greeting_heard, greeting_s, runs)
    assert runs[-1][1] - runs[1][0] > 1.0  # the answer, spoken
