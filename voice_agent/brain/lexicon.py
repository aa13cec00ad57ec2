"""Slot values and how callers say them, split into training and held-out parts.

Held-out values (some first and last names, order numbers starting with 8 or 9, some
product, service, day and time phrasings) never occur in the training split, so the
held-out dialogues measure generalization to unseen values, not memory.
"""

from __future__ import annotations

import random
from datetime import time

from tools.bike_shop.catalogue import PRODUCTS
from tools.bike_shop.schemas import ORDER_NUMBER_DIGITS
from tools.bike_shop.timewords import HOURS_PER_HALF_DAY, parse_slot
from voice_agent.brain.phrasing import Pool, Split, pool
from voice_agent.speech.say import number_words

FIRST_NAMES = pool(
    "maria|tom|sam|lena|ken|alice|ben|carla|dev|erin|farid|grace|hugo|ines|jonas|kim|marco|"
    "nina|omar|priya|quinn|rosa|sean|tara|umar|vera|will|yuki|zoe|adam|bella|chris|dana|eli|"
    "fiona|george|hana|ivan|julia|leo|mia|noah|olga|pete|ruth|steve|tina|victor|wendy|ali",
    "paige|felix|irene|oscar|celine|rahul|greta|malik|nora|theo|sofia|bruno",
)
LAST_NAMES = pool(
    "lopez|becker|okafor|fischer|adams|smith|jones|brown|garcia|miller|wilson|moore|taylor|"
    "nguyen|khan|patel|silva|rossi|novak|murphy|kelly|walsh|berg|park|chen|evans|hughes|"
    "wright|young|hall|baker|scott|green|king|lee|clark",
    "dubois|tanaka|kowalski|ahmed|larsen|moreno|weber|costa|byrne|ito",
)
FIRST_NAME_ONLY_CHANCE = 0.3

SERVICE_PHRASES: dict[str, Pool] = {
    "tune-up": pool("a tune-up|a tune up|a service|a full service|the bike serviced|"
                    "a general tune-up|a yearly service", "an annual tune-up|a check-over",
                    mixed=True),
    "flat repair": pool("a flat repair|a flat fixed|a puncture fixed|a puncture repair|"
                        "a flat tire fixed|my flat tyre fixed", "a flat sorted|my puncture mended",
                        mixed=True),
    "brake check": pool("a brake check|my brakes checked|the brakes looked at|"
                        "a brake inspection|my brakes seen to", "a check on my brakes", mixed=True),
    "chain replacement": pool("a chain replacement|a new chain fitted|my chain replaced|"
                              "the chain swapped", "the chain changed", mixed=True),
    "wheel true": pool("a wheel true|my wheel trued|a buckled wheel fixed|"
                       "my wheel straightened", "a wobbly wheel fixed", mixed=True),
    "gear adjustment": pool("a gear adjustment|my gears adjusted|the gears tuned|"
                            "my shifting fixed", "the gears looked at", mixed=True),
    "e-bike check": pool("an e-bike check|an ebike check|my electric bike checked|"
                         "the e-bike looked at", "an e-bike inspection", mixed=True),
}  # fmt: skip

DAY_FORMS: dict[str, Pool] = {
    "today": pool("today|later today|today if possible", "this afternoon sometime", mixed=True),
    "tomorrow": pool("tomorrow|tomorrow please|sometime tomorrow", "for tomorrow", mixed=True),
}
WEEKDAY_FORMS = pool("{d}|on {d}|this {d}|{d} please", "this coming {d}|for {d}", mixed=True)
NEXT_WEEKDAY_FORMS = pool("next {d}|on next {d}")
NEXT_WEEK_FORMS = pool("{d} next week|on {d} next week|{d} of next week|next week on {d}")
"""Forms of the held-out "friday next week" values (never "next friday": on a Monday that
is this week's Friday, `timewords.resolve_day`)."""


def day_form(rng: random.Random, split: Split, day: str) -> str:
    """How a caller says a `schemas.Day` value."""
    if day in DAY_FORMS:
        return DAY_FORMS[day].pick(rng, split)
    if day.endswith(" next week"):
        return NEXT_WEEK_FORMS.pick(rng, split).replace("{d}", day.removesuffix(" next week"))
    if day.startswith("next "):
        return NEXT_WEEKDAY_FORMS.pick(rng, split).replace("{d}", day.removeprefix("next "))
    return WEEKDAY_FORMS.pick(rng, split).replace("{d}", day)


HOUR_FORMS = pool(
    "{h}|{h} o'clock|{w} o'clock|{h}{m}|{h} {mm}|{h}:00|at {h}|around {w}",
    "{w} sharp|{h} {long}",
    mixed=True,
)
HALF_FORMS = pool(
    "half past {w}|{h}:30|{h}.30|{w} thirty|{h}:30 {mm}|half past {h}",
    "half {w}|{h}.30{m}",
    mixed=True,
)
NOON_FORMS = pool("noon|midday|12|twelve o'clock", "12 noon", mixed=True)
LONG_MERIDIEM = {"am": "in the morning", "pm": "in the afternoon"}
VAGUE_TIMES = pool(
    "in the morning|sometime in the afternoon|whenever you have space|anytime|morning if possible",
    "late afternoon maybe|after lunch",
    mixed=True,
)


def time_form(rng: random.Random, split: Split, slot: str) -> str:
    """How a caller (as the ASR writes it) says a "HH:MM" slot time."""
    t: time = parse_slot(slot)
    h12 = (t.hour - 1) % HOURS_PER_HALF_DAY + 1
    meridiem = "pm" if t.hour >= HOURS_PER_HALF_DAY else "am"
    dotted = f"{meridiem[0]}.{meridiem[1]}."
    values = {"{h}": str(h12), "{w}": number_words(h12), "{m}": meridiem, "{mm}": dotted,
              "{long}": LONG_MERIDIEM[meridiem]}  # fmt: skip
    if t.hour == HOURS_PER_HALF_DAY and t.minute == 0:
        return NOON_FORMS.pick(rng, split)
    form = (HALF_FORMS if t.minute else HOUR_FORMS).pick(rng, split)
    for key, value in values.items():
        form = form.replace(key, value)
    return form


ORDER_FIRST_DIGITS = {Split.TRAIN: "1234567", Split.HELDOUT: "89"}
"""Order numbers in the held-out split start with 8 or 9; training ones never do."""
DIGITS = "0123456789"


def order_number(rng: random.Random, split: Split) -> str:
    length = rng.randint(*ORDER_NUMBER_DIGITS)
    first = rng.choice(ORDER_FIRST_DIGITS[split])
    return first + "".join(rng.choice(DIGITS) for _ in range(length - 1))


ORDER_FORMS = pool("{plain}|{spaced}|{dashed}|{grouped}", "{commas}|{pairs}", mixed=True)
THOUSANDS = 3


def order_form(rng: random.Random, split: Split, number: str) -> str:
    """An order number as Whisper writes it when read out digit by digit or in groups."""
    forms = {
        "{plain}": number,
        "{spaced}": " ".join(number),
        "{dashed}": "-".join(number),
        "{grouped}": f"{number[:-THOUSANDS]} {number[-THOUSANDS:]}",
        "{commas}": ", ".join(number),
        "{pairs}": " ".join(number[i : i + 2] for i in range(0, len(number), 2)),
    }
    return forms[ORDER_FORMS.pick(rng, split)]


QUANTITY_FORMS = {1: pool("one|just one|a single one", "only one", mixed=True),
                  2: pool("two|2|a couple|two of them", "2 of them", mixed=True),
                  3: pool("three|3|three of them", "3 please", mixed=True)}  # fmt: skip

PRODUCT_PHRASES: dict[str, Pool] = {
    "101": pool("inner tubes|a city inner tube|an inner tube|"
                "a spare tube|a replacement inner tube|road tubes", "a 700c tube"),
    "102": pool("mtb tubes|mountain bike inner tubes|"
                "a tube for my mountain bike|an mtb inner tube", "a 29 inch tube"),
    "103": pool("a kids inner tube|small inner tubes|"
                "a 20 inch tube|children's bike tubes", "a tube for a child's bike"),
    "104": pool("a puncture repair kit|patch kits|"
                "puncture patches|a repair kit for flats|tyre patches", "a patch kit"),
    "105": pool("road tyres|a road tire|slick tyres|"
                "racing tyres|a new front tyre|road bike tyres", "road tires"),
    "106": pool("mountain bike tyres|knobbly tires|"
                "off road tyres|mtb tires|gravel tyres", "trail tyres"),
    "107": pool("winter tyres|studded tires|tyres for ice|spiked tyres", "snow tyres"),
    "108": pool("a front light|headlights|a usb front light|"
                "a bright bike light|a front lamp|a handlebar light", "a headlight"),
    "109": pool("rear lights|a tail light|a back light|a rear lamp|taillights", "a red rear light"),
    "110": pool("a light set|front and rear lights|"
                "a set of bike lights|lights for both ends", "a pair of lights"),
    "111": pool("a d lock|u-locks|a heavy lock|a strong bike lock|a u lock", "a shackle lock"),
    "112": pool("cable locks|a combination lock|a coil lock|a lightweight lock", "a cable lock"),
    "113": pool("a road helmet|road helmets|"
                "a racing helmet|a lightweight helmet", "a helmet for road riding"),
    "114": pool("a kids helmet|child helmets|"
                "a helmet for my son|a toddler helmet|a youth helmet", "a small helmet"),
    "115": pool("a city helmet|commuter helmets|"
                "an urban helmet|a helmet for commuting", "a commuter helmet"),
    "116": pool("brake pads|disc brake pads|"
                "new brake pads|brake blocks|pads for my brakes", "rim brake pads"),
    "117": pool("a bike chain|an 11 speed chain|"
                "a replacement chain|a 10 speed chain|chains", "a new chain"),
    "118": pool("chain lube|chain oil|wet lube|dry lube|bike oil|chain grease", "bike lubricant"),
    "119": pool("a floor pump|a track pump|a hand pump|a mini pump|a tyre pump", "a pump"),
    "120": pool("a multi tool|allen keys|a bike tool|a tool kit|a multitool", "a hex key set"),
}  # fmt: skip
assert set(PRODUCT_PHRASES) == {p.product_id for p in PRODUCTS}
UNSTOCKED_THINGS = pool("skateboards|a bike bell|saddles|water bottles|kickstands|scooters|"
                        "panniers|a bike rack|gloves|cycling shorts|a mirror|bar tape|pedals|"
                        "a bottle cage|a saddle bag|a bike computer|grips|a cassette|spokes|"
                        "a rain jacket|sunglasses|a trailer|a basket|cleats|a horn",
                        "mudguards|a phone mount")  # fmt: skip
"""Things a caller asks for that the catalogue lacks (a search finds nothing)."""
MISSING_ITEM_IDS = pool("135|150|142|199|121", "188|176")
"""Item numbers a caller reads off an old flyer that the catalogue lacks."""


def person_name(rng: random.Random, split: Split) -> str:
    """A caller's name, lower case: "first last", or the first name alone."""
    first = FIRST_NAMES.pick(rng, split)
    if rng.random() < FIRST_NAME_ONLY_CHANCE:
        return first
    return f"{first} {LAST_NAMES.pick(rng, split)}"
