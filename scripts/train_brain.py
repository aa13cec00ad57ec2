"""Train the brain: the block-diffusion model (or its AR twin) on simulated bike-shop calls.

    python scripts/train_brain.py --kind diffusion --out runs/brain-dlm --minutes 50
    python scripts/train_brain.py --kind autoregressive \
        --tokenizer runs/brain-dlm/tokenizer.json --out runs/brain-ar --minutes 30

Data: `--dialogues` simulated calls of the train split (voice_agent/brain/dialogues.py,
deterministic per seed), one example per agent action; examples that do not fit the
window or the call grammar are dropped and counted. Resumable: rerun with the same
--out to continue from `train_state.pt`; `--init DIR` continues a checkpoint folder instead
(the shipped float16 one, say: its weights, its card's steps and minutes, a fresh
optimizer), when --out holds no train state yet. Ends by scoring held-out examples and writing
the checkpoint (safetensors + tokenizer + model card with data, size, time, figures).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.backbone import BackboneMissing, describe, load_backbone
from engine.checkpoint import Checkpoint, ModelCard, load, save
from engine.config import preset
from engine.constraints import CallGrammar
from engine.model import DiffusionLM
from engine.tokenizer import TextTokenizer
from engine.train import Example
from engine.trainer import TrainSettings, seed_state, train
from scripts.eval_brain import run_ar, run_engine
from tools.bike_shop.schemas import ARGUMENT_MODELS
from voice_agent.brain.augment import StrayWords
from voice_agent.brain.dialogues import Example as Step
from voice_agent.brain.dialogues import misfit
from voice_agent.brain.heard import HeardLines
from voice_agent.brain.hint_bank import build_bank
from voice_agent.brain.independent import CaseError, read_cases
from voice_agent.brain.independent_examples import (
    exit_examples,
    first_line_examples,
    mid_call_examples,
)
from voice_agent.brain.phrasing import Split
from voice_agent.brain.scenarios import generate as dialogues
from voice_agent.dialogue.format import ANSWER_TOKENS, CallerTurn, PromptTooLongError, last_caller
from voice_agent.dialogue.hints import HINTS_VERSION, CallerHints, bank_path, read_bank

TRAIN_SEED, EVAL_SEED = 1, 2
WINDOW = 256


def steps_of(seed: int, count: int, split: Split) -> list[Step]:
    return [ex for d in dialogues(seed, count, split) for ex in d.examples]


def with_strays(steps: list[Step], share: float, seed: int) -> list[Step]:
    """`share` of `steps` with stray words in their latest caller line
    (voice_agent/brain/augment.py: words the simulator never uses)."""
    if share <= 0:
        return steps
    strays, rng = StrayWords.unseen_in(steps), random.Random(seed)
    return [strays.apply(s, rng) if rng.random() < share else s for s in steps]


def with_hints(steps: list[Step], own_share: float = 0.0, seed: int = 0) -> list[Step]:
    """`steps` with the latest caller line's hint (voice_agent/dialogue/hints.py): as the
    hint of an unseen phrasing looks (the nearest frame other than the line's own), or for a
    share `own_share` of steps the nearest frame itself, as a known phrasing's looks."""
    hints, rng = CallerHints.load(), random.Random(seed)
    own = [rng.random() < own_share for _ in steps]
    for flag in (False, True):  # batched; annotate then reads the cache
        lines = [_latest(s) for s, o in zip(steps, own, strict=True) if o == flag]
        hints.hints(lines, skip_own=not flag)
    return [replace(s, history=hints.annotate(s.history, skip_own=not o))
            for s, o in zip(steps, own, strict=True)]  # fmt: skip


def heard_copies(steps: list[Step], path: Path) -> tuple[list[Step], Counter[str]]:
    """Copies of the `steps` whose latest caller line `path` (scripts/make_heard_lines.py)
    has heard, with that line as heard (voice_agent/brain/heard.py), and their tally:
    copies, calls turned into the repeat request, copies left out (value misspelt)."""
    lines = HeardLines.load(path)
    out: list[Step] = []
    tally: Counter[str] = Counter()
    for step in steps:
        if not lines.covers(step):
            continue
        copy = lines.apply(step)
        if copy is None:
            tally["left_out"] += 1
            continue
        out.append(copy)
        tally["copies"] += 1
        tally["repeat_requests"] += copy.action != step.action
    return out, tally


def _text(step: Step) -> str:
    """The example as text, for the data hash; a prompt too long for any budget (dropped
    when encoding) hashes as its answer alone."""
    try:
        return step.prompt() + step.answer().full_text
    except PromptTooLongError:
        return step.answer().full_text


def _latest(step: Step) -> str:
    line = step.history[last_caller(step.history)]
    assert isinstance(line, CallerTurn)
    return line.text


def encode(steps: list[Step], tok: TextTokenizer, grammar: CallGrammar, prompt_tokens: int
           ) -> tuple[list[Example], Counter[str]]:  # fmt: skip
    kept: list[Example] = []
    dropped: Counter[str] = Counter()
    for step in steps:
        why = misfit(step, grammar)
        if why is not None:
            dropped[why.value] += 1
            continue
        try:
            prompt = tok.encode(step.prompt(tok, prompt_tokens))
        except PromptTooLongError:
            dropped["prompt"] += 1
            continue
        kept.append(Example(prompt, step.answer().answer_ids(tok, grammar)))
    return kept, dropped


def held_out(ck: Checkpoint, steps: list[Step], prompt_tokens: int) -> dict[str, object]:
    """Held-out figures for the training log and model card (scripts/eval_brain.py's)."""
    run = run_engine if ck.card.kind == "diffusion" else run_ar
    return run(ck, steps, prompt_tokens)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--kind", choices=["diffusion", "autoregressive"], default="diffusion")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--tokenizer", type=Path, help="reuse this tokenizer.json (the twin's)")
    p.add_argument(
        "--init", type=Path, help="continue this checkpoint folder (when --out has no train state)"
    )
    p.add_argument("--preset", default="tiny")
    p.add_argument(
        "--backbone", choices=["smollm2"],
        help="start from a pretrained backbone (engine/backbone.py) instead of --preset",
    )  # fmt: skip
    p.add_argument("--layers", type=int, default=8, help="with --backbone: blocks kept")
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--vocab", type=int, default=2048)
    p.add_argument("--dialogues", type=int, default=4000)
    p.add_argument("--seed", type=int, default=TRAIN_SEED, help="simulator seed of the data")
    p.add_argument(
        "--stray", type=float, default=0.0,
        help="share of examples given stray unseen words in the latest caller line",
    )  # fmt: skip
    p.add_argument(
        "--hints", action="store_true",
        help="show each latest caller line's nearest known act (voice_agent/dialogue/hints.py)",
    )  # fmt: skip
    p.add_argument(
        "--hint-own", type=float, default=0.0,
        help="with --hints: share of examples whose hint is their own frame's act",
    )  # fmt: skip
    p.add_argument(
        "--heard", type=Path,
        help="also train on copies of the examples whose latest caller line this file "
        "(scripts/make_heard_lines.py) has as the recognizer heard it",
    )  # fmt: skip
    p.add_argument(
        "--callers", type=Path, nargs="*", default=[],
        help="independent caller files (data/callers/train/*.jsonl): their first lines as "
        "examples with the simulator's answer (voice_agent/brain/independent_examples.py)",
    )  # fmt: skip
    p.add_argument(
        "--mid-call", action="store_true",
        help="with --callers: also copies of simulated steps whose yes, time, day, service or "
        "name line (given or corrected) is replaced by an independent line of that kind",
    )  # fmt: skip
    p.add_argument(
        "--exits", action="store_true",
        help="with --callers: also copies of simulated mid-call steps whose caller line is "
        "replaced by an independent goodbye (end the call) or request for a person (transfer)",
    )  # fmt: skip
    p.add_argument("--callers-copies", type=int, default=1, help="times each such example is used")
    p.add_argument("--prompt-tokens", type=int, default=128, help="prompt budget per example")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--minutes", type=float, default=50.0, help="training time budget")
    p.add_argument("--max-steps", type=int, default=100_000)
    p.add_argument("--eval-examples", type=int, default=300)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    args = p.parse_args(argv)
    if args.dialogues < 1 or args.minutes <= 0 or args.prompt_tokens < 16:
        p.error("--dialogues, --minutes and --prompt-tokens (>= 16) must be positive")
    if not 0.0 <= args.hint_own <= 1.0 or (args.hint_own and not args.hints):
        p.error(f"--hint-own is a share between 0 and 1 of --hints examples, not {args.hint_own}")
    if not 0.0 <= args.stray <= 1.0:
        p.error(f"--stray is a share between 0 and 1, not {args.stray}")
    if args.seed == EVAL_SEED:
        p.error(f"--seed {EVAL_SEED} is the evaluation seed")
    if args.prompt_tokens + ANSWER_TOKENS > WINDOW:
        p.error(f"--prompt-tokens + {ANSWER_TOKENS} answer tokens exceed the {WINDOW} window")
    held = [f for f in args.callers if f.resolve().parent.name in ("dev", "test")]
    if held:
        p.error(f"--callers {held[0]}: the dev and test splits are never trained on")
    if args.threads:
        torch.set_num_threads(args.threads)
    log = lambda line: print(line, flush=True)  # noqa: E731

    init = None
    if args.init:
        try:
            init = load(args.init)
        except (FileNotFoundError, ValueError) as exc:
            p.error(f"--init: {exc}")
        if init.card.kind != args.kind:
            p.error(f"--init {args.init} holds a {init.card.kind} model, not {args.kind}")
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    simulated = list(dialogues(args.seed, args.dialogues, Split.TRAIN))
    steps = [ex for d in simulated for ex in d.examples]
    heard: list[Step] = []
    heard_tally: Counter[str] = Counter()
    if args.heard:
        try:
            heard, heard_tally = heard_copies(steps, args.heard)
        except (OSError, ValueError) as exc:
            p.error(f"--heard: {exc}")
        if not heard:
            p.error(f"--heard {args.heard} holds no caller line of these training calls "
                    f"(seed {args.seed}, {args.dialogues} dialogues)")  # fmt: skip
    natural: list[Step] = []
    mid: list[Step] = []
    exits: list[Step] = []
    if (args.mid_call or args.exits) and not args.callers:
        p.error("--mid-call and --exits need --callers (the independent lines to put in)")
    if args.callers:
        try:
            cases = read_cases(args.callers)
            written = cases.lines
            natural = first_line_examples(written, args.seed)
            if args.mid_call:
                mid = mid_call_examples(simulated, written, args.seed)
            if args.exits:
                exits = exit_examples(simulated, written, cases.calls, args.seed)
        except CaseError as exc:
            p.error(f"--callers: {exc}")
    steps = with_strays(steps, args.stray, args.seed) + heard
    steps += natural * args.callers_copies + mid + exits
    if args.hints:
        bank = bank_path(HINTS_VERSION)
        if read_bank(bank) != build_bank(HINTS_VERSION):  # the bank a live agent will read
            p.error(f"--hints: {bank} is out of step with the training lines; write it again "
                    "with python -m voice_agent.brain.hint_bank")  # fmt: skip
        steps = with_hints(steps, args.hint_own, args.seed)
    texts = [_text(s) for s in steps]
    data_hash = hashlib.sha256("\n".join(texts).encode()).hexdigest()
    backbone = None
    if args.backbone:
        if args.init or args.tokenizer:
            p.error("--backbone starts afresh: no --init or --tokenizer")
        try:
            backbone, tok = load_backbone(texts, args.layers, block_size=args.block_size,
                                          max_seq_len=WINDOW)  # fmt: skip
        except (BackboneMissing, ValueError) as exc:
            p.error(f"--backbone: {exc}")
    elif args.tokenizer:
        tok = TextTokenizer.load(args.tokenizer)
    elif (args.out / "tokenizer.json").is_file():
        tok = TextTokenizer.load(args.out / "tokenizer.json")
    elif init is not None:
        tok = init.tokenizer
    else:
        tok = TextTokenizer.train(texts, vocab_size=args.vocab)
    tok.save(args.out / "tokenizer.json")
    grammar = CallGrammar(tok, ARGUMENT_MODELS)
    examples, dropped = encode(steps, tok, grammar, args.prompt_tokens)
    data_s = round(time.monotonic() - t0, 1)
    log(json.dumps({"dialogues": args.dialogues, "seed": args.seed, "stray": args.stray,
                    "caller_lines": len(natural), "caller_copies": args.callers_copies,
                    "mid_call": len(mid), "exits": len(exits),
                    "examples": len(examples), "heard": dict(heard_tally),
                    "dropped": dict(dropped), "data_s": data_s}))  # fmt: skip

    block = 1 if args.kind == "autoregressive" else args.block_size
    config = preset(args.preset, tok.vocab_size, block_size=block, max_seq_len=WINDOW)
    if init is not None:
        config, block = init.card.config, init.card.config.block_size
        if tok.tokenizer.get_vocab() != init.tokenizer.tokenizer.get_vocab():
            p.error(f"--init {args.init} was trained with another tokenizer than the one "
                    f"given or found in {args.out}")  # fmt: skip
    torch.manual_seed(TRAIN_SEED)
    model = DiffusionLM(config) if backbone is None else backbone
    config = model.config
    if init is not None and not (args.out / "train_state.pt").is_file():
        done = init.card.metrics
        seed_state(args.out, init.model, int(done.get("steps", 0)),
                   float(done.get("train_minutes", 0.0)) * 60)  # fmt: skip
        log(json.dumps({"init": str(args.init), "steps": done.get("steps", 0),
                        "train_minutes": done.get("train_minutes", 0.0)}))  # fmt: skip
    settings = TrainSettings(args.kind, args.minutes, args.batch, args.lr, args.max_steps,
                             TRAIN_SEED, args.device)  # fmt: skip
    result = train(model, examples, tok.ids, args.out, settings, log=log)

    hints = HINTS_VERSION if args.hints else ""
    heldout = steps_of(EVAL_SEED, max(1, args.eval_examples // 6), Split.HELDOUT)
    metrics: dict[str, object] = {
        "kind": args.kind,
        "steps": result.steps,
        "train_minutes": result.minutes,
        "parameters": model.num_parameters(),
        "train_examples": len(examples),
        "dropped_examples": dict(dropped),
        "prompt_tokens": args.prompt_tokens,
        **({"heard_copies": dict(heard_tally)} if args.heard else {}),
        "heldout": held_out(
            Checkpoint(model.cpu(), tok, ModelCard(config, args.kind, prompt_hints=hints)),
            heldout[: args.eval_examples],
            args.prompt_tokens,
        ),
    }
    notes = (f"bike-shop calls from voice_agent/brain/dialogues.py: {args.dialogues} train "
             f"dialogues (seed {args.seed}), {args.preset} preset, block {block}")  # fmt: skip
    if args.stray:
        notes += f", stray words in the latest caller line of a share {args.stray:g} of examples"
    if args.heard:
        notes += (
            f", plus {heard_tally['copies']} copies with the latest caller line as Whisper "
            f"tiny.en heard it from unseen voices ({args.heard.name}; "
            f"{heard_tally['repeat_requests']} turned into the repeat request)"
        )
    if init is not None:
        notes += f"; continued from {args.init} ({init.card.notes})"
    if natural:
        notes += (f", plus {len(natural)} first caller lines written independently of the "
                  f"simulator ({args.callers_copies} copies each)")  # fmt: skip
    if mid:
        notes += (f", plus {len(mid)} simulated steps with their yes, time, day, service or "
                  "name line replaced by an independent one of that kind")  # fmt: skip
    if backbone is not None:
        notes += f"; initialised from a pretrained backbone {describe(model, args.layers)}"
    if args.hints:
        notes += (
            ", caller hints (nearest known act by all-MiniLM-L6-v2; the line's own "
            f"frame's for a share {args.hint_own:g})"
        )
    card = ModelCard(config, args.kind, data_hash, metrics, notes=notes, prompt_hints=hints)
    save(args.out, model, tok, card)
    log(json.dumps({"final": metrics}))


if __name__ == "__main__":
    main()
