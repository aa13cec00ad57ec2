"""What the caller heard of the agent's line, from the player's playback results.

The session queues a line as several utterances (pieces of sentences, as the synthesizer
yields them). On barge-in the player resolves every utterance with how much of it was
played; `heard_text` turns that back into words for `Agent.commit_spoken`, so the
dialogue history holds what the caller actually heard, not what the agent meant to say.
"""

from __future__ import annotations

from dataclasses import dataclass

from voice_agent.transports.player import PlaybackResult, Utterance


@dataclass(frozen=True, slots=True)
class SpokenPiece:
    """One queued utterance and the sentence it is (part of); pieces of one sentence
    share `sentence_index`."""

    utterance: Utterance
    sentence_index: int
    sentence: str


def heard_text(pieces: list[SpokenPiece]) -> str:
    """The words the caller heard, once every piece's `heard` future is resolved.

    A sentence counts in full when all its audio was played; an interrupted sentence
    keeps the share of its words that matches the share of its audio played (rounded
    down: a half-heard word was not heard). Raises ValueError if a piece is unresolved.
    """
    played_ms: dict[int, float] = {}
    total_ms: dict[int, float] = {}
    sentences: dict[int, str] = {}
    for piece in pieces:
        if not piece.utterance.heard.done():
            raise ValueError(f"utterance {piece.utterance.id} has not finished playing")
        result: PlaybackResult = piece.utterance.heard.result()
        i = piece.sentence_index
        sentences[i] = piece.sentence
        total_ms[i] = total_ms.get(i, 0.0) + result.duration_ms
        played_ms[i] = played_ms.get(i, 0.0) + result.heard_ms
    words: list[str] = []
    for i in sorted(sentences):
        sentence_words = sentences[i].split()
        share = played_ms[i] / total_ms[i] if total_ms[i] > 0 else 0.0
        keep = len(sentence_words) if share >= 1.0 else int(len(sentence_words) * share)
        words += sentence_words[:keep]
        if keep < len(sentence_words):
            break  # nothing after an interrupted sentence was heard
    return " ".join(words)
