"""Benchmark the engine against its baselines on the same held-out prompts, in one run.

    python scripts/bench_engine.py --json out/bench_engine.json

Decoders: `engine` (block diffusion, exact KV cache, confidence threshold, constrained
tool calls, step-level batching), `engine_one_token_per_step` (the same loop committing
one token per forward: the accuracy reference for parallel commits),
`engine_unconstrained` (the engine decoding calls freely, like the baselines: what the
constraints add to accuracy), `plain_diffusion`
(LLaDA's reference sampler: fixed steps, full forward, no cache) and `autoregressive`
(the AR twin, KV cache, one token per forward). The diffusion checkpoint and the AR twin
are the same size and were trained on the same data (see their model cards).

Per decoder: tokens/s, forwards per answer, tokens per forward, latency per answer
(p50/p95) at batch 1, accuracy on the held-out prompts, and the same under 8 and 32
concurrent requests. Concurrency: the engine batches step by step; the AR twin decodes
the requests as one static batch; the plain sampler has no batching and serves them one
after another (latency counts the wait).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.baselines import autoregressive, autoregressive_batch, plain_diffusion
from engine.batching import Engine
from engine.checkpoint import Checkpoint, load
from engine.constraints import CallGrammar
from engine.generate import Generation, Request, generate
from engine.schedule import Schedule
from voice_agent.brain.synthetic import TOOLS, action_of, make_examples
from voice_agent.grounding import ground

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DLM = ROOT / "engine" / "checkpoints" / "synthetic-dlm"
DEFAULT_AR = ROOT / "engine" / "checkpoints" / "synthetic-ar"
EVAL_SEED = 2
MAX_NEW_TOKENS = 96


def percentiles(values_s: list[float]) -> dict[str, float]:
    ms = sorted(v * 1000 for v in values_s)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return {"p50": round(statistics.median(ms), 2), "p95": round(p95, 2)}


def per_forward(gens: list[Generation]) -> dict[str, float]:
    """Tokens per forward two ways: decided by the model (scaffold excluded) and emitted."""
    forwards = sum(g.forwards for g in gens) or 1
    return {
        "tokens_per_forward": round(sum(g.decided_tokens for g in gens) / forwards, 2),
        "emitted_tokens_per_forward": round(sum(len(g.token_ids) for g in gens) / forwards, 2),
    }


def summarize(
    gens: list[Generation], wall_s: float, correct: list[bool], calls: list[bool] | None = None
) -> dict[str, Any]:
    """Figures for one decoder; `calls` marks the answers whose gold action is a tool call
    (their figures are also reported on their own)."""
    tokens = sum(len(g.token_ids) for g in gens)
    forwards = [g.forwards for g in gens]
    out: dict[str, Any] = {
        "tokens_per_s": round(tokens / wall_s, 1),
        **per_forward(gens),
        "forwards_per_answer": statistics.median(forwards),
        "latency_ms": percentiles([g.latency_s for g in gens]),
        "accuracy": round(sum(correct) / len(correct), 4),
        "answers": len(gens),
    }
    if calls is not None and any(calls):
        picked = [i for i, c in enumerate(calls) if c]
        out["tool_call_answers"] = {
            **per_forward([gens[i] for i in picked]),
            "accuracy": round(sum(correct[i] for i in picked) / len(picked), 4),
            "answers": len(picked),
        }
    return out


class Bench:
    def __init__(self, dlm: Checkpoint, ar: Checkpoint, prompts: int, threshold: float) -> None:
        self.dlm, self.ar = dlm, ar
        self.tok = dlm.tokenizer
        self.examples = make_examples(prompts, EVAL_SEED, held_out=True)
        self.prompts = [self.tok.encode(e.prompt) for e in self.examples]
        self.efforts = {
            tuple(p): e.effort for p, e in zip(self.prompts, self.examples, strict=True)
        }
        self.grammar = CallGrammar(self.tok, TOOLS)
        self.threshold = threshold

    def correct(self, gens: list[Generation]) -> list[bool]:
        """Per answer; answer i belongs to prompt i modulo the prompt count."""
        n = len(self.examples)
        return [
            action_of(self.tok.decode(g.token_ids)) == self.examples[i % n].action
            for i, g in enumerate(gens)
        ]

    def request(self, prompt: list[int], threshold: float, constrained: bool = True) -> Request:
        effort = self.efforts[tuple(prompt)]  # as the prompt's effort token asks
        schedule = Schedule(threshold=threshold, max_new_tokens=MAX_NEW_TOKENS, effort=effort)
        if not constrained:
            return Request(tuple(prompt), schedule)
        return Request(tuple(prompt), schedule, grammar=self.grammar, grounder=ground)

    def one_by_one(self, decode: Callable[[list[int]], Generation]) -> dict[str, Any]:
        decode(self.prompts[0])  # warm-up
        t0 = time.perf_counter()
        gens = [decode(p) for p in self.prompts]
        calls = [ex.call is not None for ex in self.examples]
        return summarize(gens, time.perf_counter() - t0, self.correct(gens), calls)

    def engine(self, threshold: float, constrained: bool = True) -> dict[str, Any]:
        model, ids = self.dlm.model, self.tok.ids
        return self.one_by_one(
            lambda p: generate(
                model, ids, self.request(p, threshold, constrained), time.perf_counter
            )
        )

    def plain(self, steps_per_block: int) -> dict[str, Any]:
        model, ids = self.dlm.model, self.tok.ids
        return self.one_by_one(
            lambda p: plain_diffusion(
                model, ids, p, MAX_NEW_TOKENS, steps_per_block, time.perf_counter
            )
        )

    def autoregressive(self) -> dict[str, Any]:
        model, ids = self.ar.model, self.ar.tokenizer.ids
        return self.one_by_one(
            lambda p: autoregressive(model, ids, p, MAX_NEW_TOKENS, time.perf_counter)
        )

    def batch(self, n: int) -> list[list[int]]:
        return [self.prompts[i % len(self.prompts)] for i in range(n)]

    def engine_concurrent(self, n: int) -> dict[str, Any]:
        async def run() -> tuple[list[Generation], float]:
            async with Engine(self.dlm.model, self.tok.ids, max_batch=n,
                              clock=time.perf_counter) as engine:  # fmt: skip
                await engine.generate(self.request(self.prompts[0], self.threshold))  # warm-up
                t0 = time.perf_counter()
                gens = await asyncio.gather(
                    *(engine.generate(self.request(p, self.threshold)) for p in self.batch(n))
                )
                return list(gens), time.perf_counter() - t0

        gens, wall = asyncio.run(run())
        return summarize(gens, wall, self.correct(gens))

    def ar_concurrent(self, n: int) -> dict[str, Any]:
        model, ids = self.ar.model, self.ar.tokenizer.ids
        t0 = time.perf_counter()
        gens = autoregressive_batch(model, ids, self.batch(n), MAX_NEW_TOKENS, time.perf_counter)
        return summarize(gens, time.perf_counter() - t0, self.correct(gens))

    def plain_concurrent(self, n: int, steps_per_block: int) -> dict[str, Any]:
        model, ids = self.dlm.model, self.tok.ids
        t0 = time.perf_counter()
        gens = []
        for p in self.batch(n):
            g = plain_diffusion(model, ids, p, MAX_NEW_TOKENS, steps_per_block, time.perf_counter)
            waited = time.perf_counter() - t0  # queued behind the earlier requests
            gens.append(Generation(g.token_ids, g.finish_reason, False, g.forwards,
                                   g.decided_tokens, waited))  # fmt: skip
        return summarize(gens, time.perf_counter() - t0, self.correct(gens))


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return f"cuda: {torch.cuda.get_device_name(0)}"
    cpu = platform.processor() or platform.machine()
    return f"cpu: {cpu}, {torch.get_num_threads()} torch threads"


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--json", type=Path, required=True, help="write the figures here")
    p.add_argument("--dlm", type=Path, default=DEFAULT_DLM, help="diffusion checkpoint folder")
    p.add_argument("--ar", type=Path, default=DEFAULT_AR, help="AR twin checkpoint folder")
    p.add_argument("--prompts", type=int, default=60, help="held-out prompts at batch 1")
    p.add_argument("--threshold", type=float, default=0.9, help="engine commit threshold")
    p.add_argument("--plain-tokens-per-step", type=int, default=2)
    p.add_argument("--concurrency", type=int, nargs="*", default=[8, 32])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    args = p.parse_args()
    if args.prompts < 1 or any(n < 1 for n in args.concurrency):
        p.error("--prompts and --concurrency must be positive")
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        dlm, ar = load(args.dlm, args.device), load(args.ar, args.device)
    except (FileNotFoundError, ValueError) as exc:
        sys.exit(f"bench_engine: {exc}")
    if dlm.tokenizer.tokenizer.to_str() != ar.tokenizer.tokenizer.to_str():
        sys.exit("bench_engine: the two checkpoints must share one tokenizer")
    bs = dlm.model.config.block_size
    if bs % args.plain_tokens_per_step:
        p.error(f"--plain-tokens-per-step must divide the block size {bs}")
    steps_per_block = bs // args.plain_tokens_per_step

    bench = Bench(dlm, ar, args.prompts, args.threshold)
    decoders: dict[str, dict[str, Any]] = {
        "engine": bench.engine(args.threshold),
        "engine_one_token_per_step": bench.engine(1.0),
        "engine_unconstrained": bench.engine(args.threshold, constrained=False),
        "plain_diffusion": bench.plain(steps_per_block),
        "autoregressive": bench.autoregressive(),
    }
    for n in args.concurrency:
        decoders["engine"].setdefault("concurrent", {})[str(n)] = bench.engine_concurrent(n)
        decoders["autoregressive"].setdefault("concurrent", {})[str(n)] = bench.ar_concurrent(n)
        decoders["plain_diffusion"].setdefault("concurrent", {})[str(n)] = bench.plain_concurrent(
            n, steps_per_block
        )
    e, pl, ar_d = decoders["engine"], decoders["plain_diffusion"], decoders["autoregressive"]
    ratios = {
        "engine_vs_plain_tokens_per_s": round(e["tokens_per_s"] / pl["tokens_per_s"], 2),
        "engine_vs_ar_tokens_per_s": round(e["tokens_per_s"] / ar_d["tokens_per_s"], 2),
    }
    for n in args.concurrency:
        k = str(n)
        ratios[f"engine_vs_ar_tokens_per_s_at_{n}"] = round(
            e["concurrent"][k]["tokens_per_s"] / ar_d["concurrent"][k]["tokens_per_s"], 2
        )
    result = {
        "decoders": decoders,
        "ratios": ratios,
        "device": device_name(args.device),
        "settings": {
            "prompts": args.prompts,
            "threshold": args.threshold,
            "plain_tokens_per_step": args.plain_tokens_per_step,
            "max_new_tokens": MAX_NEW_TOKENS,
            "block_size": bs,
            "parameters": dlm.model.num_parameters(),
            "dlm": str(args.dlm),
            "ar": str(args.ar),
        },
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
