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
import math
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.checkpoint import ModelCard, save
from engine.config import preset
from engine.constraints import CallGrammar
from engine.model import DiffusionLM
from engine.synthetic import TOOLS, make_examples
from engine.tokenizer import TextTokenizer
from engine.train import Example, autoregressive_loss, collate, diffusion_loss
from scripts.engine_eval import evaluate

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
    model = DiffusionLM(config).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)
    state_path = args.out / "train_state.pt"
    step, elapsed_s = 0, 0.0
    if state_path.is_file():
        saved = torch.load(state_path, map_location=args.device)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        step, elapsed_s = saved["step"], saved["elapsed_s"]
        print(json.dumps({"resumed_at_step": step}), flush=True)
    budget_s = args.minutes * 60
    rng = random.Random(TRAIN_SEED + step)
    gen = torch.Generator(device=args.device).manual_seed(TRAIN_SEED + step)
    t_start = time.monotonic() - elapsed_s
    tokens_seen = 0
    model.train()
    while step < args.max_steps and time.monotonic() - t_start < budget_s:
        progress = (time.monotonic() - t_start) / budget_s
        lr = (
            args.lr
            * min(1.0, (step + 1) / 100)
            * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))
        )
        for g in opt.param_groups:
            g["lr"] = lr
        batch = collate(rng.sample(examples, args.batch), tok.ids, config.block_size)
        batch = type(batch)(
            *(
                t.to(args.device)
                for t in (batch.prompt, batch.prompt_len, batch.answer, batch.answer_len)
            )
        )
        with torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.device == "cuda"):
            if args.kind == "diffusion":
                loss = diffusion_loss(model, batch, tok.ids, gen)
            else:
                loss = autoregressive_loss(model, batch, tok.ids)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens_seen += int(batch.prompt_len.sum() + batch.answer_len.sum())
        if step % 50 == 0:
            took = time.monotonic() - t_start
            rate = tokens_seen / max(took - elapsed_s, 1e-9)
            log = {"step": step, "loss": round(loss.item(), 4), "lr": round(lr, 6),
                   "elapsed_s": round(took), "tokens_per_s": round(rate)}  # fmt: skip
            print(json.dumps(log), flush=True)
        if step % 200 == 0:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                        "elapsed_s": time.monotonic() - t_start}, state_path)  # fmt: skip
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                "elapsed_s": time.monotonic() - t_start}, state_path)  # fmt: skip

    model.eval()
    metrics = {
        "steps": step,
        "train_minutes": round((time.monotonic() - t_start) / 60, 1),
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
        notes="synthetic bike-shop tool-call task (engine/synthetic.py)",
    )
    save(args.out, model, tok, card)
    print(json.dumps({"final": metrics}), flush=True)


if __name__ == "__main__":
    main()
