"""Settings: one validated model for the whole process.

Sources, strongest first: explicit overrides (CLI flags), environment variables with the
`VOICE_AGENT_` prefix (nested fields joined by `__`, e.g. `VOICE_AGENT_SERVER__PORT=9000`),
an optional TOML file (`--config FILE` or `VOICE_AGENT_CONFIG=FILE`), then the defaults.
Invalid values fail at start with `ConfigError`, whose message names each bad field.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

ENV_PREFIX = "VOICE_AGENT_"
CONFIG_FILE_ENV = ENV_PREFIX + "CONFIG"
POSTGRES_URL_SCHEMES = ("postgresql://", "postgres://")


class ConfigError(Exception):
    """The configuration is invalid; the message says which field and why."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535, description="0 picks a free port")
    max_calls: int = Field(
        8, ge=1, description="concurrent calls; the next start is refused (1013)"
    )
    max_waiting: int = Field(
        16, ge=1, description="connections still waiting for their start; more get 1013"
    )
    max_per_address: int = Field(
        4,
        ge=1,
        description="connections from one non-loopback address (waiting or in a "
        "call); more get 1013. Behind a trusted proxy the address is the caller's, from "
        "X-Forwarded-For; a loopback peer without it is exempt",
    )
    trusted_proxies: tuple[str, ...] = Field(
        ("127.0.0.1", "::1"),
        description="peers whose X-Forwarded-For names the caller's address (a local "
        "nginx); () trusts no header",
    )

    @field_validator("trusted_proxies")
    @classmethod
    def _addresses(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        for value in values:
            ipaddress.ip_address(value)  # its ValueError names the bad one
        return values

    max_message_bytes: int = Field(
        64 * 1024, ge=1024, description="largest websocket message accepted (close 1009)"
    )
    start_timeout_s: float = Field(10.0, gt=0, description="time allowed before `start`")
    slow_consumer_timeout_s: float = Field(
        5.0, gt=0, description="a send blocked this long ends the call (close 4408)"
    )
    public_url: str | None = Field(
        None,
        description="the wss:// base URL Twilio dials, used to check X-Twilio-Signature "
        "behind a proxy; by default it is rebuilt from the Host header",
    )
    pcm_enabled: bool = Field(True, description="serve /pcm (off: it answers 404)")
    drain_timeout_s: float = Field(
        30.0,
        ge=0,
        description="on SIGTERM/SIGINT, how long calls in progress may go on while no new "
        "call is taken (/readyz 503); then they are closed with 1001. A second signal "
        "stops at once",
    )
    insecure: bool = Field(
        False,
        description="serve a non-loopback address with an endpoint that has no auth (lab "
        "use only; logged loudly). Without it such a server refuses to start",
    )


class AuthSettings(_Section):
    pcm_secret: SecretStr | None = Field(
        None, description="when set, /pcm needs `Authorization: Bearer S` or `?token=S`"
    )
    twilio_auth_token: SecretStr | None = Field(
        None, description="when set, /twilio checks the X-Twilio-Signature handshake header"
    )
    twilio_stream_token: SecretStr | None = Field(
        None,
        description="when set (and no auth token), /twilio needs a `token` custom "
        "parameter in the start message",
    )
    twilio_call_token_secret: SecretStr | None = Field(
        None,
        description="when set, /twilio needs a per-call `token` (voice-agent twiml "
        "--call-sid ... --caller ...) bound to the call's CallSid and caller, used once",
    )
    call_token_max_ttl_s: int = Field(
        3600, gt=0, description="call tokens minted for longer than this are refused"
    )


class BudgetSettings(_Section):
    """Latency budgets in milliseconds (the pipeline enforces them)."""

    turn_ms: int = Field(1200, gt=0, description="end of caller speech to first reply audio")
    end_of_turn_ms: int = Field(
        450,
        gt=0,
        description="end of speech to the end-of-turn decision: the hearing "
        "section's end-of-turn silence (400 ms, chosen by measurement) plus one VAD window",
    )
    asr_final_ms: int = Field(250, gt=0)
    engine_ms: int = Field(500, gt=0)
    tts_first_audio_ms: int = Field(250, gt=0)

    @model_validator(mode="after")
    def _stages_fit_turn(self) -> BudgetSettings:
        if self.engine_ms > self.turn_ms:
            raise ValueError(f"engine_ms={self.engine_ms} exceeds turn_ms={self.turn_ms}")
        return self


class ModelSettings(_Section):
    asr_model: Literal["tiny.en", "base"] = "tiny.en"
    device: Literal["cpu", "cuda"] = "cpu"
    tts_voice: str = "en_US-joe-medium"
    tts_backend: Literal["hibari", "piper", "espeak"] = "hibari"
    llm: str = Field("embedded", description="`embedded` or a local checkpoint directory")


class HearingSettings(_Section):
    """VAD, turn detection and streaming ASR (`voice_agent.hearing`).

    The ASR model and its device are chosen in `[models]` (`asr_model`, `device`).
    """

    speech_threshold: float = Field(0.5, gt=0, lt=1, description="VAD probability to start")
    silence_threshold: float = Field(0.35, gt=0, lt=1, description="VAD probability to stay")
    min_speech_ms: int = Field(200, gt=0, description="shorter speech is not a turn")
    onset_gap_ms: int = Field(96, gt=0, description="dip tolerated while speech starts")
    end_of_turn_silence_ms: int = Field(
        400, gt=0, description="silence that ends a turn (fixed rule; semantic fallback)"
    )
    end_of_turn: Literal["semantic", "silence"] = Field(
        "semantic",
        description="semantic: Smart Turn v3.2 and the pause's words decide between the two "
        "silences below; silence: end_of_turn_silence_ms alone",
    )
    complete_silence_ms: int = Field(
        160, gt=0, description="semantic: silence that ends a turn that sounds finished"
    )
    incomplete_silence_ms: int = Field(
        1200, gt=0, description="semantic: silence that ends one that does not (yet)"
    )
    complete_threshold: float = Field(
        0.5, gt=0, lt=1, description="semantic: Smart Turn probability that counts as finished"
    )
    reask_ms: int = Field(192, gt=0, description="semantic: ask again after this much more silence")
    words_wait_ms: int = Field(
        600, ge=0, description="semantic: wait for the pause's transcript this long at most"
    )
    check_words: bool = Field(
        True, description="semantic: a pause whose words end mid-sentence is not finished"
    )
    barge_in_ms: int = Field(500, gt=0, description="speech over the agent that interrupts")
    barge_in_threshold: float = Field(0.5, gt=0, lt=1)
    partial_interval_ms: int = Field(500, gt=0, description="new speech between partials")
    partial_context_s: float = Field(10.0, ge=2, le=30, description="partials' encoder window")
    final_context_s: float = Field(
        0.0, ge=0, le=30, description="finals' encoder window for turns that fit (0: 30 s)"
    )
    compute_type: Literal["auto", "int8", "int8_float32", "int8_float16", "float16", "float32"] = (
        Field("auto", description="auto: int8 on CPU, float16 on CUDA")
    )
    cpu_threads: int = Field(2, ge=0, description="0: CTranslate2's default")
    beam_size: int = Field(1, ge=1, le=10, description="finals' beam; 1 is greedy")
    initial_prompt: str | None = Field(None, description="vocabulary hint, e.g. shop name")
    hotwords: str | None = Field(None, description="product names to favour")
    max_pending: int = Field(4, ge=1, description="decodes queued on the shared worker")
    max_batch: int = Field(
        4, ge=1, description="waiting decodes of one kind and window run as one batch (1: off)"
    )
    cache_dir: Path | None = Field(None, description="where Whisper base's halves are joined")
    max_turn_s: float = Field(
        30.0,
        ge=0,
        description="a turn this long is ended where it is (a monologue, music on the "
        "line), so its final stays short and other calls' finals do not wait; 0: no limit",
    )

    @model_validator(mode="after")
    def _hysteresis(self) -> HearingSettings:
        if self.silence_threshold > self.speech_threshold:
            raise ValueError(
                f"silence_threshold={self.silence_threshold} exceeds "
                f"speech_threshold={self.speech_threshold}"
            )
        if not 64 <= self.complete_silence_ms <= self.incomplete_silence_ms:
            raise ValueError(
                f"need 64 <= complete_silence_ms ({self.complete_silence_ms}) <= "
                f"incomplete_silence_ms ({self.incomplete_silence_ms})"
            )
        return self


class PipelineSettings(_Section):
    """The call session (`voice_agent.pipeline`): where it keeps state and how it trusts
    the model. The brain checkpoint is `[models] llm`."""

    records: Path | None = Field(
        None, description="append one JSON line per turn (TurnRecord) to this file"
    )
    records_max_mb: float = Field(
        100.0, ge=0, description="rotate the records file before it passes this size (0: never)"
    )
    records_keep: int = Field(5, ge=1, description="rotated records files kept (.1 newest)")
    record_text: bool = Field(
        False,
        description="turn records (file and telemetry) carry what the caller was heard to "
        "say and what the agent said; off by default: it is personal data",
    )
    shop_db: Path = Field(
        Path("out/bike-shop.sqlite"), description="the bike shop's SQLite file (created)"
    )
    min_confidence: float = Field(
        0.5, ge=0, le=1, description="answers less sure than this get the repeat request"
    )
    decode_again: bool = Field(
        True,
        description="an unsure or unparseable first answer is decoded once more, one token "
        "per step, before the repeat request",
    )
    engine_max_batch: int = Field(8, ge=1, description="engine requests decoded together")
    tts_slots: int = Field(
        0,
        ge=0,
        description="reply syntheses at once across calls (0: one per two cores); "
        "waiting first sentences go before later ones",
    )
    preemptive: bool = Field(
        True,
        description="decode a draft answer when the caller pauses, before the end of the "
        "turn is certain; used when the final transcript has the same words",
    )
    preemptive_max_queue: int = Field(
        0, ge=0, description="draft only while at most this many engine requests wait"
    )
    max_call_s: float = Field(
        900.0, gt=0, description="a call this long gets the goodbye and is ended"
    )
    silence_hangup_s: float = Field(
        60.0, gt=0, description="no caller speech for this long: goodbye and hang up"
    )
    max_turns: int = Field(60, ge=1, description="caller turns per call; then goodbye")


class ToolsSettings(_Section):
    """Which tool pack the agent uses and where it keeps its state."""

    pack: str = Field(
        "bike_shop",
        min_length=1,
        pattern=r"^[A-Za-z_][\w.]*(:[A-Za-z_]\w*)?$",
        description="the tool pack (tools/core.py): a package under tools/ (bike_shop), or "
        "an importable module defining PACK (module:NAME for another name)",
    )
    database_url: SecretStr | None = Field(
        None,
        description="postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME: the shop in PostgreSQL, "
        "shared by every worker of a fleet; None: the SQLite file [pipeline] shop_db",
    )

    @model_validator(mode="after")
    def _postgres_only(self) -> ToolsSettings:
        url = self.database_url
        if url is not None and not url.get_secret_value().startswith(POSTGRES_URL_SCHEMES):
            raise ValueError("database_url must start with postgresql:// (or postgres://)")
        return self


class TelemetrySettings(_Section):
    """Live call events over MQTT (`voice_agent.telemetry`); off unless `broker_url` is set.
    The pipeline never waits on the broker: events go through a bounded buffer."""

    broker_url: str | None = Field(
        None,
        description="mqtt://HOST[:PORT], or mqtts:// for TLS; None publishes nothing",
        pattern=r"^mqtts?://",
    )
    username: str | None = Field(None, min_length=1, description="the broker login's user")
    password: SecretStr | None = Field(
        None, description="its password (better in VOICE_AGENT_TELEMETRY__PASSWORD)"
    )
    ca_file: Path | None = Field(
        None, description="mqtts://: trust only this CA bundle (PEM) instead of the system's"
    )
    node: str = Field(
        default_factory=socket.gethostname,
        min_length=1,
        pattern=r"^[^/+#\s]+$",
        description="this process's name in the topic tree, voice-agent/<node>/...; "
        "default the host name",
    )
    buffer_size: int = Field(
        1000, ge=1, description="events held while the broker is slow or away; oldest dropped"
    )
    close_timeout_s: float = Field(
        2.0, ge=0, description="at shutdown, how long buffered events may take to go out"
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    server: ServerSettings = ServerSettings()
    auth: AuthSettings = AuthSettings()
    budgets: BudgetSettings = BudgetSettings()
    models: ModelSettings = ModelSettings()
    hearing: HearingSettings = HearingSettings()
    pipeline: PipelineSettings = PipelineSettings()
    tools: ToolsSettings = ToolsSettings()
    telemetry: TelemetrySettings = TelemetrySettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls))


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build the settings from overrides, environment, TOML file and defaults.

    `overrides` are nested dicts by section, e.g. `server={"port": 9000}`; None values
    are dropped so unset CLI flags do not shadow the environment. Raises ConfigError.
    """
    if config_file is None and os.environ.get(CONFIG_FILE_ENV):
        config_file = Path(os.environ[CONFIG_FILE_ENV])
    if config_file is not None:
        _check_toml(config_file)
    cleaned = {
        section: {k: v for k, v in values.items() if v is not None}
        for section, values in overrides.items()
    }

    class _FileSettings(Settings):
        model_config = SettingsConfigDict(toml_file=config_file)

    try:
        # BaseSettings' typed __init__ lists only its own options; sections go in as data.
        file_settings: Any = _FileSettings
        return Settings.model_validate(file_settings(**cleaned).model_dump())
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'settings'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ConfigError(f"invalid configuration: {problems}") from None


def _check_toml(path: Path) -> None:
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
