"""Numbers, times, prices and dates as a person says them on the phone, in English. Pure
functions, shared by the sentence normalizer (`speech.sentences.speakable`), tool packs'
result lines and the brain's training data.

Replies go to a speech synthesizer and must be unambiguous by ear: "half past two", not
"14:30"; "twelve dollars fifty", not "$12.50"; an order number digit by digit.
"""

from __future__ import annotations

from datetime import date, time

CENTS_PER_DOLLAR = 100
HOURS_PER_HALF_DAY = 12
MAX_SPOKEN = 999_999
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
"""Index = `date.weekday()`."""

_ONES = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen",
)  # fmt: skip
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_ORDINALS = {
    1: "first", 2: "second", 3: "third", 5: "fifth", 8: "eighth", 9: "ninth", 12: "twelfth",
}  # fmt: skip


def number_words(n: int) -> str:
    """0 ≤ n ≤ 999,999 in words: 1299 → "one thousand two hundred ninety-nine".
    Raises ValueError outside that range."""
    if not 0 <= n <= MAX_SPOKEN:
        raise ValueError(f"cannot say {n}")
    if n < len(_ONES):
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return f"{_ONES[hundreds]} hundred" + (f" {number_words(rest)}" if rest else "")
    thousands, rest = divmod(n, 1000)
    return f"{number_words(thousands)} thousand" + (f" {number_words(rest)}" if rest else "")


def ordinal_words(n: int) -> str:
    """1 → "first", 21 → "twenty-first", 30 → "thirtieth" (1 ≤ n < 100)."""
    tens, ones = divmod(n, 10)
    if ones == 0 and n >= len(_ONES):
        return _TENS[tens][:-1] + "ieth"
    if n < len(_ONES):
        return _ORDINALS.get(n, number_words(n) + "th")
    return f"{_TENS[tens]}-{ordinal_words(ones)}"


def say_digits(digits: str) -> str:
    """ "40213" → "four zero two one three" (order numbers, references)."""
    return " ".join(_ONES[int(d)] for d in digits)


def say_price(cents: int) -> str:
    """1250 → "twelve dollars fifty"; 1200 → "twelve dollars"; 100 → "one dollar";
    99 → "ninety-nine cents"."""
    dollars, rest = divmod(cents, CENTS_PER_DOLLAR)
    if dollars == 0:
        return f"{number_words(rest)} cent" + ("" if rest == 1 else "s")
    unit = "dollar" if dollars == 1 else "dollars"
    return f"{number_words(dollars)} {unit}" + (f" {number_words(rest)}" if rest else "")


def say_time(t: time) -> str:
    """14:30 → "half past two"; 14:00 → "two o'clock"; 12:00 → "noon";
    14:15 → "quarter past two"; 14:45 → "quarter to three"; 14:20 → "two twenty";
    14:05 → "two oh five". Shop hours make am/pm clear, so it is not said."""
    if t.hour == HOURS_PER_HALF_DAY and t.minute == 0:
        return "noon"
    hour = number_words((t.hour - 1) % HOURS_PER_HALF_DAY + 1)
    next_hour = number_words(t.hour % HOURS_PER_HALF_DAY + 1)
    match t.minute:
        case 0:
            return f"{hour} o'clock"
        case 15:
            return f"quarter past {hour}"
        case 30:
            return f"half past {hour}"
        case 45:
            return f"quarter to {next_hour}"
        case minute if minute < 10:
            return f"{hour} oh {number_words(minute)}"
        case minute:
            return f"{hour} {number_words(minute)}"


def say_hour_span(opens: time, closes: time) -> str:
    """(09:00, 18:00) → "from nine to six"; half hours are said in full."""

    def short(t: time) -> str:
        return say_time(t).removesuffix(" o'clock")

    return f"from {short(opens)} to {short(closes)}"


RELATIVE_DAYS = {-1: "yesterday", 0: "today", 1: "tomorrow"}


def say_day(day: date, today: date) -> str:
    """ "today", "tomorrow", "yesterday", a weekday within the coming week, else
    "monday the twenty-first"."""
    ahead = (day - today).days
    weekday = WEEKDAYS[day.weekday()]
    if ahead in RELATIVE_DAYS:
        return RELATIVE_DAYS[ahead]
    if 1 < ahead < len(WEEKDAYS):
        return weekday
    return f"{weekday} the {ordinal_words(day.day)}"


def say_on_day(day: date, today: date) -> str:
    """`say_day` as an adverbial: "tomorrow", "on friday"."""
    spoken = say_day(day, today)
    return spoken if spoken in RELATIVE_DAYS.values() else f"on {spoken}"


def say_count(count: int, thing: str) -> str:
    """(1, "front light") → "a front light"; (2, "front light") → "two front lights";
    names already plural ("brake pads") stay as they are."""
    if count == 1:
        return f"{'an' if thing[:1] in 'aeiou' else 'a'} {thing}"
    return f"{number_words(count)} {thing if thing.endswith('s') else thing + 's'}"


def say_list(items: list[str], conjunction: str = "and") -> str:
    """["a", "b", "c"] → "a, b and c"; one item alone; none → ""."""
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} {conjunction} {items[-1]}"
