"""Caller lines of the training calls as the phone recognizer hears them, for training
the brain on what it will really read (`scripts/train_brain.py --heard FILE`).

    python scripts/make_heard_lines.py --out scripts/data/heard-seed13.jsonl \
        --seed 13 --dialogues 8000 --lines 4000

Picks `--lines` distinct latest caller lines of the train split's agent actions
(deterministic per seed; `--call-share` of them before a tool call, the rest before a
reply), speaks each with one of `--voices` in turn (never the evaluation's voices:
scripts/eval_brain.py VOICES), sends it through the phone path (8 kHz μ-law) and Whisper
(`--asr`), and appends one JSON object a line: {"said", "heard", "voice"}. Resumable: lines
already in `--out` are skipped, so an interrupted run continues where it stopped.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.eval_brain import VOICES as EVAL_VOICES
from voice_agent.brain.dialogues import Example as Step
from voice_agent.brain.heard import read_heard
from voice_agent.brain.phrasing import Split
from voice_agent.brain.scenarios import generate as dialogues
from voice_agent.dialogue.format import AgentCall, CallerTurn
from voice_agent.hearing.models import ASR_MODELS

TRAIN_VOICES = (
    "flite:kal",
    "flite:rms",
    "espeak:en-gb",
    "flite:kal16",
    "espeak:en-gb-scotland",
    "espeak:en-029",
)
"""Voices for training lines: none of them speaks in the evaluation."""


def pick_lines(steps: list[Step], count: int, call_share: float, seed: int) -> list[str]:
    """`count` distinct latest caller lines, a share `call_share` of them before a call."""
    rng = random.Random(seed)
    before_call: dict[str, None] = {}
    before_say: dict[str, None] = {}
    for step in steps:
        if step.history and isinstance(step.history[-1], CallerTurn):
            pool = before_call if isinstance(step.action, AgentCall) else before_say
            pool[step.history[-1].text] = None
    calls, says = list(before_call), [s for s in before_say if s not in before_call]
    rng.shuffle(calls)
    rng.shuffle(says)
    n_calls = min(len(calls), round(count * call_share))
    picked = calls[:n_calls] + says[: count - n_calls]
    rng.shuffle(picked)
    return picked


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seed", type=int, required=True, help="simulator seed of the train data")
    p.add_argument("--dialogues", type=int, required=True)
    p.add_argument("--lines", type=int, default=4000)
    p.add_argument("--call-share", type=float, default=0.7)
    p.add_argument("--voices", default=",".join(TRAIN_VOICES))
    p.add_argument("--asr", choices=ASR_MODELS, default="tiny.en")
    args = p.parse_args()
    if args.dialogues < 1 or args.lines < 1 or not 0.0 <= args.call_share <= 1.0:
        p.error("--dialogues and --lines must be positive, --call-share between 0 and 1")
    voices = tuple(v.strip() for v in args.voices.split(",") if v.strip())
    shared = sorted(set(voices) & set(EVAL_VOICES))
    if not voices or shared:
        p.error(f"--voices must be given and exclude the evaluation's voices (got {shared})")
    from scripts.eval_brain import _bad_voice, hear
    from voice_agent.hearing.asr import AsrConfig, load_whisper

    bad = _bad_voice(voices)
    if bad:
        p.error(f"--voices: {bad}")
    try:
        done = {line.said for line in read_heard(args.out)} if args.out.exists() else set()
    except ValueError as exc:
        sys.exit(f"make_heard_lines: {exc}")
    steps = [ex for d in dialogues(args.seed, args.dialogues, Split.TRAIN) for ex in d.examples]
    todo = [s for s in pick_lines(steps, args.lines, args.call_share, args.seed) if s not in done]
    config = AsrConfig(model=args.asr)
    model = load_whisper(config)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with args.out.open("a", encoding="utf-8") as out:
        for i, said in enumerate(todo):
            voice = voices[(len(done) + i) % len(voices)]
            heard = hear(said, voice, model, config)
            out.write(json.dumps({"said": said, "heard": heard, "voice": voice}) + "\n")
            out.flush()
            if (i + 1) % 100 == 0:
                rate_s = (time.monotonic() - t0) / (i + 1)
                print(f"{len(done) + i + 1}/{len(done) + len(todo)} lines, "
                      f"{rate_s:.2f} s a line", flush=True)  # fmt: skip
    print(json.dumps({"out": str(args.out), "lines": len(done) + len(todo)}))


if __name__ == "__main__":
    main()
