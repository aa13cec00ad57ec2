"""Step-level batching for an open dLLM through the engine's core: one request at a time
against N at once, on one random DiffusionGemma (transformers' own class, so nothing is
downloaded or trusted) carrying the shipped brain's tokenizer.

    python scripts/bench_adapters.py --device cuda --concurrency 1 8 --json out/adapters.json

Per concurrency N, in one run: N requests decoded one after another on a one-row backend
(the baseline) and the same N through `engine.batching.Engine` on an N-row backend;
tokens per second (median over `--repeats`) and their ratio. Greedy decoding is
deterministic, so the answers of the two runs are checked equal. The weights are random:
the figures are about the engine's scheduling and the adapter's forward, not answers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from engine.adapters import ModelAdapter, load_adapter
from engine.batching import Engine
from engine.generate import Generation, Request, generate
from engine.runtime import runtime_dtype
from engine.schedule import Schedule
from engine.tokenizer import Special, TextTokenizer
from voice_agent.pipeline.brain import BRAIN_CHECKPOINT

LINES = ["hi, do you have a table for two", "where is my order", "are you open on sunday",
         "book me in tomorrow at ten", "how much is a tune-up", "bye then",
         "can someone call me back", "is the shop open late"]  # fmt: skip


def build(directory: Path, tok: TextTokenizer, hidden: int, layers: int) -> Path:
    from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion

    ids = tok.ids
    heads = max(2, hidden // 64)
    text = {
        "vocab_size": tok.vocab_size, "hidden_size": hidden, "intermediate_size": 4 * hidden,
        "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": 1,
        "head_dim": hidden // heads, "global_head_dim": hidden // heads, "sliding_window": 128,
        "max_position_embeddings": 1024, "num_experts": 2, "top_k_experts": 1,
        "moe_intermediate_size": 2 * hidden,
        "layer_types": ["sliding_attention", "full_attention"] * (layers // 2),
        "pad_token_id": ids.pad, "eos_token_id": ids.eos, "bos_token_id": ids.bos,
    }  # fmt: skip
    vision = {
        "model_type": "gemma4_vision", "hidden_size": 16, "intermediate_size": 32,
        "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2,
        "head_dim": 8, "position_embedding_size": 64, "patch_size": 4,
    }  # fmt: skip
    v = tok.vocab_size
    config = DiffusionGemmaConfig(
        text_config=text, vision_config=vision, canvas_length=16,
        image_token_id=v - 1, boi_token_id=v - 3, eoi_token_id=v - 2,
    )  # fmt: skip
    torch.manual_seed(0)
    DiffusionGemmaForBlockDiffusion(config).save_pretrained(directory)
    from transformers import PreTrainedTokenizerFast

    PreTrainedTokenizerFast(tokenizer_object=tok.tokenizer, pad_token=Special.PAD,
                            bos_token=Special.BOS, eos_token=Special.EOS,
                            mask_token=Special.MASK).save_pretrained(directory)  # fmt: skip
    return directory


def requests(tok: TextTokenizer, n: int, tokens: int) -> list[Request]:
    schedule = Schedule(threshold=0.0, max_new_tokens=tokens)  # a whole canvas per step
    lines = [LINES[i % len(LINES)] for i in range(n)]
    prompts = [f"{Special.BOS}{Special.CALLER} {line}{Special.AGENT}" for line in lines]
    return [Request(tuple(tok.encode(p)), schedule) for p in prompts]


def sequential(adapter: ModelAdapter, batch: list[Request]) -> tuple[float, list[Generation]]:
    t0 = time.perf_counter()
    gens = [generate(adapter.backend(1), None, r, time.monotonic) for r in batch]
    return time.perf_counter() - t0, gens


def batched(adapter: ModelAdapter, batch: list[Request]) -> tuple[float, list[Generation]]:
    async def run() -> tuple[float, list[Generation]]:
        async with Engine(adapter.backend(len(batch)), max_batch=len(batch)) as engine:
            t0 = time.perf_counter()
            gens = await asyncio.gather(*(engine.generate(r) for r in batch))
            return time.perf_counter() - t0, list(gens)

    return asyncio.run(run())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=32, help="answer tokens per request")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if min(args.concurrency) < 1 or args.repeats < 1 or args.tokens < 1:
        parser.error("--concurrency, --repeats and --tokens must be positive")
    if args.layers < 2 or args.layers % 2 or args.hidden < 64 or args.hidden % 64:
        parser.error("--layers must be even and at least 2; --hidden a multiple of 64")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no GPU")
    tok = TextTokenizer.load(BRAIN_CHECKPOINT / "tokenizer.json")
    with tempfile.TemporaryDirectory() as tmp:
        directory = build(Path(tmp), tok, args.hidden, args.layers)
        adapter = load_adapter(directory, device=args.device, dtype=runtime_dtype(args.device))
        batched(adapter, requests(tok, 1, args.tokens))  # warm-up
        result: dict[str, object] = {"device": args.device, "hidden": args.hidden,
                                     "layers": args.layers, "tokens": args.tokens}  # fmt: skip
        by_n: dict[str, object] = {}
        for n in args.concurrency:
            batch = requests(tok, n, args.tokens)
            seq_s, bat_s, same = [], [], True
            for _ in range(args.repeats):
                s, one = sequential(adapter, batch)
                b, many = batched(adapter, batch)
                seq_s.append(s)
                bat_s.append(b)
                same &= [g.token_ids for g in one] == [g.token_ids for g in many]
            answered = sum(len(g.token_ids) for g in many)
            seq_tps = answered / statistics.median(seq_s)
            bat_tps = answered / statistics.median(bat_s)
            by_n[str(n)] = {
                "sequential_tokens_per_s": round(seq_tps, 1),
                "batched_tokens_per_s": round(bat_tps, 1),
                "ratio": round(bat_tps / seq_tps, 2),
                "answers_equal": same,
            }
        result["concurrency"] = by_n
    text = json.dumps(result, indent=2)
    print(text)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    equal = all(isinstance(v, dict) and v["answers_equal"] for v in by_n.values())
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
