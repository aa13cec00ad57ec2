"""Putting a model on a device: float32 on CPU, bfloat16 on CUDA, the same code on both.

`torch.compile` is an option for CUDA (`compile=True`): decoding shapes vary with the
batch and the fresh-token count, so it compiles with dynamic shapes. Off by default; on
CPU it is refused, since the gain there does not pay for the compile time.
"""

from __future__ import annotations

from typing import Any

import torch

from engine.model import DiffusionLM


def runtime_dtype(device: torch.device | str) -> torch.dtype:
    return torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32


def prepare(
    model: DiffusionLM,
    device: torch.device | str = "cpu",
    *,
    dtype: torch.dtype | None = None,
    compile: bool = False,
) -> DiffusionLM:
    """The model in eval mode on `device` in its runtime dtype (or `dtype`).

    Raises ValueError when `compile` is asked for off CUDA, RuntimeError when CUDA is
    asked for and absent."""
    target = torch.device(device)
    if target.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("CUDA requested but torch sees no GPU (torch.cuda.is_available())")
    if compile and target.type != "cuda":
        raise ValueError("compile=True is a CUDA option; on CPU run the model eagerly")
    model = model.to(device=target, dtype=dtype or runtime_dtype(target)).eval()
    if compile:
        compiled: Any = torch.compile(model.forward, dynamic=True)
        model.forward = compiled  # type: ignore[method-assign]
    return model
