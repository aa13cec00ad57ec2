"""Evaluate the brain on held-out simulated calls: from text, from speech, and its AR twin.

    python scripts/eval_brain.py --json out/eval_brain.json

Text: every agent action of `--dialogues` held-out calls (templates and values never
seen in training), decoded by the engine with constrained tool calls, scored against
the gold action (voice_agent/brain/scoring.py). Speech: for `--speech-examples` of those
actions, the caller's last line is synthesized (`--voices`, in turn: piper's joe, a US
man; flite's slt, a US woman; flite's awb, a Scottish man; espeak-ng, a robotic voice),
sent through the phone path (8 kHz μ-law) and Whisper (`--asr`, tiny.en as the pipeline's
default, or base), and the transcript replaces the line before the brain answers: the
accuracy a caller experiences. The AR
twin answers the same text prompts through the same engine decoder, grammar and grounding
(`ar_twin`, `engine.baselines.CausalStepper`: blocks of one token), and both models once
more decoding freely, with no grammar or grounding (`ar_twin_unconstrained`,
`text_unconstrained`): two like-for-like comparisons of the two models. Confidence: how
often the engine's lowest committed confidence falls under 0.5 (the agent would ask the
caller to repeat) and whether those answers were in fact wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.backbone import SMOLLM2
from engine.baselines import CausalStepper, autoregressive
from engine.checkpoint import Checkpoint, load
from engine.constraints import CallGrammar
from engine.generate import Request, generate
from engine.schedule import Schedule
from scripts.eval_callers import evaluate, split_files
from tools.bike_shop.readbacks import READBACKS
from tools.bike_shop.schemas import ARGUMENT_MODELS
from voice_agent.agent.prompt import prompt_budget
from voice_agent.brain.dialogues import Example as Step
from voice_agent.brain.heard import verdict
from voice_agent.brain.independent import read_cases
from voice_agent.brain.phrasing import Split
from voice_agent.brain.scenarios import generate as dialogues
from voice_agent.brain.scoring import Scorer
from voice_agent.dialogue.format import (
    ANSWER_TOKENS,
    AgentCall,
    CallerTurn,
    PromptTooLongError,
    call_sources,
)
from voice_agent.dialogue.hints import for_card
from voice_agent.grounding import grounder
from voice_agent.hearing.models import ASR_MODELS

AsrModel = Literal["tiny.en", "base"]

ROOT = Path(__file__).resolve().parent.parent
EVAL_SEED = 2
DEFAULT_DLM = ROOT / "engine" / "checkpoints" / "brain-dlm"
DEFAULT_AR = ROOT / "engine" / "checkpoints" / "brain-ar"
VOICES = ("piper:joe", "flite:slt", "flite:awb", "espeak:en-us")
"""The callers' voices of the speech pass, line by line in turn. Until 2026-12-05 the pass
spoke with piper:joe and espeak:en-us only (`--voices piper:joe,espeak:en-us`)."""


def prompt_ids(ck: Checkpoint, step: Step, prompt_tokens: int) -> tuple[int, ...] | None:
    hints = for_card(ck.card.prompt_hints)
    if hints is not None:
        step = replace(step, history=hints.annotate(step.history))
    try:
        return tuple(ck.tokenizer.encode(step.prompt(ck.tokenizer, prompt_tokens)))
    except PromptTooLongError:
        return None


def _share(n: int, d: int) -> float | None:
    return round(n / d, 4) if d else None


def run_engine(
    ck: Checkpoint,
    steps: list[Step],
    prompt_tokens: int,
    unsure_below: float = 0.5,
    *,
    constrained: bool = True,
    outcomes: dict[tuple[str, int], str] | None = None,
) -> dict[str, Any]:
    """Decode and score `steps`. An answer whose least confident committed token is under
    `unsure_below` counts as one where the agent would ask the caller to repeat. Without
    `constrained`, the model writes its calls freely (no grammar, no grounding), as the
    AR twin does: the like-for-like comparison of the two models. `outcomes`, when given,
    receives each step's answer text under (dialogue_id, step)."""
    tok = ck.tokenizer
    grammar = CallGrammar(tok, ARGUMENT_MODELS, READBACKS) if constrained else None
    scorer = Scorer(ARGUMENT_MODELS)
    latencies, forwards, decided = [], 0, 0
    sureness: list[tuple[float, bool]] = []
    for step in steps:
        ids = prompt_ids(ck, step, prompt_tokens)
        if ids is None:
            continue
        schedule = Schedule(threshold=0.9, max_new_tokens=ANSWER_TOKENS, effort=step.effort)
        grounding = grounder(call_sources(step.history)) if constrained else None
        request = Request(ids, schedule, grammar=grammar, grounder=grounding)
        g = generate(ck.model, tok.ids, request, time.monotonic)
        text = tok.decode(g.token_ids)
        right = scorer.add(step, text)
        if outcomes is not None:
            outcomes[(step.dialogue_id, step.step)] = text
        sureness.append((g.min_confidence, right))
        latencies.append(g.latency_s * 1000)
        forwards += g.forwards
        decided += g.decided_tokens
    report = scorer.report()
    report["tokens_per_forward"] = round(decided / max(1, forwards), 2)
    report["latency_ms"] = {"p50": round(float(np.median(latencies)), 1),
                            "p95": round(float(np.percentile(latencies, 95)), 1)}  # fmt: skip
    report["unsure"] = {
        **_unsure(sureness, unsure_below),
        "sweep": [_unsure(sureness, below) for below in UNSURE_SWEEP],
    }
    report["errors_sample"] = scorer.errors[:5]
    return report


def stepped(ck: Checkpoint) -> Checkpoint:
    """The AR twin behind the engine's decoder (`CausalStepper`)."""
    return replace(ck, model=CausalStepper(ck.model))  # type: ignore[arg-type]


UNSURE_SWEEP = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
"""Thresholds at which the "say again" rule is also reported, to choose
`AgentConfig.min_confidence`."""


def _unsure(sureness: list[tuple[float, bool]], below: float) -> dict[str, Any]:
    """How often an answer's least confident token falls under `below` (the agent would ask
    the caller to repeat), and how often answers on either side were wrong."""
    fired = [right for conf, right in sureness if conf < below]
    kept = [right for conf, right in sureness if conf >= below]
    return {
        "below": below,
        "fired": _share(len(fired), len(sureness)),
        "wrong_when_fired": _share(fired.count(False), len(fired)),
        "wrong_when_confident": _share(kept.count(False), len(kept)),
    }


def run_ar(ck: Checkpoint, steps: list[Step], prompt_tokens: int) -> dict[str, Any]:
    scorer = Scorer(ARGUMENT_MODELS)
    for step in steps:
        ids = prompt_ids(ck, step, prompt_tokens)
        if ids is not None:
            g = autoregressive(ck.model, ck.tokenizer.ids, list(ids), ANSWER_TOKENS,
                               time.monotonic)  # fmt: skip
            scorer.add(step, ck.tokenizer.decode(g.token_ids))
    return scorer.report()


def heard(
    steps: list[Step], limit: int, asr: AsrModel = "tiny.en", voices: tuple[str, ...] = VOICES
) -> tuple[list[Step], list[dict[str, str]]]:
    """The first `limit` steps whose last turn is the caller's, with that line replaced by
    what Whisper (`asr`) hears of it over the phone, spoken by `voices` in turn."""
    from voice_agent.hearing.asr import AsrConfig, load_whisper

    config = AsrConfig(model=asr)
    model = load_whisper(config)
    out, pairs = [], []
    for step in steps:
        if len(out) >= limit:
            break
        if not step.history or not isinstance(step.history[-1], CallerTurn):
            continue
        said = step.history[-1].text
        voice = voices[len(out) % len(voices)]
        text = hear(said, voice, model, config)
        pairs.append({"said": said, "heard": text, "voice": voice})
        out.append(replace(step, history=(*step.history[:-1], CallerTurn(text))))
    return out, pairs


def hear(said: str, voice: str, model: Any, config: Any) -> str:
    """What Whisper (`model`, `config`: voice_agent.hearing.asr) hears of `said` spoken by
    `voice` over the phone (8 kHz μ-law)."""
    from scripts.speech_data import phone, synthesize, trim
    from voice_agent.audio import resample
    from voice_agent.hearing.asr import decode

    samples, rate = synthesize(said, voice)
    line = phone(trim(samples), rate)
    audio = resample(line, 8000, 16000).astype(np.float32) / 32768.0
    return decode(model, audio, config).text


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--json", type=Path, required=True)
    p.add_argument("--dlm", type=Path, default=DEFAULT_DLM)
    p.add_argument("--ar", type=Path, default=DEFAULT_AR)
    p.add_argument("--dialogues", type=int, default=100)
    p.add_argument("--speech-examples", type=int, default=60)
    p.add_argument("--prompt-tokens", type=int, default=None,
                   help="prompt budget (default: the brain's trained length)")  # fmt: skip
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--asr", choices=ASR_MODELS, default="tiny.en", help="Whisper model")
    p.add_argument("--independent", type=int, default=None, metavar="N",
                   help="lines and calls of the frozen independent test split to score "
                   "(scripts/eval_callers.py; default all, 0 none)")  # fmt: skip
    p.add_argument("--voices", default=",".join(VOICES),
                   help="comma-separated ENGINE:VOICE, engines piper, flite, espeak")  # fmt: skip
    args = p.parse_args(argv)
    if args.dialogues < 1 or args.speech_examples < 0:
        p.error("--dialogues must be positive and --speech-examples not negative")
    voices = tuple(v.strip() for v in args.voices.split(",") if v.strip())
    if args.speech_examples > 0:
        bad = _bad_voice(voices)
        if bad:
            p.error(f"--voices: {bad}")
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        dlm, ar = load(args.dlm), load(args.ar)
    except (FileNotFoundError, ValueError) as exc:
        sys.exit(f"eval_brain: {exc}")
    if args.prompt_tokens is None:
        args.prompt_tokens = prompt_budget(dlm.card)
    steps = [ex for d in dialogues(EVAL_SEED, args.dialogues, Split.HELDOUT) for ex in d.examples]
    result: dict[str, Any] = {
        "dialogues": args.dialogues,
        "examples": len(steps),
        "prompt_tokens": args.prompt_tokens,
        "text": run_engine(dlm, steps, args.prompt_tokens),
        "text_unconstrained": run_engine(dlm, steps, args.prompt_tokens, constrained=False),
        "ar_twin": run_engine(stepped(ar), steps, args.prompt_tokens),
        "ar_twin_unconstrained": run_ar(ar, steps, args.prompt_tokens),
    }
    if args.speech_examples:
        spoken, pairs = heard(steps, args.speech_examples, args.asr, voices)
        answers: dict[tuple[str, int], str] = {}
        report = run_engine(dlm, spoken, args.prompt_tokens, outcomes=answers)
        result["speech"] = {"asr": args.asr, "voices": list(voices), **report}
        result["speech"]["by_recognition"] = by_recognition(spoken, pairs, answers)
        same_text = run_engine(dlm, _originals(steps, spoken), args.prompt_tokens)
        result["speech"]["same_examples_from_text"] = same_text["exact_tool_call"]
        result["speech"]["by_voice"] = by_voice(dlm, spoken, pairs, args.prompt_tokens)
        result["speech"]["transcripts_sample"] = pairs[:8]
    if args.independent != 0:
        own = asyncio.run(evaluate(dlm, read_cases(split_files("test")), args.independent))
        result["independent"] = {"split": "test", "text": own["text"]}
        result["unasked_irreversible"] = {"text": own["unasked_irreversible"]}
        result["latency_ms"] = own["latency_ms"]
    result["backbone"] = backbone_of(dlm)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def backbone_of(ck: Checkpoint) -> dict[str, Any]:
    """What the brain was initialised from (its card's notes say) and its size."""
    name = SMOLLM2 if SMOLLM2 in ck.card.notes else "none (trained from scratch)"
    return {"name": name, "parameters": ck.model.num_parameters()}


def by_voice(
    ck: Checkpoint, spoken: list[Step], pairs: list[dict[str, str]], prompt_tokens: int
) -> dict[str, dict[str, Any]]:
    """Per voice: the recognizer's word error rate on the caller lines and the exact tool
    call rate from them, to tell recognition losses from the brain's."""
    from scripts.speech_data import word_errors

    out: dict[str, dict[str, Any]] = {}
    for voice in dict.fromkeys(p["voice"] for p in pairs):
        mine = [i for i, p in enumerate(pairs) if p["voice"] == voice]
        errors = [word_errors(pairs[i]["said"], pairs[i]["heard"]) for i in mine]
        report = run_engine(ck, [spoken[i] for i in mine], prompt_tokens)
        out[voice] = {
            "lines": len(mine),
            "word_error_rate": _share(sum(e for e, _ in errors), sum(n for _, n in errors)),
            "exact_tool_call": report["exact_tool_call"],
            "calls": report["calls"],
        }
    return out


def by_recognition(
    spoken: list[Step], pairs: list[dict[str, str]], answers: dict[tuple[str, int], str]
) -> dict[str, dict[str, Any]]:
    """The spoken calls split by what the recognizer kept of the values each call takes
    from the caller's line (`voice_agent.brain.heard.verdict`: all of them, only misspelt,
    or lost), with the exact tool call rate of each part and how often the brain asked
    the caller to repeat: the part of the speech gap that no brain reading the
    transcript can close (values lost) apart from the brain's own."""
    scorers: dict[str, Scorer] = {}
    for step, pair in zip(spoken, pairs, strict=True):
        text = answers.get((step.dialogue_id, step.step))
        if text is None or not isinstance(step.action, AgentCall):
            continue
        kept = verdict(step.action, pair["said"], pair["heard"]).value
        scorers.setdefault(kept, Scorer(ARGUMENT_MODELS)).add(step, text)
    calls = sum(s.calls for s in scorers.values())
    return {
        kept: {
            "calls": s.calls,
            "share": _share(s.calls, calls),
            "exact_tool_call": _share(s.exact_calls, s.calls),
            "asked_again": _share(s.asked_again, s.calls),
        }
        for kept, s in sorted(scorers.items())
    }


def _bad_voice(voices: tuple[str, ...]) -> str | None:
    """What is wrong with `voices`, tried by speaking a word with each; None when all speak."""
    from scripts.speech_data import synthesize

    if not voices:
        return "no voice given"
    for voice in voices:
        try:
            synthesize("hello", voice)
        except subprocess.CalledProcessError as exc:
            return f"{voice}: {exc.stderr.decode(errors='replace').strip() or exc}"
        except (ValueError, OSError, SystemExit) as exc:
            return f"{voice}: {exc}"
    return None


def _originals(steps: list[Step], spoken: list[Step]) -> list[Step]:
    """The text versions of the spoken steps (same dialogue and step)."""
    keys = {(s.dialogue_id, s.step) for s in spoken}
    return [s for s in steps if (s.dialogue_id, s.step) in keys]


if __name__ == "__main__":
    main()
