"""Train a block-diffusion model (or its autoregressive twin) on the synthetic tool-call task.

    python scripts/train_engine.py --kind diffusion --out runs/engine-dlm --minutes 12
    python scripts/train_engine.py --kind autoregressive \
        --tokenizer runs/engine-dlm/tokenizer.json --out runs/engine-ar --minutes 12

Resumable: rerunning with the same --out continues from `train_state.pt`. Logs one JSON
line per log interval to stdout. Ends by scoring held-out accuracy and writing the
checkpoint (safetensors + tokenizer + model card).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.checkpoint import ModelCard, save
from engine.config import preset
from engine.constraints import CallGrammar
from engine.model import DiffusionLM
from engine.tokenizer import TextTokenizer
from engine.train import Example
from engine.trainer import TrainSettings, train
from scripts.engine_eval import evaluate
from voice_agent.brain.synthetic import TOOLS, make_examples

TRAIN_SEED, EVAL_SEED = 1, 2


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--kind", choices=["diffusion", "autoregressive"], default="diffusion")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument(
        "--tokenizer", type=Path, help="reuse this tokenizer.json (share it with the twin)"
    )
    p.add_argument("--preset", default="tiny")
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--vocab", type=int, default=768)
    p.add_argument("--examples", type=int, default=40_000)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--minutes", type=float, default=10.0, help="training time budget")
    p.add_argument("--max-steps", type=int, default=100_000)
    p.add_argument("--eval-examples", type=int, default=200)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    args.out.mkdir(parents=True, exist_ok=True)
    data = make_examples(args.examples, TRAIN_SEED)
    data_hash = hashlib.sha256("\n".join(e.prompt + e.answer for e in data).encode()).hexdigest()
    if args.tokenizer:
        tok = TextTokenizer.load(args.tokenizer)
    elif (args.out / "tokenizer.json").is_file():
        tok = TextTokenizer.load(args.out / "tokenizer.json")
    else:
        tok = TextTokenizer.train((e.prompt + e.answer for e in data), vocab_size=args.vocab)
    tok.save(args.out / "tokenizer.json")
    block = 1 if args.kind == "autoregressive" else args.block_size
    config = preset(args.preset, tok.vocab_size, block_size=block, max_seq_len=256)
    grammar = CallGrammar(tok, TOOLS)
    examples = [Example(tok.encode(e.prompt), e.answer_ids(tok, grammar)) for e in data]

    torch.manual_seed(TRAIN_SEED)
    model = DiffusionLM(config)
    settings = TrainSettings(args.kind, args.minutes, args.batch, args.lr, args.max_steps,
                             TRAIN_SEED, args.device)  # fmt: skip
    result = train(model, examples, tok.ids, args.out, settings,
                   log=lambda line: print(line, flush=True))  # fmt: skip

    metrics: dict[str, object] = {
        "steps": result.steps,
        "train_minutes": result.minutes,
        "kind": args.kind,
    }
    metrics.update(
        evaluate(
            model.cpu(),
            tok,
            make_examples(args.eval_examples, EVAL_SEED, held_out=True),
            args.kind,
            "heldout",
            grammar=grammar,
        )
    )
    metrics.update(
        evaluate(
            model,
            tok,
            make_examples(args.eval_examples, EVAL_SEED + 1),
            args.kind,
            "train_templates",
            grammar=grammar,
        )
    )
    card = ModelCard(
        config,
        args.kind,
        data_hash,
        metrics,
        notes="synthetic bike-shop tool-call task (voice_agent/brain/synthetic.py)",
    )
    save(args.out, model, tok, card)
    print(json.dumps({"final": metrics}), flush=True)


if __name__ == "__main__":
    main()
