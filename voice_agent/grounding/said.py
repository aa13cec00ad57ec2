"""Numbers the caller means: how many, and which of a tool result's labelled numbers.

Narrowings of a grounded slot's choices, each "the latest caller line that says any
wins" (a caller's correction counts):

* `counts_said`: a quantity said in words or digits ("a couple of the d lock", "two of
  them", "just the one", "3 please"); a bare "a" is not a count, nor is "a pair of"
  (often one product: a pair of brake pads).
* `labelled_said`: a tool result lists numbers with labels ("[107 winter tyre; 105 road
  tyre]"); the numbers whose label the caller names ("one of the winter tyre").
* `asked_for`: what the caller asks for ("any chance you stock a tube for a child's bike
  please" → "a tube for a child's bike"): the words left when the words of asking,
  greeting and politeness are taken out, with their article.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

COUNT_WORDS = {
    "one": 1, "single": 1, "two": 2, "couple": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9,
}  # fmt: skip
NUMBER_WORD = (
    r"(?:zero|oh|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\w+teen|"
    r"twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|half|quarter)"
)
COUNT = re.compile(
    r"(?<![\d:.,£$€])(?<!\d )\b(?:(?P<digit>[1-9])|(?P<word>" + "|".join(COUNT_WORDS) + r"))\b"
    r"(?!\d|[:.,]\d| \d|[ -]" + NUMBER_WORD + r"\b"
    r"| ?(?:am|pm|a\.m|p\.m|o'clock|minutes?|mins?|hours?|days?|weeks?|pounds?|quid|dollars?"
    r"|bucks|euros?|sec|second|moment|more|thing|question|word)\b)",
    re.IGNORECASE,
)
"""A count: a lone digit or number word, not part of a longer number (digits or words:
"two twenty", "four one seven two"), not a time, a price or a length of time ("5 minutes",
"£5"), not "one moment" or "one more question"."""
NOT_BEFORE_COUNT = re.compile(
    r"(?:\b(?:at|past|to|around|about|till|until|by|no)|" + NUMBER_WORD + r"|[£$€])[ -]?$",
    re.IGNORECASE,
)
"""Text just before a number that is not a count: a time ("at 2", "half past one"), "no
one", or another number word."""
FRAME_WORDS = frozenset((
    "that's", "it'll", "what's", "i've", "we're", "a", "an", "the", "some", "any", "this",
    "that", "these", "those", "my", "your", "our", "their", "i", "i'm", "i'd", "i'll", "me",
    "we", "you", "you're", "it", "it's", "is", "are", "was", "be", "been", "do", "does", "did",
    "have", "has", "had", "got", "get", "stock", "stocks", "sell", "sells", "carry", "carries",
    "need", "want", "wanted", "looking", "look", "find", "buy", "after", "chance", "there",
    "there's", "something", "anything", "possible", "if", "can", "could", "would", "will",
    "please", "thanks", "thank", "cheers", "ta", "hi", "hiya", "hello", "hey", "morning",
    "afternoon", "evening", "good", "okay", "ok", "so", "um", "umm", "uh", "er", "erm", "hmm",
    "hm", "mm", "well", "like", "yes", "yeah", "yep", "just", "to", "of", "for", "in", "on",
    "at", "and", "or", "but", "what", "which", "how", "much", "many", "by", "with", "about",
    "wondering", "wonder", "sorry", "right", "sure", "also", "too", "mean", "know", "maybe",
    "perhaps", "still", "again", "now",
))  # fmt: skip
"""Words of asking, greeting, politeness and grammar: never what is asked for."""
ASKING = frozenset((
    "have", "stock", "stocks", "sell", "sells", "carry", "carries", "need", "want",
    "wanted", "looking", "find", "buy", "after",
))  # fmt: skip
"""Frame words that ask for the thing after them ("do you have", "I'm after")."""
ARTICLES = frozenset({"a", "an", "some"})
CONNECTORS = frozenset({"for", "of", "with"})
"""Words that join two parts of one thing ("a tube for a child's bike")."""
WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
"""A word with its inner hyphens and apostrophes ("won't", "it'll", "o'brien"): a phrase
never starts or ends inside one, so "t" or "ll" is never copied as a name."""
PHRASE_END = re.compile(r"[.,!?;:]")
SENTENCE_END = re.compile(r"[.!?;]")
"""Punctuation that ends a phrase: no name or thing asked for runs across it."""
LABELLED = re.compile(r"\[([^\[\]<]*)\]")
LABEL = re.compile(r"^\s*(\d+)\s+(.+?)\s*$")


def counts_said(lines: Iterable[str], most: int) -> list[int] | None:
    """The counts from 1 to `most` that the latest caller line saying any says."""
    for line in reversed(list(lines)):
        found = []
        for m in COUNT.finditer(line):
            if NOT_BEFORE_COUNT.search(line, 0, m.start()):
                continue
            n = int(m["digit"]) if m["digit"] else COUNT_WORDS[m["word"].lower()]
            if 1 <= n <= most and n not in found:
                found.append(n)
        if found:
            return found
    return None


def asked_for(lines: Iterable[str]) -> list[str] | None:
    """What the latest caller line that asks for anything asks for, in order: the things
    right after a word of asking ("do you have kids helmets? my little one's just learned
    to ride" asks for kids helmets, not a ride) when any are, else all its things."""
    for line in reversed(list(lines)):
        found: list[str] = []
        asked: list[str] = []
        for sentence in SENTENCE_END.split(line):
            asking = False  # a word of asking said earlier in the sentence
            for part in PHRASE_END.split(sentence):
                words = WORD.findall(part)
                at = 0
                for thing, (a, b) in zip(*_things(words), strict=True):
                    asking |= any(w.lower() in ASKING for w in words[at:a])
                    found.append(thing)
                    if asking:
                        asked.append(thing)
                    at = b
                asking |= any(w.lower() in ASKING for w in words[at:])
        if found:
            return list(dict.fromkeys(asked or found))
    return None


def _things(words: list[str]) -> tuple[list[str], list[tuple[int, int]]]:
    """Runs of words that are not frame words, each with the article before it, joined
    across a connector ("for", "of", "with" and maybe an article); and their spans."""
    spans: list[tuple[int, int]] = []
    start: int | None = None
    for j, word in enumerate([*words, None]):
        content = word is not None and word.lower() not in FRAME_WORDS
        if content and start is None:
            start = j - 1 if j > 0 and words[j - 1].lower() in ARTICLES else j
        elif not content and start is not None:
            spans.append((start, j))
            start = None
    merged: list[tuple[int, int]] = []
    for a, b in spans:
        gap = [w.lower() for w in words[merged[-1][1] : a]] if merged else []
        if gap and gap[0] in CONNECTORS and set(gap) <= CONNECTORS | ARTICLES:
            merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    return [" ".join(words[a:b]) for a, b in merged], merged


def labels(results: Iterable[str]) -> dict[str, str]:
    """Number → label over tool results' bracketed lists ("[107 winter tyre; ...]"); a
    later result's label wins."""
    out: dict[str, str] = {}
    for text in results:
        for group in LABELLED.findall(text):
            for item in group.split(";"):
                m = LABEL.match(item)
                if m:
                    out[m[1]] = m[2].lower()
    return out


def labelled_said(lines: Iterable[str], labelled: dict[str, str]) -> list[str] | None:
    """The numbers whose label the latest caller line naming any names: whole, or else by a
    word of it that no other label here has ("the city ones" among the city and the kids
    bike inner tube), the first so named ("the set with the front and back" is the light
    set, not the front light: what follows describes it)."""
    patterns = {n: said_as_words(label, plural=True) for n, label in labelled.items()}
    words = {n: set(WORD.findall(label.lower())) for n, label in labelled.items()}
    own = {
        n: [said_as_words(w, plural=True) for w in sorted(ws) if len(w) > 2 and not any(
            w in other for m, other in words.items() if m != n)]
        for n, ws in words.items()
    }  # fmt: skip
    for line in reversed(list(lines)):
        named = [n for n, p in patterns.items() if p.search(line)]
        if not named:
            first = {n: min(m.start() for p in ps for m in p.finditer(line))
                     for n, ps in own.items() if any(p.search(line) for p in ps)}  # fmt: skip
            named = sorted(first, key=first.__getitem__)[:1]
        if named:
            return named
    return None


def said_as_words(value: str, plural: bool = False) -> re.Pattern[str]:
    """`value` as whole words, case-insensitive, its words joined by a hyphen, spaces or
    nothing ("tune-up" matches "Tune up", "tuneup" and "TUNE-UP"); with `plural`, its
    last word may end in "s" or "es" ("winter tyres")."""
    words = [re.escape(w) for w in re.split(r"[-\s]+", value.strip()) if w]
    end = r"(?:e?s)?\b" if plural else r"\b"
    return re.compile(r"\b" + r"[-\s]*".join(words) + end, re.IGNORECASE)
