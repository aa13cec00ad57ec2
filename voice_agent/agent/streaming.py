"""Speech text as the engine commits it, so synthesis can start on the first sentence.

`SayStreamer` watches one answer's committed blocks and hands the growing text of its
`<say>` to a hook, piece by piece (the synthesizer's sentence splitter decides when a
sentence is complete). Nothing is streamed from reasoning or a tool call. When the turn
ends, `finish(line)` sends whatever of the reply's line was not streamed yet; if the line
does not continue what was streamed (the answer turned out unusable after its speech had
begun), the streamed text stands as the reply, since it may already be playing.
Invariant: the pieces the hook received, joined, are the reply's text.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from engine.tokenizer import Special, TextTokenizer

TextHook = Callable[[str], None]
_REPLACEMENT = "\ufffd"
"""What a byte-level BPE decodes half a multi-byte character to: held back until whole."""
_FILLERS = (Special.GAP, Special.PAD)


def say_text(answer: str) -> str | None:
    """The speech of a partly decoded answer: the text after `<say>` up to the next
    special token or brace (`parse_answer` refuses a say that holds one), stripped; None
    while the answer is not (yet) a `<say>`."""
    text = answer.split(Special.EOS, 1)[0]
    for filler in _FILLERS:
        text = text.replace(filler, "")
    text = text.lstrip()
    if text.startswith(Special.THINK):
        text = text.removeprefix(Special.THINK)
        cut = _first_marker(text)
        if cut is None:
            return None
        text = text[cut:]
    if not text.startswith(Special.SAY):
        return None
    body = text.removeprefix(Special.SAY)
    cut = _first_marker(body)
    body = body if cut is None else body[:cut]
    return body.split("{", 1)[0].strip()  # a call written as speech is never spoken


def _first_marker(text: str) -> int | None:
    found = [i for i in (text.find(s) for s in Special.ALL) if i >= 0]
    return min(found) if found else None


class SayStreamer:
    """One per turn; `feed` each committed block of the current answer, `restart` when a
    new engine request begins, `finish` once with the reply's line."""

    def __init__(
        self, tok: TextTokenizer, on_text: TextHook | None, hold_below: float = 0.0
    ) -> None:
        """`hold_below`: once a block's answer-so-far confidence is under it, nothing more
        of that answer is streamed (the agent will not trust the answer, so its text must
        not be spoken before the turn decides)."""
        self._tok = tok
        self._on_text = on_text
        self._hold_below = hold_below
        self._held = False
        self._ids: list[int] = []
        self.streamed = ""
        """Text the hook has received so far."""

    def restart(self) -> None:
        """A new answer begins (after a tool call). Speech already streamed stays."""
        self._ids, self._held = [], False

    def feed(self, block: tuple[int, ...], min_confidence: float = 1.0) -> None:
        """The next committed block; `min_confidence`: the answer's lowest so far."""
        self._ids += block
        self._held |= min_confidence < self._hold_below
        if self._on_text is None or self._held:
            return
        text = say_text(self._tok.decode(self._ids))
        if text is None:
            return
        text = text.rstrip(_REPLACEMENT).rstrip()  # the final line is stripped too
        if len(text) > len(self.streamed) and text.startswith(self.streamed):
            self._emit(text[len(self.streamed) :])

    def finish(self, line: str) -> tuple[str, bool]:
        """Send the unstreamed rest of `line`; returns (the reply's text, whether it is
        `line`). It is not when `line` does not continue the streamed text; then the
        streamed text stands, except after an answer held back as unsure: its start was
        cut short, so `line` follows it (the caller hears "We open... Sorry, could you
        say that again?", not a fragment alone)."""
        if not line.startswith(self.streamed):
            if not self._held or self._on_text is None:
                return self.streamed, False
            self._emit(" " + line)
            return self.streamed, True
        if len(line) > len(self.streamed) and self._on_text is not None:
            self._emit(line[len(self.streamed) :])
        return line, True

    def _emit(self, piece: str) -> None:
        assert self._on_text is not None
        self.streamed += piece
        self._on_text(piece)


class TextChannel:
    """The `on_text` hook as an async iterator of text pieces, for
    `voice_agent.speech.stream.speak`:

        channel = TextChannel()
        task = asyncio.create_task(agent.respond(text, on_text=channel.put))
        task.add_done_callback(lambda _: channel.close())
        audio = speak(channel.pieces(), synth, rate_hz)
    """

    def __init__(self) -> None:
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()

    def put(self, piece: str) -> None:
        self._queue.put_nowait(piece)

    def close(self) -> None:
        """No more pieces: `pieces()` ends after those already put."""
        self._queue.put_nowait(None)

    async def pieces(self) -> AsyncIterator[str]:
        while (piece := await self._queue.get()) is not None:
            yield piece
