"""Which phrases of a caller's lines are a person's name: the choices of a name slot.

A small model has seen a few dozen names in training and ranks a name it has never seen
below "the" or "a" (measured: the gold name was in the model's top three for 1 of 30
held-out calls). So a `person_name` text slot does not let the model pick among every
phrase of the prompt; it offers the phrases that look like a name, best evidence first:

1. a run of name words right after a cue ("my name is", "it's", "this is", "under", ...)
   or before "here"/"speaking";
2. else a run standing alone in its phrase ("Rahul Costa." or "rahul costa, thanks");
3. else any run of name words;
4. else (a name that is also a common word: "tom brown", "grace park") the one or two
   words after a strong cue ("my name is", "under", "call me"), never a function word.

Within a tier, the latest line that has any gives the choices (a correction wins). A name
word is one that no English dictionary lists in lower case ("rahul", "dubois"; the list
is voice_agent/grounding/lexicon/common_words.txt.gz, see scripts/make_common_words.py),
or one written with a capital inside a sentence (Whisper writes "It's Tom Brown"), and is
not a filler, a number or a word of the grammar's closed sets. None when nothing looks like a name:
the slot then chooses among all phrases as before.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from voice_agent.grounding.said import PHRASE_END

COMMON_WORDS_PATH = Path(__file__).resolve().parent / "lexicon" / "common_words.txt.gz"
MAX_NAME_WORDS = 3
NOT_NAMES = frozenset((
    "um", "umm", "uh", "uhm", "er", "erm", "hmm", "hm", "mm", "mhm", "ah", "oh", "hiya", "ya",
    "yeah", "yep", "yup", "nope", "nah", "ta", "mm-hmm", "uh-huh", "ok", "okay", "hey", "hi",
    "am", "pm",
    "mr", "mrs", "ms", "miss", "mx", "dr", "mister", "missus",
))  # fmt: skip
"""Sounds, greetings, time marks and titles ("Mrs Gloria Fontaine" is booked as Gloria
Fontaine) a dictionary may not list in lower case."""
COURTESY = frozenset((
    "merci", "beaucoup", "revoir", "bonjour", "bonsoir", "salut", "gracias", "hola", "adios",
    "adiós", "hasta", "luego", "danke", "schön", "tschüss", "tschuss", "wiedersehen", "grazie",
    "ciao", "tchau", "prego", "obrigado", "obrigada", "dziekuje", "dziękuję", "dzieki", "dzięki",
    "spasibo", "arigato", "arigatou", "shukran", "kiitos", "namaste", "cheerio", "adieu",
))  # fmt: skip
"""Thanks and goodbyes of other languages, which callers mix into English ("yes, merci";
"dziekuje, bye") and no English dictionary lists: never a name."""
CUE_NOISE = (NOT_NAMES - {"am", "pm"}) | {"so", "like", "well", "actually", "just", "yes",
                                          "please"}  # fmt: skip
"""Words a caller drops between a cue and the name ("name, um, so, is Sofia")."""
CUE_NOISE_PHRASE = re.compile(r"\bi mean\b|\byou know\b", re.IGNORECASE)
"""Phrases dropped the same way ("it'll, I mean, be Sofia")."""
FUNCTION_WORDS = frozenset((
    "my", "your", "his", "her", "our", "their", "the", "a", "an", "this", "that", "it", "me",
    "him", "them", "us", "you", "for", "to", "of", "in", "on", "at", "and", "or", "is", "be",
))  # fmt: skip
"""Never a name, even after a strong cue ("put it under my name")."""
CONTRACTION = re.compile(r"['’](?:s|ll|re|ve|d|m|t)$")
NAME_WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")
SENTENCE_BREAK = re.compile(r"[.!?]")
CUE_BEFORE = re.compile(
    r"(?:\bname(?:'s| is)?|\bthis is|\bit(?:'s|s| is)|\bit'll be|\bi(?:'m| am)|\bcall me|"
    r"\bunder|\bfor|\bput)\s*$",
    re.IGNORECASE,
)
"""Text that ends just before a name."""
STRONG_CUE = re.compile(r"\b(?:name(?:'s| is)?|call me|under)\s+", re.IGNORECASE)
"""A cue strong enough to take even common words after it as the name."""
ANSWER_WORDS = frozenset((
    "yes", "no", "sure", "right", "fine", "great", "thanks", "cheers", "hello", "sorry",
    "well", "so", "please", "perfect", "lovely", "good", "morning", "afternoon", "evening",
))  # fmt: skip
"""Common words that open an answer and never a first name before a surname."""
CUE_AFTER = re.compile(r"^\s*(?:here|speaking)\b", re.IGNORECASE)
LEADING_CUE = re.compile(
    r"^\s*(?:(?:my )?name(?:'s| is)|it(?:'s| is)|this is|i(?:'m| am)|call me)\s+", re.IGNORECASE
)
"""A cue that opens a short answer ("it's rachel green")."""
SHORT_ANSWER_WORDS = 5
"""A line of at most this many words that is only a name may have common words in it."""


@cache
def common_words() -> frozenset[str]:
    """The shipped list of lower-case dictionary words."""
    try:
        data = gzip.decompress(COMMON_WORDS_PATH.read_bytes()).decode()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise RuntimeError(
            f"cannot read the common-word list {COMMON_WORDS_PATH}: {exc} "
            "(rebuild it: python scripts/make_common_words.py)"
        ) from exc
    return frozenset(data.split())


def name_phrases(lines: Iterable[str], closed: frozenset[str] | set[str]) -> list[str] | None:
    """The phrases of `lines` (the caller's, oldest first) that may be the caller's name,
    from the best tier's latest line that has any (each as the longer name said earlier
    that has all its words, if any); None when no line has one. `closed`:
    lower-case words that are never part of a name (numbers, days, services)."""
    latest_first = list(lines)[::-1]
    runs = [_runs(line, closed) for line in latest_first]
    for least in (CUED, ALONE, 0):
        for i, line_runs in enumerate(runs):
            found = _unique(text for text, evidence in line_runs if evidence >= least)
            if found:
                earlier = [text for r in runs[i + 1 :] for text, evidence in r if evidence]
                return _unique(_fuller(name, earlier) for name in found)
    for line in latest_first:
        found = _unique(_after_strong_cue(line, closed))
        if found:
            return found
    return None


def _fuller(name: str, earlier: list[str]) -> str:
    """`name`, or a longer name said earlier that has all its words: a caller who spells
    out the surname ("no, Aziz, A Z I Z") still has the first name said before."""
    words = name.lower().split()
    for other in earlier:
        theirs = other.lower().split()
        if len(theirs) > len(words) and all(w in theirs for w in words):
            return other
    return name


CUED, ALONE = 2, 1
"""How strongly a run's context marks it as a name (0: not at all)."""


def _runs(line: str, closed: frozenset[str] | set[str]) -> list[tuple[str, int]]:
    """Runs of name words in `line` (at most `MAX_NAME_WORDS`), each with how strongly
    its context marks it as a name: `CUED`, `ALONE` in its phrase, or 0."""
    out = []
    short = len(NAME_WORD.findall(line)) <= SHORT_ANSWER_WORDS
    for part in _parts(line):
        whole = _only_a_name(line, part, closed) if short else None
        if whole is not None:
            out.append(whole)
            continue
        words = list(NAME_WORD.finditer(line, *part))
        run: list[re.Match[str]] = []
        for word in [*words, None]:
            if word is not None and _name_word(word, line, closed):
                run.append(word)
                continue
            if run and len(run) <= MAX_NAME_WORDS:
                start, end = run[0].start(), run[-1].end()
                said = NAME_WORD.findall(CUE_NOISE_PHRASE.sub(" ", line[:start]))
                before = " ".join(w for w in said if w.lower() not in CUE_NOISE)
                if CUE_BEFORE.search(before) or CUE_AFTER.match(line[end : part[1]]):
                    out.append((line[start:end], CUED))
                else:
                    out.append((line[start:end], ALONE if len(run) == len(words) else 0))
            run = []
    return out


_NEVER_IN_A_SHORT_NAME = ANSWER_WORDS | FUNCTION_WORDS | NOT_NAMES | COURTESY | CUE_NOISE | {
    "here", "speaking", "bye", "goodbye", "mate", "then"}  # fmt: skip
"""Common words that are no part of a name in a short line that is only one."""


def _only_a_name(
    line: str, part: tuple[int, int], closed: frozenset[str] | set[str]
) -> tuple[str, int] | None:
    """A phrase of a short line that is only a name, after a cue or alone, of two or three
    words of which some are names and the others common words that could be names too
    ("grace kim", "it's rachel green", "maria gonzalez": train calls cancelled for "kim"
    and booked "rachel"); None for any other phrase, which `_runs` reads word by word."""
    start, end = part
    cue = LEADING_CUE.match(line, start, end)
    if cue is not None:
        start = cue.end()
    words = list(NAME_WORD.finditer(line, start, end))
    if not 2 <= len(words) <= MAX_NAME_WORDS or line[words[-1].end() : end].strip():
        return None
    if line[start : words[0].start()].strip():
        return None
    named = [_name_word(w, line, closed) for w in words]
    if all(named) or not any(named):
        return None  # read word by word: a name alone, or no name at all
    for word, is_name in zip(words, named, strict=True):
        lower = word.group().lower()
        if not is_name and (lower in _NEVER_IN_A_SHORT_NAME or lower in closed
                            or CONTRACTION.search(lower)):  # fmt: skip
            return None
    return line[words[0].start() : words[-1].end()], CUED if cue is not None else ALONE


def _name_word(word: re.Match[str], line: str, closed: frozenset[str] | set[str]) -> bool:
    text = word.group()
    lower = text.lower()
    stem = CONTRACTION.sub("", lower)  # "it'll" is "it", "o'brien" stays whole
    parts = [p for p in re.split(r"['’-]", stem) if len(p) > 1]
    if not parts or lower in NOT_NAMES | COURTESY or lower in closed:
        return False
    if any(p in closed or (p.endswith("s") and p[:-1] in closed) for p in parts):
        return False  # "Wednesdays" is no name either
    if not all(p in common_words() for p in parts):
        return True  # "dubois", "o'brien"; not "it's" ("it" is a word, "s" too short)
    before = line[: word.start()].rstrip()
    starts_sentence = not before or SENTENCE_BREAK.fullmatch(before[-1]) is not None
    if not text[0].isupper() or lower == "i":
        return False
    return not starts_sentence or _before_surname(word, line, closed)


def _before_surname(word: re.Match[str], line: str, closed: frozenset[str] | set[str]) -> bool:
    """A capitalised word that is also a common one ("Precious", "Grace", "Will") opening
    a sentence is a first name when a capitalised word that is no common word follows it
    directly ("Precious Ndlovu") and ends its phrase (or "here" does: "Will Jones here";
    not "Book Ndlovu in")."""
    spaced = line[word.end() : word.end() + 1] == " "
    after = NAME_WORD.match(line, word.end() + 1) if spaced else None
    if after is None or not after.group()[0].isupper():
        return False
    first = word.group()
    if first.lower() in ANSWER_WORDS | FUNCTION_WORDS or CUE_BEFORE.search(first) or "'" in first:
        return False  # "Yes Ndlovu", "It's Sofia", "I'm Sofia": the cue is no first name
    end = PHRASE_END.search(line, after.end())
    rest = line[after.end() : end.start() if end else len(line)]
    if rest.strip() and not CUE_AFTER.match(rest):
        return False
    lower = after.group().lower()
    parts = [p for p in re.split(r"['’-]", lower) if len(p) > 1]
    stop = closed | NOT_NAMES | COURTESY
    return bool(parts) and lower not in stop and not all(p in common_words() for p in parts)


def _after_strong_cue(line: str, closed: frozenset[str] | set[str]) -> list[str]:
    """The one and two words after each strong cue in `line`, within its part ("it's"
    and "this is" are not strong: "it's fine", "this is great")."""
    out = []
    for cue in STRONG_CUE.finditer(line):
        end = PHRASE_END.search(line, cue.end())
        words = NAME_WORD.findall(line, cue.end(), end.start() if end else len(line))
        for n in (1, 2):
            chosen = words[:n]
            stop = closed | NOT_NAMES | COURTESY | FUNCTION_WORDS
            if len(chosen) == n and not any(w.lower() in stop for w in chosen):
                out.append(" ".join(chosen))
    return out


def _parts(line: str) -> list[tuple[int, int]]:
    """(start, end) of the stretches of `line` between punctuation marks."""
    out, start = [], 0
    for mark in PHRASE_END.finditer(line):
        out.append((start, mark.start()))
        start = mark.end()
    return [*out, (start, len(line))]


def _unique(texts: Iterable[str]) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for text in texts:
        if text.lower() not in seen:
            seen.add(text.lower())
            out.append(text)
    return out
