"""Read-backs: the agent's spoken confirmation of a call, laid out like the call itself.

A read-back ("So a table for two on Friday for Anna. Shall I book that?") is
where an invented value does the most harm: the caller agrees to what they heard. A small
model writes its words well but guesses its values (measured: "for Ken Patel" to a caller
called Anna). So a tool pack may declare its read-backs as templates: fixed text and the
tool's argument slots, each with how the value is spoken. Once the model has committed
`<say>` and a template's opening words, the rest of the template is laid out and each
value is chosen as the call's would be: among the values the caller said (grounded
enums, names: the request's `Grounding`), scored by the model. The answer ends with it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from engine.tokenizer import TextTokenizer


@dataclass(frozen=True, slots=True)
class Spoken:
    """A tool argument inside a read-back and how it is said (`render`: value → words)."""

    key: str
    render: Callable[[str], str] = str


@dataclass(frozen=True, slots=True)
class SayTemplate:
    """A read-back of `tool`'s call: text pieces and `Spoken` arguments, in order. The
    first piece is text (the opening words that select the template)."""

    tool: str
    pieces: tuple[str | Spoken, ...]

    def __post_init__(self) -> None:
        if not self.pieces or not isinstance(self.pieces[0], str) or not self.pieces[0].strip():
            raise ValueError(f"read-back of {self.tool!r} must open with fixed words")

    def render(self, arguments: dict[str, str]) -> str:
        """The read-back's text for `arguments` (what the data generator writes)."""
        return "".join(p if isinstance(p, str) else p.render(arguments[p.key]) for p in self.pieces)

    def pattern(
        self, options: Mapping[str, Sequence[str]], free: str = r".+?"
    ) -> tuple[str, dict[str, dict[str, str]]]:
        """A regex matching the read-back as spoken, one named group per argument, and
        for each argument its spoken forms (case-folded) → value. `options`: argument →
        its allowed values (an enum's), each spoken as the template says it; an argument
        without options (a name) is `free` words and maps to nothing."""
        parts: list[str] = []
        spoken: dict[str, dict[str, str]] = {}
        for piece in self.pieces:
            if isinstance(piece, str):
                parts.append(r"\s+".join(re.escape(w) for w in piece.split(" ")))
                continue
            key = piece.key
            if key in spoken:
                parts.append(rf"(?P={key})")
                continue
            said = {" ".join(piece.render(v).split()).casefold(): v for v in options.get(key, ())}
            spoken[key] = said
            ways = sorted(said, key=len, reverse=True)
            body = "|".join(re.escape(w) for w in ways) if key in options else free
            parts.append(rf"(?P<{key}>{body})")
        return "".join(parts), spoken

    def read(self, text: str, options: Mapping[str, Sequence[str]]) -> dict[str, str] | None:
        """The arguments a spoken read-back `text` stands for (`render`'s inverse), or None
        when it is not this read-back whole (`pattern`; case and spacing aside)."""
        body, spoken = self.pattern(options)
        found = re.fullmatch(body, " ".join(text.split()), re.IGNORECASE)
        return None if found is None else heard_values(found, spoken)

    def segments(self) -> list[str | Spoken]:
        """The pieces cut at word starts, so each tokenizes as it would inside the whole
        sentence: a space that ends a text piece moves onto the value after it."""
        out: list[str | Spoken] = []
        carry = ""
        for piece in self.pieces:
            if isinstance(piece, str):
                text = carry + piece
                stripped = text.rstrip(" ")
                carry = text[len(stripped) :]
                if stripped:
                    out.append(stripped)
            else:
                out.append(replace(piece, render=_spaced(piece.render, carry)))
                carry = ""
        return out


def heard_values(found: re.Match[str], spoken: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """The values a match of a read-back's `pattern` spoke, by argument."""
    return {key: said.get(found[key].casefold(), found[key]) for key, said in spoken.items()}


def _spaced(render: Callable[[str], str], prefix: str) -> Callable[[str], str]:
    return lambda value: prefix + render(value)


def lead_ids(tok: TextTokenizer, template: SayTemplate) -> tuple[int, ...]:
    """Tokens of the opening words as they follow `<say>` (with the space before them)."""
    first = template.segments()[0]
    assert isinstance(first, str)
    return tuple(tok.encode(" " + first.lstrip()))
