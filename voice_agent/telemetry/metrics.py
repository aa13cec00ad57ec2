"""Prometheus metrics for one worker process, served on the server's port at `/metrics`.

What an operator's Prometheus scrapes (text exposition format, `prometheus-client`):

- `voice_agent_calls_in_progress` (gauge), `voice_agent_calls_total`,
  `voice_agent_turns_total`;
- `voice_agent_stage_seconds{stage}` (histogram: end_of_turn, asr_final, engine, tool,
  tts_first_audio, send, turn) and `voice_agent_answer_seconds` (end of speech to the
  answer's first frame; a filler is not an answer);
- `voice_agent_degrades_total{stage,action}`, `voice_agent_tool_calls_total{tool,outcome}`;
- `voice_agent_closes_total{path,code}` (websocket close codes: 1013 refusals, 4429 too
  fast, ...) and `voice_agent_http_refusals_total{status}` (401, 403, 404 at the
  handshake).

`target_info{node}` names the worker (`[telemetry] node`), so a fleet's workers can be
told apart beside Prometheus's own `instance` label. Each `Metrics` has its own registry
(no process-wide state: tests and several pipelines in one process do not collide).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from voice_agent.turn_record import Stage, TurnRecord

_MS_PER_S = 1000.0
STAGE_BUCKETS_S = (0.025, 0.05, 0.1, 0.2, 0.3, 0.45, 0.6, 0.8, 1.0, 1.2, 1.6, 2.0, 3.0, 5.0)
"""Histogram buckets (seconds) around the 1.2 s turn budget."""


class Metrics:
    """The process's counters; the pipeline feeds turns and calls, the server closes."""

    def __init__(self, node: str) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.set_target_info({"node": node})
        r = self.registry
        self.calls_in_progress = Gauge(
            "voice_agent_calls_in_progress", "Calls being answered now", registry=r
        )
        self.calls = Counter("voice_agent_calls", "Calls started", registry=r)
        self.turns = Counter("voice_agent_turns", "Caller turns answered", registry=r)
        self.stage_seconds = Histogram(
            "voice_agent_stage_seconds",
            "Duration of each stage of a turn",
            ["stage"],
            buckets=STAGE_BUCKETS_S,
            registry=r,
        )
        self.answer_seconds = Histogram(
            "voice_agent_answer_seconds",
            "End of the caller's speech to the answer's first "
            "frame sent (a filler is not an answer)",
            buckets=STAGE_BUCKETS_S,
            registry=r,
        )
        self.degrades = Counter("voice_agent_degrades", "Degrade actions taken",
                                ["stage", "action"], registry=r)  # fmt: skip
        self.tool_calls = Counter("voice_agent_tool_calls", "Tool calls by outcome",
                                  ["tool", "outcome"], registry=r)  # fmt: skip
        self.closes = Counter("voice_agent_closes", "Websocket calls closed, by close code",
                              ["path", "code"], registry=r)  # fmt: skip
        self.http_refusals = Counter(
            "voice_agent_http_refusals",
            "Handshakes refused, by HTTP status",
            ["status"],
            registry=r,
        )

    # ------------------------------------------------------------ the pipeline's side

    def call_started(self) -> None:
        self.calls.inc()
        self.calls_in_progress.inc()

    def call_ended(self) -> None:
        self.calls_in_progress.dec()

    def turn(self, record: TurnRecord) -> None:
        """One finished turn's figures."""
        self.turns.inc()
        for stage in Stage:
            took_ms = record.duration_ms(stage)
            if took_ms is not None and took_ms >= 0:
                self.stage_seconds.labels(stage.value).observe(took_ms / _MS_PER_S)
        if record.answer_audio_sent_at_ms is not None:
            self.answer_seconds.observe(record.answer_audio_sent_at_ms / _MS_PER_S)
        for degrade in record.degrades:
            self.degrades.labels(degrade.stage.value, degrade.action.value).inc()
        for call in record.tool_calls:
            outcome = call.outcome.value if call.outcome is not None else "running"
            self.tool_calls.labels(call.name, outcome).inc()

    # ------------------------------------------------------------ the server's side

    def call_closed(self, path: str, code: int) -> None:
        self.closes.labels(path, str(code)).inc()

    def http_refused(self, status: int) -> None:
        self.http_refusals.labels(str(status)).inc()

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
