"""`[models] llm = DIR` with an open diffusion LM: the server answers a call with it.

The checkpoint is a random DiffusionGemma of transformers' own class (the family whose
code ships inside transformers, so nothing is downloaded or trusted), carrying the shipped
brain's tokenizer, as a checkpoint fine-tuned for the agent would carry the turn format's
tokens. Its weights are random, so what it says is not judged; what is: `serve` picks the
adapter from the folder's own config, the engine decodes every request through the
adapter's backend under the restaurant pack's grammar (any call it makes validates), and
the caller hears an answer. A folder whose tokenizer lacks the turn tokens is refused at
start with an error that names them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers")

from engine.adapters import AdapterError
from engine.adapters.diffusion_gemma import DiffusionGemmaBackend
from engine.tokenizer import TextTokenizer
from tests.e2e.test_pipeline_call import GENEROUS_BUDGETS, RATE_HZ, loud_ms, spoken
from tests.fakes import settings, url
from tests.packs import restaurant
from tests.unit.adapter_checkpoints import gemma_checkpoint
from voice_agent.agent import AgentConfig
from voice_agent.pipeline import Pipeline, PipelineSession
from voice_agent.pipeline.brain import BRAIN_CHECKPOINT, load_brain
from voice_agent.simulator import simulate_call
from voice_agent.transports.server import VoiceServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


async def test_a_call_is_answered_by_an_open_dllm_checkpoint(tmp_path: Path) -> None:
    tok = TextTokenizer.load(BRAIN_CHECKPOINT / "tokenizer.json")
    checkpoint = gemma_checkpoint(tmp_path / "gemma", tok)
    cfg = settings(
        budgets=GENEROUS_BUDGETS,
        models={"tts_backend": "espeak", "llm": str(checkpoint)},
        tools={"pack": "tests.packs.restaurant"},
        pipeline={"shop_db": tmp_path / "calls.sqlite", "engine_max_batch": 4},
    )
    caller = spoken((4.0, "Could I book a table for four tomorrow at seven?"))
    async with Pipeline(cfg) as pipeline:
        assert isinstance(pipeline.engine.backend, DiffusionGemmaBackend)
        assert pipeline.engine.max_batch == 4
        sessions: list[PipelineSession] = []

        def factory() -> PipelineSession:
            sessions.append(pipeline.new_session())
            return sessions[-1]

        async with VoiceServer(cfg, factory) as server:
            summary, reply = await simulate_call(
                url(server), caller, RATE_HZ, idle_after_reply_s=1.0, max_tail_s=10.0
            )
            assert pipeline.health()["alive"]
        steps_in_call = pipeline.engine.timer.steps
        agent = pipeline.new_agent()
        agent.config = AgentConfig(min_confidence=0.0, max_tool_steps=1)
        text_reply = await agent.respond("a table for two on friday please")
        assert pipeline.engine.crashes == 0, pipeline.engine.last_crash

    assert summary.close_code == 1000 and summary.turns == 1
    assert loud_ms(reply, summary.turn_end_ms[0], summary.duration_ms) > 300  # answered
    assert steps_in_call > 0  # the call's answer came from the adapter's decode steps
    models = restaurant.PACK.argument_models
    calls = [c for s in sessions for t in s.turns for c in t.tool_calls]
    for call in [*calls, *text_reply.tool_calls]:  # whatever it chose: schema-valid
        models[call.tool].model_validate(call.arguments)


def test_an_open_dllm_without_the_turn_tokens_is_refused(tmp_path: Path) -> None:
    plain = gemma_checkpoint(tmp_path / "plain")
    with pytest.raises(AdapterError, match=r"lacks the turn format's tokens \(<pad> <mask>"):
        load_brain(plain, "cpu", rows=2)
