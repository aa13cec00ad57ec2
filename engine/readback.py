"""Read-backs: the agent's spoken confirmation of a call, laid out like the call itself.

A read-back ("So a table for two on Friday for Anna. Shall I book that?") is
where an invented value does the most harm: the caller agrees to what they heard. A small
model writes its words well but guesses its values (measured: "for Ken Patel" to a caller
called Anna). So a tool pack may declare its read-backs as templates: fixed text and the
tool's argument slots, each with how the value is spoken. Once the model has committed
`<say>` and a template's opening words, the rest of the template is laid out and each
value is chosen as the call's would be: among the values the caller said (grounded
enums, names: the request's `Grounding`), scored by the model. The answer ends with it.

A wording that itself settles an argument ("Two city inner tubes for Ana, ...": the count
opens the sentence) is one template per value, each with that value `fixed`. When the
model opens one whose fixed count the caller did not say, and the opening is still in the
block being decoded, the engine lays out the wording of the count said instead
(`CallPlan._fixed_said`, engine/constraints.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from engine.tokenizer import TextTokenizer


@dataclass(frozen=True, slots=True)
class Spoken:
    """A tool argument inside a read-back and how it is said (`render`: value → words).
    `values`: the values this read-back may speak, when the template knows them and the
    argument is not an enum (a product id said by its name); empty: any."""

    key: str
    render: Callable[[str], str] = str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SayTemplate:
    """A read-back of `tool`'s call: text pieces and `Spoken` arguments, in order. The
    first piece is text (the opening words that select the template). `fixed`: arguments
    the wording itself settles, as (key, value) pairs: "Two city inner tubes for Ana, shall
    I put them aside?" is the read-back of a quantity of 2, one template per count."""

    tool: str
    pieces: tuple[str | Spoken, ...]
    fixed: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not self.pieces or not isinstance(self.pieces[0], str) or not self.pieces[0].strip():
            raise ValueError(f"read-back of {self.tool!r} must open with fixed words")
        spoken = {p.key for p in self.pieces if isinstance(p, Spoken)}
        if spoken & {k for k, _ in self.fixed}:
            raise ValueError(f"read-back of {self.tool!r} both speaks and fixes an argument")

    def fits(self, arguments: Mapping[str, object]) -> bool:
        """True when this wording can read back a call with `arguments`: its fixed values
        are the call's, and each spoken argument with known `values` is one of them."""
        fixed = all(str(arguments.get(k)) == v for k, v in self.fixed)
        return fixed and all(
            str(arguments.get(p.key)) in p.values
            for p in self.pieces
            if isinstance(p, Spoken) and p.values
        )

    def render(self, arguments: dict[str, str]) -> str:
        """The read-back's text for `arguments` (what the data generator writes)."""
        return "".join(p if isinstance(p, str) else p.render(arguments[p.key]) for p in self.pieces)

    def pattern(
        self, options: Mapping[str, Sequence[str]], free: str = r".+?"
    ) -> tuple[str, dict[str, dict[str, str]]]:
        """A regex matching the read-back as spoken, one named group per argument, and
        for each argument its spoken forms (case-folded) → value. `options`: argument →
        its allowed values (an enum's; else the piece's own `values`), each spoken as the
        template says it; an argument with neither (a name) is `free` words and maps to
        nothing."""
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
            known = options.get(key, piece.values)
            said = {" ".join(piece.render(v).split()).casefold(): v for v in known}
            spoken[key] = said
            ways = sorted(said, key=len, reverse=True)
            body = "|".join(re.escape(w) for w in ways) if key in options or known else free
            parts.append(rf"(?P<{key}>{body})")
        return "".join(parts), spoken

    def read(self, text: str, options: Mapping[str, Sequence[str]]) -> dict[str, str] | None:
        """The arguments a spoken read-back `text` stands for (`render`'s inverse), or None
        when it is not this read-back whole (`pattern`; case and spacing aside); the
        `fixed` arguments included."""
        body, spoken = self.pattern(options)
        found = re.fullmatch(body, " ".join(text.split()), re.IGNORECASE)
        return None if found is None else {**heard_values(found, spoken), **dict(self.fixed)}

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
