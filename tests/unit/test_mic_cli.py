"""`voice-agent mic` refuses what it cannot run with exit 2 and a one-line message, before
any model is loaded: no audio device (this test machine has none), sounddevice missing,
bad headless arguments and WAV files."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from voice_agent.cli import main
from voice_agent.wav import write_wav

HINT = "--input-wav FILE --output-wav FILE"


def mic(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["mic", *args])
    err = capsys.readouterr().err.strip()
    return code, err


def riff(path: Path, format_tag: int, bits: int, data: bytes = b"\0" * 64) -> Path:
    """A WAV header written by hand (the wave module writes only integer PCM)."""
    block = bits // 8
    fmt = struct.pack("<HHIIHH", format_tag, 1, 16000, 16000 * block, block, bits)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"data" + struct.pack("<I", len(data)) + data
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    return path


def test_without_an_audio_device_it_says_to_run_headless(
    capsys: pytest.CaptureFixture[str],
) -> None:
    sounddevice = pytest.importorskip("sounddevice")
    try:
        sounddevice.query_devices(kind="input")
        sounddevice.query_devices(kind="output")
    except sounddevice.PortAudioError:
        pass
    else:
        pytest.skip("this machine has audio devices")
    code, err = mic(capsys)
    assert code == 2
    assert err.startswith("voice-agent mic: no audio input/output device found")
    assert HINT in err and "\n" not in err


def test_without_sounddevice_it_says_what_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "sounddevice", None)  # `import sounddevice` fails
    code, err = mic(capsys)
    assert code == 2
    assert "sounddevice is not installed (pip install 'voice-agent[mic]')" in err
    assert HINT in err and "\n" not in err


def bad_wav(kind: str, folder: Path) -> Path:
    path = folder / f"{kind}.wav"
    if kind == "text":
        path.write_text("not audio")
    elif kind == "float":
        riff(path, 3, 32)  # IEEE float samples
    elif kind == "wide":
        riff(path, 1, 40, b"\0" * 60)  # 5-byte integer samples
    elif kind == "empty":
        riff(path, 1, 16, b"")
    return path  # "missing": never written


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("missing", "no such file"),
        ("text", "not a PCM WAV"),
        ("float", "not a PCM WAV"),
        ("wide", "unsupported sample width of 5 bytes"),
        ("empty", "holds no audio"),
    ],
)
def test_bad_input_wavs_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str, expected: str
) -> None:
    wav = bad_wav(kind, tmp_path)
    code, err = mic(capsys, "--input-wav", str(wav), "--output-wav", str(tmp_path / "o.wav"))
    assert code == 2 and expected in err, err
    assert "\n" not in err and not (tmp_path / "o.wav").exists()


def test_headless_needs_both_files_and_a_usable_rate(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    wav = tmp_path / "caller.wav"
    write_wav(wav, np.zeros(4000, np.int16), 16000)
    code, err = mic(capsys, "--input-wav", str(wav))
    assert code == 2 and "both --input-wav and --output-wav" in err
    code, err = mic(capsys, "--output-wav", str(wav))
    assert code == 2 and "both --input-wav and --output-wav" in err
    slow = tmp_path / "slow.wav"
    write_wav(slow, np.zeros(4000, np.int16), 4000)
    code, err = mic(capsys, "--input-wav", str(slow), "--output-wav", str(tmp_path / "o.wav"))
    assert code == 2 and "4000 Hz is below 8000 Hz" in err
