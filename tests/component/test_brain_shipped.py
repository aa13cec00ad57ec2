"""The shipped brain loads as the embedded default and answers held-out calls."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest
import torch

from engine.batching import Engine
from engine.checkpoint import ModelCard, load, save
from engine.constraints import CallGrammar
from engine.generate import Request, generate
from engine.model import DiffusionLM
from engine.schedule import Schedule
from scripts import eval_brain, train_brain
from tools.bike_shop.db import ShopContext
from tools.bike_shop.pack import PACK
from tools.bike_shop.schemas import ARGUMENT_MODELS
from tools.bike_shop.shop import open_shop
from voice_agent.agent import (
    Agent,
    AgentConfig,
    AgentReply,
    ReplyKind,
    ToolOutcome,
    prompt_budget,
)
from voice_agent.brain.phrasing import Split
from voice_agent.brain.scenarios import generate as dialogues
from voice_agent.brain.scoring import Scorer
from voice_agent.dialogue.format import ANSWER_TOKENS, AgentCall
from voice_agent.dialogue.hints import HINTS_VERSION, for_card
from voice_agent.grounding import ground

ROOT = Path(__file__).resolve().parents[2]
BRAIN = ROOT / "engine" / "checkpoints" / "brain-dlm"

pytestmark = pytest.mark.integration


def test_the_brain_answers_held_out_calls_with_valid_actions() -> None:
    brain = load(BRAIN)
    tok, grammar = brain.tokenizer, CallGrammar(brain.tokenizer, ARGUMENT_MODELS)
    assert brain.card.kind == "diffusion" and brain.card.config.max_seq_len == 256
    steps = [ex for d in dialogues(7, 6, Split.HELDOUT) for ex in d.examples][:40]
    assert any(isinstance(s.action, AgentCall) for s in steps)
    scorer = Scorer(ARGUMENT_MODELS)
    hints = for_card(brain.card.prompt_hints)  # as the agent shows them, when trained with them
    for step in steps:
        if hints is not None:
            step = replace(step, history=hints.annotate(step.history))
        prompt = tuple(tok.encode(step.prompt(tok, prompt_budget(brain.card))))
        schedule = Schedule(threshold=0.9, max_new_tokens=ANSWER_TOKENS, effort=step.effort)
        g = generate(brain.model, tok.ids, Request(prompt, schedule, grammar=grammar, grounder=ground),
                     time.monotonic)  # fmt: skip
        assert g.token_ids  # never empty
        if tok.ids.call in g.token_ids:  # every call the brain makes validates
            ids = list(g.token_ids)
            grammar.parse(ids[ids.index(tok.ids.call) + 1 :])
        scorer.add(step, tok.decode(g.token_ids))
    report = scorer.report()
    # Measured on 363 held-out actions (eval_brain.py, 2026-12-06, sixth stage):
    # speak-vs-call 0.97, exact call 0.97.
    assert report["speak_vs_call"] >= 0.7
    assert report["unparseable_answers"] <= 4


WEDNESDAY_9AM = datetime(2026, 12, 2, 9, 0)


def test_the_brain_books_a_tune_up_and_relays_the_booking(tmp_path: Path) -> None:
    """The e2e booking call's words as text, through the agent and the real engine with
    the prompt budget the pipeline gives it (the card's trained prompt length): the
    read-back, the booking in SQLite, its relay after the tool's result (the prompt is
    past 128 tokens by then) and the goodbye."""
    brain = load(BRAIN)
    assert brain.card.prompt_tokens is not None
    assert prompt_budget(brain.card) == brain.card.prompt_tokens

    async def call() -> list[AgentReply]:
        engine = Engine(brain.model, brain.tokenizer.ids, max_batch=2)
        engine.start()
        db = open_shop(tmp_path / "shop.sqlite", WEDNESDAY_9AM.date())
        config = AgentConfig(max_prompt_tokens=prompt_budget(brain.card))
        agent = Agent(engine, brain.tokenizer, PACK, ShopContext(db, lambda: WEDNESDAY_9AM),
                      config=config, hints=for_card(brain.card.prompt_hints))  # fmt: skip
        agent.greet()
        try:
            return [await agent.respond(line) for line in (
                "Hi, I'd like to book a tune-up for tomorrow at 10 am. My name is Anna.",
                "Yes please.",
                "Thanks, bye.",
            )]  # fmt: skip
        finally:
            await engine.close()
            db.close()

    replies = asyncio.run(call())
    said = [r.text for r in replies]
    assert said[0].startswith("So a tune-up tomorrow at ten o'clock for Anna"), said
    [booking] = replies[1].tool_calls
    assert booking.tool == "book_service" and booking.outcome is ToolOutcome.OK, said
    assert said[1].startswith("You're booked in for a tune-up tomorrow at ten o'clock"), said
    assert replies[2].kind is ReplyKind.HANG_UP, said
    with sqlite3.connect(tmp_path / "shop.sqlite") as conn:
        [row] = conn.execute("SELECT name, start, service FROM bookings WHERE name = 'Anna'")
    assert row == ("Anna", "10:00", "tune-up")


def refused(
    main: Callable[[list[str]], None], argv: list[str], capsys: pytest.CaptureFixture[str]
) -> tuple[int | str | None, str]:
    """A script's `main` run in this process on arguments it must refuse before any work:
    its exit code (or `sys.exit` message) and what it wrote to stderr."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    return info.value.code, capsys.readouterr().err


def test_the_evaluation_script_writes_the_figures_others_rely_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """scripts/eval_brain.py end to end on one held-out call: text, speech through TTS and
    the ASR (the four voices, with each voice's word error rate) and an AR twin (random weights
    here; its figure is not checked, only that it is measured)."""
    brain = load(BRAIN)
    twin_config = replace(brain.card.config, block_size=1, d_model=32, n_layers=1, d_ff=64)
    torch.manual_seed(0)
    twin = ModelCard(twin_config, "autoregressive")
    save(tmp_path / "ar", DiffusionLM(twin_config).eval(), brain.tokenizer, twin)
    out = tmp_path / "eval.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "eval_brain.py"), "--json", str(out),
         "--ar", str(tmp_path / "ar"), "--dialogues", "1", "--speech-examples", "4",
         "--independent", "2"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["dialogues"] == 1 and report["examples"] > 0
    independent = report["independent"]["text"]
    assert independent["lines"] == 2 and independent["calls"] == 2
    assert 0.0 <= independent["exact_action"] <= 1.0
    assert 0.0 <= independent["task_completion"] <= 1.0
    assert report["unasked_irreversible"]["text"] >= 0
    assert report["latency_ms"]["p95"] >= report["latency_ms"]["p50"] > 0
    assert report["backbone"]["name"] == "none (trained from scratch)"
    assert report["backbone"]["parameters"] > 1_000_000
    for key in ("exact_tool_call", "arguments", "speak_vs_call", "empty_answers"):
        assert key in report["text"], key
    assert report["text"]["empty_answers"] == 0
    assert "exact_tool_call" in report["speech"] and "exact_tool_call" in report["ar_twin"]
    assert report["speech"]["asr"] == "tiny.en"
    same = {report[k]["answers"] for k in ("text", "text_unconstrained", "ar_twin",
                                           "ar_twin_unconstrained")}  # fmt: skip
    assert len(same) == 1  # every figure over the same answers
    sweep = report["text"]["unsure"]["sweep"]  # a higher bar fires at least as often
    fired = [row["fired"] for row in sweep]
    assert [row["below"] for row in sweep] == [0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
    assert fired == sorted(fired) and report["text"]["unsure"]["fired"] == fired[2]
    voices = report["speech"]["by_voice"]
    assert set(voices) == {"piper:joe", "flite:slt", "flite:awb", "espeak:en-us"}
    assert report["speech"]["voices"] == list(voices)
    assert sum(v["lines"] for v in voices.values()) == 4
    assert all(v["word_error_rate"] >= 0.0 for v in voices.values())
    kept = report["speech"]["by_recognition"]  # every spoken call in exactly one part
    assert set(kept) <= {"all", "blurred", "lost"}
    assert sum(part["calls"] for part in kept.values()) == report["speech"]["calls"]
    code, _ = refused(eval_brain.main, ["--json", str(out), "--ar", str(tmp_path / "missing")],
                      capsys)  # fmt: skip
    assert code != 0 and "lacks model.safetensors" in str(code)
    for voices, says in (
        ("flite:nosuch", "flite has no voice 'nosuch'"),
        ("espeak:nosuch", "voice does not exist"),
        ("festival:kal", "unknown voice 'festival:kal'"),
        ("piper:amy", "piper has only the voice 'joe' here"),
        ("flite:awb_time", "flite has no voice 'awb_time'"),
        ("espeak", "names no voice"),
        (",", "no voice given"),
    ):
        code, err = refused(eval_brain.main, ["--json", str(out), "--voices", voices], capsys)
        assert code == 2 and says in err, err[-500:]
    code, err = refused(eval_brain.main, ["--json", str(out), "--asr", "large"], capsys)
    assert code == 2 and "invalid choice: 'large'" in err


def test_training_continues_the_shipped_brain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """scripts/train_brain.py --init: the shipped float16 weights, their card's step count
    and minutes, a fresh optimizer; two more steps, then a card that says what it went on
    from, with the data's seed and its share of stray words. A wrong --init, --stray or
    --seed is a clear error before any work."""
    script = str(ROOT / "scripts" / "train_brain.py")
    shipped = load(BRAIN).card.metrics
    out = tmp_path / "go-on"
    done = subprocess.run(
        [sys.executable, script, "--init", str(BRAIN), "--out", str(out), "--dialogues", "2",
         "--seed", "5", "--stray", "0.5", "--hints", "--hint-own", "0.5",
         "--minutes", str(shipped["train_minutes"] + 30), "--max-steps",
         str(shipped["steps"] + 2), "--eval-examples", "4", "--threads", "1", "--device", "cpu"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    resumed = next(line for line in lines if "resumed_at_step" in line)
    assert (resumed["resumed_at_step"], resumed["optimizer"]) == (shipped["steps"], "fresh")
    card = load(out).card
    assert card.metrics["steps"] == shipped["steps"] + 2
    assert f"continued from {BRAIN}" in card.notes
    assert "(seed 5)" in card.notes and "a share 0.5 of examples" in card.notes
    assert card.prompt_hints == HINTS_VERSION and "own frame's for a share 0.5" in card.notes
    data = next(line for line in lines if "examples" in line)
    assert (data["seed"], data["stray"]) == (5, 0.5)
    for argv, says in (
        (["--kind", "autoregressive", "--init", str(BRAIN)], "holds a diffusion model"),
        (["--init", str(tmp_path / "missing")], "lacks model.safetensors"),
        (["--stray", "1.5"], "--stray is a share between 0 and 1"),
        (["--seed", "2"], "--seed 2 is the evaluation seed"),
        (["--hint-own", "0.5"], "--hint-own is a share between 0 and 1 of --hints examples"),
        (["--hints", "--hint-own", "2"], "--hint-own is a share"),
    ):
        code, err = refused(train_brain.main, ["--out", str(tmp_path / "bad"), *argv], capsys)
        assert code == 2 and says in err, err[-500:]
