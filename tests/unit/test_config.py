from __future__ import annotations

from pathlib import Path

import pytest

from voice_agent.config import ConfigError, load_settings


def test_defaults() -> None:
    s = load_settings()
    assert s.server.port == 8080 and s.budgets.engine_ms == 500
    assert s.auth.pcm_secret is None


def test_env_then_toml_then_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toml = tmp_path / "agent.toml"
    toml.write_text('[server]\nport = 9001\nmax_calls = 3\n[auth]\npcm_secret = "abc"\n')
    s = load_settings(toml)
    assert (s.server.port, s.server.max_calls) == (9001, 3)
    assert s.auth.pcm_secret is not None and s.auth.pcm_secret.get_secret_value() == "abc"
    assert "abc" not in repr(s)
    monkeypatch.setenv("VOICE_AGENT_SERVER__PORT", "9002")
    assert load_settings(toml).server.port == 9002  # env beats the file
    assert load_settings(toml, server={"port": 9003}).server.port == 9003  # flags beat env
    assert load_settings(toml, server={"port": None}).server.port == 9002  # unset flag


def test_config_file_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toml = tmp_path / "a.toml"
    toml.write_text("[budgets]\nengine_ms = 300\n")
    monkeypatch.setenv("VOICE_AGENT_CONFIG", str(toml))
    assert load_settings().budgets.engine_ms == 300


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[server]\nport = 70000\n", "server.port"),
        ("[server]\nprot = 1\n", "server.prot"),
        ("[budgets]\nengine_ms = 5000\n", "exceeds turn_ms"),
        ("[models]\nasr_model = 'huge'\n", "models.asr_model"),
        ("[server\n", "not valid TOML"),
    ],
)
def test_bad_config_names_the_field(tmp_path: Path, text: str, message: str) -> None:
    toml = tmp_path / "bad.toml"
    toml.write_text(text)
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        load_settings(toml)


def test_bad_env_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOICE_AGENT_SERVER__MAX_CALLS", "many")
    with pytest.raises(ConfigError, match=r"server\.max_calls"):
        load_settings()


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_settings(Path("/nonexistent/agent.toml"))
