"""Tiny local checkpoint directories for the adapter tests: never downloaded, built here.

`remote_code_checkpoint` writes a `trust_remote_code` checkpoint (config, modelling code,
weights, tokenizer) whose model is *scripted*: the output at absolute position i puts
`TOP + i % SPAN` first and `SECOND` second, EOS first from `eos_position` on, and the
mask id first where `i % mask_every == mask_phase`. So shifted and unshifted logits,
EOS and the mask ban all give answers a test can predict. It speaks the LLaDA/Dream
call (`model(x)`, `model(x, "full", None)`) and SDAR's cached one (`store_kv`), and it
raises if a cached call's positions do not continue the cache.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.tokenizer import Special, TextTokenizer

VOCAB = 64
PAD, BOS, EOS, MASK = 0, 1, 2, 3
TOP, SPAN, SECOND = 10, 40, 5

CONFIG_PY = """
from transformers import PretrainedConfig


class TinyDLMConfig(PretrainedConfig):
    model_type = "tiny_dlm"

    def __init__(self, vocab_size=64, mask_token_id=3, eos_position=10**6, margin=10.0,
                 mask_every=0, mask_phase=0, **kwargs):
        self.vocab_size = vocab_size
        self.mask_token_id = mask_token_id
        self.eos_position = eos_position
        self.margin = margin
        self.mask_every = mask_every
        self.mask_phase = mask_phase
        super().__init__(**kwargs)
"""

MODELING_PY = f"""
import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from .configuration_tiny_dlm import TinyDLMConfig


class TinyDLM(PreTrainedModel):
    config_class = TinyDLMConfig

    def __init__(self, config):
        super().__init__(config)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.post_init()

    def _init_weights(self, module):
        pass

    def forward(self, input_ids, attention_mask=None, position_ids=None,
                past_key_values=None, use_cache=False, store_kv=False, **kwargs):
        b, n = input_ids.shape
        c = self.config
        dev = input_ids.device
        if position_ids is None:
            position_ids = torch.arange(n, device=dev)[None]
        if past_key_values is not None:
            seen = past_key_values.get_seq_length()
            if int(position_ids[0, 0]) != seen:
                raise RuntimeError(f"positions start at {{int(position_ids[0, 0])}}, cache holds {{seen}}")
            if attention_mask.shape[-1] != seen + n:
                raise RuntimeError("attention mask does not cover cache + block")
            if store_kv:
                kv = torch.zeros(b, 1, n, 1, device=dev)
                past_key_values.update(kv, kv, 0)
        pos = position_ids[0]
        top = {TOP} + pos % {SPAN}
        top = torch.where(pos >= c.eos_position, torch.full_like(top, {EOS}), top)
        if c.mask_every:
            top = torch.where(pos % c.mask_every == c.mask_phase, torch.full_like(top, c.mask_token_id), top)
        logits = torch.zeros(b, n, c.vocab_size, device=dev, dtype=self.bias.dtype) + self.bias
        logits[:, torch.arange(n, device=dev), top] += c.margin
        logits[:, :, {SECOND}] += c.margin / 2
        return CausalLMOutputWithPast(logits=logits)
"""


def tokenizer_into(directory: Path) -> None:
    """A word-level tokenizer over `t0 .. t63` with the special tokens at fixed ids."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<bos>", "<eos>", "<mask>"]
    vocab = {tok: i for i, tok in enumerate(specials)}
    vocab.update({f"t{i}": i for i in range(len(specials), VOCAB)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        mask_token="<mask>",
    )
    fast.save_pretrained(directory)


def turn_tokenizer_into(directory: Path, tok: TextTokenizer) -> None:
    """The project's tokenizer, with the turn format's tokens, as a checkpoint's own."""
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok.tokenizer,
        pad_token=Special.PAD,
        bos_token=Special.BOS,
        eos_token=Special.EOS,
        mask_token=Special.MASK,
    )
    fast.save_pretrained(directory)


def turn_config(tok: TextTokenizer) -> dict[str, Any]:
    """Config fields of a checkpoint fine-tuned for the agent: the turn tokens' ids."""
    ids = tok.ids
    return {"vocab_size": tok.vocab_size, "mask_token_id": ids.mask, "pad_token_id": ids.pad,
            "bos_token_id": ids.bos, "eos_token_id": ids.eos}  # fmt: skip


def remote_code_checkpoint(
    directory: Path, tok: TextTokenizer | None = None, **config: Any
) -> Path:
    """Write the scripted `trust_remote_code` checkpoint; `config` overrides its fields.
    With `tok`, the checkpoint carries that tokenizer and its ids (`turn_config`)."""
    from transformers import AutoConfig, AutoModel

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "configuration_tiny_dlm.py").write_text(CONFIG_PY)
    (directory / "modeling_tiny_dlm.py").write_text(MODELING_PY)
    fields = {
        "model_type": "tiny_dlm",
        "architectures": ["TinyDLM"],
        "auto_map": {
            "AutoConfig": "configuration_tiny_dlm.TinyDLMConfig",
            "AutoModel": "modeling_tiny_dlm.TinyDLM",
            "AutoModelForCausalLM": "modeling_tiny_dlm.TinyDLM",
        },
        "vocab_size": VOCAB,
        "mask_token_id": MASK,
        "pad_token_id": PAD,
        "bos_token_id": BOS,
        "eos_token_id": EOS,
    }
    if tok is not None:
        fields |= turn_config(tok)
    (directory / "config.json").write_text(json.dumps(fields | config))
    cfg = AutoConfig.from_pretrained(directory, trust_remote_code=True, local_files_only=True)
    AutoModel.from_config(cfg, trust_remote_code=True).save_pretrained(directory)
    if tok is None:
        tokenizer_into(directory)
    else:
        turn_tokenizer_into(directory, tok)
    return directory


def gemma_checkpoint(directory: Path, tok: TextTokenizer | None = None) -> Path:
    """A random DiffusionGemma (canvas of 8) built from transformers' own config classes,
    over the 64-token word tokenizer or, with `tok`, the project's tokenizer."""
    import torch
    from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion

    vocab = VOCAB if tok is None else tok.vocab_size
    ids = {"pad_token_id": PAD, "eos_token_id": EOS, "bos_token_id": BOS}
    if tok is not None:
        ids = {k: v for k, v in turn_config(tok).items() if k in ids}
    text = {
        "vocab_size": vocab, "hidden_size": 32, "intermediate_size": 64,
        "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
        "head_dim": 16, "global_head_dim": 16, "sliding_window": 16,
        "max_position_embeddings": 512, "num_experts": 2, "top_k_experts": 1,
        "moe_intermediate_size": 32, "layer_types": ["sliding_attention", "full_attention"],
        **ids,
    }  # fmt: skip
    vision = {
        "model_type": "gemma4_vision", "hidden_size": 16, "intermediate_size": 32,
        "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2,
        "head_dim": 8, "position_embedding_size": 64, "patch_size": 4,
    }  # fmt: skip
    config = DiffusionGemmaConfig(
        text_config=text,
        vision_config=vision,
        canvas_length=8,
        image_token_id=vocab - 1,
        boi_token_id=vocab - 3,
        eoi_token_id=vocab - 2,
    )
    torch.manual_seed(0)
    DiffusionGemmaForBlockDiffusion(config).save_pretrained(directory)
    if tok is None:
        tokenizer_into(directory)
    else:
        turn_tokenizer_into(directory, tok)
    return directory
