"""What every call shares: the engine, the recognizer, the synthesizer, the tools, the log.

    async with Pipeline(settings) as pipeline:
        async with VoiceServer(settings, pipeline.new_session):
            ...

`Pipeline` loads everything once per process (the checkpoint, Whisper, the TTS voice,
the fixed phrases, the tool pack `[tools] pack` and its database) and hands each call a
`PipelineSession`.
Loading runs in worker threads, so a server that starts it keeps its event loop free.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engine.batching import Engine
from tools.core import PackState, ToolPack, load_pack
from voice_agent.agent import Agent, AgentConfig
from voice_agent.agent.tools import RunTool
from voice_agent.audio import PHONE_RATE_HZ
from voice_agent.clock import Clock, MonotonicClock
from voice_agent.config import Settings
from voice_agent.dialogue.hints import CallerHints, for_card
from voice_agent.dialogue.phrases import phrases
from voice_agent.events import Pcm16
from voice_agent.hearing.asr import AsrWorker
from voice_agent.hearing.endpoint import SmartTurnModel, TurnModelWorker
from voice_agent.hearing.listener import Listener
from voice_agent.hearing.settings import asr_config, streaming_config, turn_config
from voice_agent.pipeline.brain import Brain, load_brain, resolve_checkpoint
from voice_agent.pipeline.records import RecordWriter
from voice_agent.pipeline.session import PipelineSession
from voice_agent.speech import PhraseCache, SynthesisGate, Synthesizer, default_synthesizer
from voice_agent.telemetry import CallTelemetry, NodeState
from voice_agent.telemetry.metrics import Metrics
from voice_agent.telemetry.topics import status
from voice_agent.turn_record import Budgets, ToolCallRecord, TurnRecord

if TYPE_CHECKING:
    from voice_agent.telemetry.publisher import MqttPublisher

log = logging.getLogger(__name__)


class Pipeline:
    """Process-wide resources for calls. Use `async with`, or `start()` then `close()`."""

    def __init__(
        self,
        settings: Settings,
        *,
        synthesizer: Synthesizer | None = None,
        clock: Clock | None = None,
        shop_now: Callable[[], datetime] = datetime.now,
        run_tool: RunTool | None = None,
    ) -> None:
        """`synthesizer` defaults to `[models] tts_backend` (hibari, else espeak-ng);
        `shop_now` is the business's wall clock (tools resolve "tomorrow" with it);
        `run_tool` runs the tool pack's tools (default the pack's own `call`; tests pass
        a failing or hanging one)."""
        self.settings = settings
        self.clock = clock or MonotonicClock()
        self.budgets = Budgets.from_settings(settings.budgets)
        slots = settings.pipeline.tts_slots or None
        self.synthesis_gate: SynthesisGate | None = SynthesisGate(slots)
        """Orders every call's reply syntheses: first sentences first."""
        self.checkpoint_path = resolve_checkpoint(settings.models.llm)
        self._synth = synthesizer
        self._shop_now = shop_now
        self._run_tool = run_tool
        self._brain: Brain | None = None
        self._hints: CallerHints | None = None
        self._engine: Engine | None = None
        self._asr: AsrWorker | None = None
        self._end_of_turn: TurnModelWorker | None = None
        self._pack: ToolPack[Any] | None = None
        self._tool_state: PackState[Any] | None = None
        self._phrases: dict[int, PhraseCache] = {}
        records = settings.pipeline.records
        self._records = (
            RecordWriter(
                records,
                max_bytes=round(settings.pipeline.records_max_mb * 2**20),
                keep=settings.pipeline.records_keep,
            )
            if records is not None
            else None
        )
        self._active_calls = 0
        self._publisher: MqttPublisher | None = None
        self.metrics = Metrics(settings.telemetry.node)
        """Prometheus figures of this process (`/metrics` on the server's port)."""
        self.telemetry: CallTelemetry | None = None
        """Set by `start()` when `[telemetry] broker_url` is."""

    async def start(self) -> None:
        """Load models and open the tool pack's state. Raises FileNotFoundError/ValueError
        for a bad checkpoint or an unknown pack, ModelNotInstalledError/TtsUnavailable
        naming a missing package."""
        cfg = self.settings
        self._pack = await asyncio.to_thread(load_pack, cfg.tools.pack)
        device = cfg.models.device
        rows = cfg.pipeline.engine_max_batch
        brain = await asyncio.to_thread(load_brain, self.checkpoint_path, device, rows)
        self._brain = brain
        self._hints = await asyncio.to_thread(for_card, brain.prompt_hints)
        self._engine = Engine(
            brain.model,
            brain.ids,
            max_batch=rows,
            clock=self.clock.now,
        )
        self._engine.start()
        self._asr = await asyncio.to_thread(AsrWorker, asr_config(cfg))
        if cfg.hearing.end_of_turn == "semantic":
            self._end_of_turn = TurnModelWorker(await asyncio.to_thread(SmartTurnModel))
        if self._synth is None:
            self._synth = await asyncio.to_thread(default_synthesizer, cfg.models.tts_backend)
        url = cfg.tools.database_url
        where = url.get_secret_value() if url is not None else cfg.pipeline.shop_db
        self._tool_state = await asyncio.to_thread(self._pack.open, str(where), self._shop_now)
        await self.phrase_cache(PHONE_RATE_HZ).warm_async(phrases().all())
        await self._start_telemetry()
        log.info("pipeline ready: brain %s (%s, prompts up to %d tokens), voice %s, tools %s",
                 self.checkpoint_path, brain.kind, brain.prompt_budget, self.synthesizer.voice,
                 self._pack.name)  # fmt: skip

    async def _start_telemetry(self) -> None:
        cfg = self.settings.telemetry
        if cfg.broker_url is None:
            return
        try:
            from voice_agent.telemetry.publisher import (
                BrokerAddress,
                MqttPublisher,
                PublisherConfig,
            )
        except ImportError as exc:
            raise RuntimeError(
                f"[telemetry] broker_url needs aiomqtt (pip install 'voice-agent[reports]'): {exc}"
            ) from None
        config = PublisherConfig(buffer_size=cfg.buffer_size, close_timeout_s=cfg.close_timeout_s)
        offline = status(cfg.node, NodeState.OFFLINE, time.time())
        password = cfg.password.get_secret_value() if cfg.password is not None else None
        broker = BrokerAddress.parse(cfg.broker_url, cfg.username, password, cfg.ca_file)
        self._publisher = MqttPublisher(
            broker,
            config,
            will=offline,
            on_connect=status(cfg.node, NodeState.ONLINE, time.time()),
            on_close=offline,
        )
        await self._publisher.start()
        self.telemetry = CallTelemetry(cfg.node, self._publisher, time.time)

    async def close(self) -> None:
        if self._records is not None and not await asyncio.to_thread(self._records.close):
            log.error("turn records: some were still waiting for the disk at close")
        if self._publisher is not None:
            await self._publisher.close()
            log.info("telemetry: %s", self._publisher.stats)
        if self._engine is not None:
            await self._engine.close()
        if self._asr is not None:
            await asyncio.to_thread(self._asr.close)
        if self._end_of_turn is not None:
            self._end_of_turn.close()
        if self._tool_state is not None:
            self._tool_state.close()

    async def __aenter__(self) -> Pipeline:
        try:
            await self.start()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ for sessions

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            raise RuntimeError("the pipeline is not started")
        return self._engine

    @property
    def synthesizer(self) -> Synthesizer:
        if self._synth is None:
            raise RuntimeError("the pipeline is not started")
        return self._synth

    @property
    def pack(self) -> ToolPack[Any]:
        if self._pack is None:
            raise RuntimeError("the pipeline is not started")
        return self._pack

    @property
    def tool_state(self) -> PackState[Any]:
        """The pack's state in this process (its database)."""
        if self._tool_state is None:
            raise RuntimeError("the pipeline is not started")
        return self._tool_state

    def new_agent(self) -> Agent:
        if self._brain is None or self._tool_state is None or self._pack is None:
            raise RuntimeError("the pipeline is not started")
        config = AgentConfig(
            min_confidence=self.settings.pipeline.min_confidence,
            decode_again=self.settings.pipeline.decode_again,
            max_prompt_tokens=self._brain.prompt_budget,
        )
        ctx = self._tool_state.context()
        return Agent(self.engine, self._brain.tokenizer, self._pack, ctx, config=config,
                     run_tool=self._run_tool, clock=self.clock, hints=self._hints,
                     consent=self._pack.consent)  # fmt: skip

    def new_listener(self, sample_rate_hz: int) -> Listener:
        if self._asr is None:
            raise RuntimeError("the pipeline is not started")
        s = self.settings
        return Listener(self._asr, sample_rate_hz, turn_config(s), streaming_config(s),
                        end_of_turn=self._end_of_turn)  # fmt: skip

    def phrase_cache(self, rate_hz: int) -> PhraseCache:
        """The fixed phrases at `rate_hz` (one cache per rate, shared by calls)."""
        cache = self._phrases.get(rate_hz)
        if cache is None:
            cache = self._phrases.setdefault(rate_hz, PhraseCache(self.synthesizer, rate_hz))
        return cache

    async def phrase(self, text: str, rate_hz: int) -> Pcm16:
        """A fixed phrase's audio at `rate_hz`: cached (the phone rate is warmed at
        start), or synthesized off the loop and cached."""
        cache = self.phrase_cache(rate_hz)
        audio = cache.get(text)
        if audio is None:
            audio = await asyncio.to_thread(cache.synthesize, text)
        return audio

    def health(self) -> dict[str, object]:
        """What a supervisor or load balancer asks (`/healthz`, `/readyz`): `alive` is
        False when the engine is dead or closed or the tools' database cannot be written;
        the rest are figures (engine crashes survived, ASR decodes pending, broker)."""
        engine, asr, state, pub = self._engine, self._asr, self._tool_state, self._publisher
        engine_alive = engine is not None and engine.alive
        db_ok = state is not None and state.writable()
        return {
            "alive": engine_alive and db_ok,
            "engine": {"alive": engine_alive, "crashes": engine.crashes if engine else 0,
                       "queue_depth": engine.queue_depth if engine else 0},
            "asr_pending": asr.pending if asr is not None else 0,
            "database_writable": db_ok,
            "broker_connected": pub.stats.connected if pub is not None else None,
            "active_calls": self._active_calls,
        }  # fmt: skip

    @property
    def active_calls(self) -> int:
        """Calls in progress (between `call_started` and `call_ended`)."""
        return self._active_calls

    def call_started(self, call_id: str) -> None:
        """A session's call began (counted; published when telemetry is on)."""
        self._active_calls += 1
        self.metrics.call_started()
        if self.telemetry is not None:
            self.telemetry.call_started(call_id, self._active_calls)

    def call_ended(self, call_id: str, turns: int) -> None:
        self._active_calls -= 1
        self.metrics.call_ended()
        if self.telemetry is not None:
            self.telemetry.call_ended(call_id, turns, self._active_calls)

    def tool_called(self, call_id: str, turn: int, call: ToolCallRecord) -> None:
        """A tool call finished (the turn tracker's hook)."""
        if self.telemetry is not None:
            self.telemetry.tool_called(call_id, turn, call)

    def write_record(self, record: TurnRecord) -> None:
        """Queue the turn's record for `[pipeline] records` (if set; written by its own
        thread) and publish it (telemetry); never raises, never waits on the disk or the
        broker."""
        self.metrics.turn(record)
        if self.telemetry is not None:
            self.telemetry.turn_completed(record)
        if self._records is not None:
            self._records.write(record)

    def new_session(self) -> PipelineSession:
        """A session for one call (the server's session factory)."""
        return PipelineSession(self)
