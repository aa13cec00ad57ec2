"""Larger open diffusion LMs behind the engine's request/response interface.

Every adapter takes prompt ids, a `Schedule` (threshold, steps per block, max new
tokens) and a deadline on a caller's clock, and returns the engine's `Generation`
(tokens, finish reason, whether the deadline forced it, forwards, decided tokens,
latency). All share the engine's commit rule (`engine.schedule`), its deadline forcing
and its no-empty-answer rule (EOS is banned at the answer's first position). Weights
load only from a local directory (`local_files_only=True`); nothing is downloaded.
`transformers` is imported lazily: `pip install -e ".[adapters]"`.

Support matrix (KV cache / constraints / batching, then the canvas rules):

* DiffusionGemma: native `transformers` (`DiffusionGemmaForBlockDiffusion`, 5.13+).
  Cache yes (encoder KV cache; writing a finished canvas folds into the next canvas's
  first forward) / constraints no / batching no. No mask token: the canvas
  (`config.canvas_length`, 256 released) starts as random tokens and unaccepted
  positions are renoised each step; self-conditioning on the previous step's logits.
* LLaDA: `trust_remote_code`. Cache no (every step forwards prompt + whole canvas) /
  constraints no / batching no. Mask 126336; the whole answer budget is laid down as
  masks and denoised in blocks of 32, left to right; logits read at their position.
* Dream: `trust_remote_code`. As LLaDA, with mask 151666 and logits shifted by one (the
  output at i predicts token i + 1).
* SDAR: `trust_remote_code`. Cache yes (`store_kv` block-causal cache; one extra
  forward per finished block to write it) / constraints no / batching no. Mask 151669;
  blocks of 4 aligned to position 0, the prompt's tail sharing the first block.

"constraints: no" means the schema scaffold of `engine/constraints.py` is not wired to
them yet (each loop already commits through a banned-token mask, where it would go);
"batching: no" means one request per call (no step-level batching across requests).
Mask and EOS ids named in a checkpoint's configs take precedence over these defaults.
"""

from engine.adapters.base import Adapter, AdapterError, Supports, TextCodec
from engine.adapters.diffusion_gemma import load_diffusion_gemma
from engine.adapters.masked import load_dream, load_llada
from engine.adapters.sdar import load_sdar

__all__ = [
    "Adapter",
    "AdapterError",
    "Supports",
    "TextCodec",
    "load_diffusion_gemma",
    "load_dream",
    "load_llada",
    "load_sdar",
]
