"""The training loop shared by the synthetic engine task and the brain: resumable, on a
time budget, logging one JSON line per interval.

`train(...)` continues from `out/train_state.pt` when it exists (model, optimizer, step,
elapsed time), so a run cut short resumes where it stopped; the learning rate follows a
warm-up then a cosine over the time budget. `seed_state(...)` writes such a file from
weights alone (a shipped float16 checkpoint, say), so training continues from them with a
fresh optimizer.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

from engine.model import DiffusionLM
from engine.tokenizer import SpecialIds
from engine.train import Batch, Example, autoregressive_loss, collate, diffusion_loss

Kind = Literal["diffusion", "autoregressive"]
LOG_EVERY = 50
SAVE_EVERY = 200
MIN_LR_FRACTION = 0.1


@dataclass(frozen=True, slots=True)
class TrainSettings:
    kind: Kind
    minutes: float
    batch: int = 32
    lr: float = 2e-3
    max_steps: int = 100_000
    seed: int = 1
    device: str = "cpu"
    warmup_steps: int = 100


@dataclass(frozen=True, slots=True)
class TrainResult:
    steps: int
    minutes: float
    last_loss: float


def learning_rate(settings: TrainSettings, step: int, progress: float) -> float:
    warm = min(1.0, (step + 1) / settings.warmup_steps)
    cosine = MIN_LR_FRACTION + (1 - MIN_LR_FRACTION) * 0.5 * (1 + math.cos(math.pi * progress))
    return settings.lr * warm * cosine


def train(
    model: DiffusionLM,
    examples: list[Example],
    ids: SpecialIds,
    out: Path,
    settings: TrainSettings,
    log: Callable[[str], None] = print,
) -> TrainResult:
    """Train `model` in place until the time budget or `max_steps`; saves train state to
    `out/train_state.pt` every `SAVE_EVERY` steps and at the end."""
    if not examples:
        raise ValueError("no training examples")
    device = settings.device
    model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=settings.lr, betas=(0.9, 0.95),
                            weight_decay=0.01)  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    state_path = out / "train_state.pt"
    step, elapsed_s = 0, 0.0
    if state_path.is_file():
        saved = torch.load(state_path, map_location=device)
        model.load_state_dict(saved["model"])
        fresh = saved.get("opt") is None
        if not fresh:
            opt.load_state_dict(saved["opt"])
        step, elapsed_s = saved["step"], saved["elapsed_s"]
        log(json.dumps({"resumed_at_step": step, "elapsed_s": round(elapsed_s),
                        "optimizer": "fresh" if fresh else "restored"}))  # fmt: skip
    budget_s = settings.minutes * 60
    rng = random.Random(settings.seed + step)
    gen = torch.Generator(device=device).manual_seed(settings.seed + step)
    t_start = time.monotonic() - elapsed_s
    tokens_seen, loss_value = 0, float("nan")
    block = model.config.block_size

    def save_state() -> None:
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                    "elapsed_s": time.monotonic() - t_start}, state_path)  # fmt: skip

    while step < settings.max_steps and time.monotonic() - t_start < budget_s:
        lr = learning_rate(settings, step, (time.monotonic() - t_start) / budget_s)
        for g in opt.param_groups:
            g["lr"] = lr
        batch = _to(collate(rng.sample(examples, min(settings.batch, len(examples))), ids,
                            block), device)  # fmt: skip
        with torch.autocast(device, dtype=torch.bfloat16, enabled=device.startswith("cuda")):
            if settings.kind == "diffusion":
                loss = diffusion_loss(model, batch, ids, gen)
            else:
                loss = autoregressive_loss(model, batch, ids)
        opt.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        loss_value = loss.item()
        tokens_seen += int(batch.prompt_len.sum() + batch.answer_len.sum())
        if step % LOG_EVERY == 0:
            took = time.monotonic() - t_start
            rate = tokens_seen / max(took - elapsed_s, 1e-9)
            log(json.dumps({"step": step, "loss": round(loss_value, 4), "lr": round(lr, 6),
                            "elapsed_s": round(took), "tokens_per_s": round(rate)}))  # fmt: skip
        if step % SAVE_EVERY == 0:
            save_state()
    save_state()
    model.eval()
    return TrainResult(step, round((time.monotonic() - t_start) / 60, 1), loss_value)


def seed_state(out: Path, model: DiffusionLM, step: int, elapsed_s: float) -> Path:
    """Write `out/train_state.pt` holding `model`'s weights in float32 and no optimizer
    state, at `step` and `elapsed_s` (so the schedule goes on where those left it); refuses
    to overwrite a state a run already left there."""
    if step < 0 or elapsed_s < 0:
        raise ValueError(f"step ({step}) and elapsed_s ({elapsed_s}) must not be negative")
    path = out / "train_state.pt"
    if path.exists():
        raise FileExistsError(f"{path} exists: a run there resumes from it")
    out.mkdir(parents=True, exist_ok=True)
    weights = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    torch.save({"model": weights, "opt": None, "step": step, "elapsed_s": elapsed_s}, path)
    return path


def _to(batch: Batch, device: str) -> Batch:
    return Batch(batch.prompt.to(device), batch.prompt_len.to(device),
                 batch.answer.to(device), batch.answer_len.to(device))  # fmt: skip
