"""Workshop dialogues: booking a service (slot filling, availability, read-back,
corrections, refusals) and cancelling a booking.

Agent rules the model must learn from the history alone: ask for one missing detail at a
time (service, day, then name); with a day but no time, check availability; read the
booking back and book only right after the caller's yes; after a refusal, say it and let
the caller choose again.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import get_args

from tools.bike_shop.catalogue import WEEKDAYS
from tools.bike_shop.results import Availability, Booking, Cancellation, ToolError, ToolErrorKind
from tools.bike_shop.schemas import Service, SlotTime
from tools.bike_shop.timewords import parse_slot
from voice_agent.brain import callers, lexicon, lines
from voice_agent.brain.dialogues import Intent, Sim, Thought
from voice_agent.brain.phrasing import Split
from voice_agent.dialogue.phrases import phrases

SERVICES: tuple[str, ...] = get_args(Service)
SLOT_TIMES: tuple[str, ...] = get_args(SlotTime)
DAYS_IN_VIEW = 7
"""Days ahead a caller can name with a day word (today, tomorrow, a weekday)."""
OFFERED_TIMES_SPOKEN = 3
TWISTS = ("none", "none", "none", "full", "taken", "closed", "bad_time", "past",
          "change_time", "change_day", "fix_name", "hangup")  # fmt: skip
MIN_HOUR_FOR_PAST = 11
NEXT_WEEK_SHARE = 1 / 3
"""Of the held-out split's "next ..." days, the share said as "friday next week"."""

CHECK = Thought("check free times", "No time yet, so check which times are free that day.")
OFFER = Thought("offer the times", "Read out the free times and let the caller pick one.")
READ_BACK = Thought("read it back", "Every detail is known; read the booking back first.")
BOOK = Thought("book it", "The caller said yes to the read-back, so make the booking.")
BOOKED = Thought("booked, tell them", "The booking is made; give the details and offer more help.")
LEAVING = Thought("they're leaving", "The caller is hanging up; end the call.")
CANCEL_READ_BACK = Thought("read it back", "Name and day known; confirm before cancelling.")
CANCEL = Thought("cancel it", "The caller confirmed; cancel the booking.")
REFUSED = Thought("say the problem", "The shop refused; say why and let the caller choose again.")


def day_word(s: Sim, days_ahead: int) -> str | None:
    """The day word for a date `days_ahead` of today, or None beyond a week."""
    if days_ahead == 0:
        return "today"
    if days_ahead == 1:
        return "tomorrow"
    if 1 < days_ahead < DAYS_IN_VIEW:
        return WEEKDAYS[(s.today + timedelta(days=days_ahead)).weekday()]
    return None


def pick_day(s: Sim) -> str:
    """A day a caller asks for. "friday next week" is a held-out value: only the held-out
    split draws it (so the training split's random stream is what it always was)."""
    roll = s.rng.random()
    weekday = s.rng.choice(WEEKDAYS)
    if roll < 0.1:
        return "today"
    if roll < 0.35:
        return "tomorrow"
    if roll < 0.8:
        return weekday
    if s.split is Split.HELDOUT and s.rng.random() < NEXT_WEEK_SHARE:
        return f"{weekday} next week"
    return f"next {weekday}"


def offered_day(s: Sim, error: ToolError) -> str | None:
    """A day word for one of the days a refusal offered, if any can be said."""
    words = [day_word(s, (date.fromisoformat(d) - s.today).days) for d in error.alternatives]
    sayable = [w for w in words if w is not None]
    return s.rng.choice(sayable) if sayable else None


def _fill_day(s: Sim, day: str, service: str, leave: int = 0) -> None:
    """Other customers book `service` on `day` until `leave` free times remain."""
    for i in range(len(SLOT_TIMES)):
        free = s.run("check_availability", day=day, service=service)
        if not isinstance(free, Availability) or len(free.times) <= leave:
            return
        s.run("book_service", name=f"walk in {i}", day=day, time=free.times[0], service=service)


def _chosen_time(s: Sim, day: str, service: str, twist: str) -> str:
    """The time a caller who names one asks for, shaped by the twist."""
    if twist == "past":
        return s.rng.choice([t for t in SLOT_TIMES if parse_slot(t) < s.ctx.now().time()])
    free = s.run("check_availability", day=day, service=service)
    if twist == "bad_time" or not isinstance(free, Availability):
        bad = [t for t in SLOT_TIMES if not isinstance(free, Availability) or t not in free.times]
        return s.rng.choice(bad or list(SLOT_TIMES))
    time = s.rng.choice(free.times)
    if twist == "taken":
        s.run("book_service", name="walk in", day=day, time=time, service=service)
    return time


def book(s: Sim) -> None:
    """A booking call, from the opening line to the confirmation (or a graceful end)."""
    s.begin(Intent.BOOK)
    service, day = s.rng.choice(SERVICES), pick_day(s)
    name = s.name(lexicon.person_name(s.rng, s.split))
    twist = s.rng.choice(TWISTS)
    if twist == "past" and s.ctx.now().hour < MIN_HOUR_FOR_PAST:
        twist = "none"
    day = {"closed": s.rng.choice(["sunday", "next sunday"]), "past": "today"}.get(twist, day)
    if twist == "full":
        _fill_day(s, day, service)
    keys = list(callers.BOOK)
    if twist in ("taken", "bad_time", "past"):
        keys = [k for k in keys if "time" in k]
    key = s.rng.choice(keys)
    reveal = set(key)
    time = _chosen_time(s, day, service, twist) if "time" in reveal else None
    known = {k: k in reveal for k in ("svc", "day", "name")}
    phrase = lexicon.SERVICE_PHRASES[service].pick(s.rng, s.split)
    values = {"svc": phrase, "day": lexicon.day_form(s.rng, s.split, day), "name": name,
              "vague": s.pick(lexicon.VAGUE_TIMES)}  # fmt: skip
    if time:
        values["time"] = lexicon.time_form(s.rng, s.split, time)
    s.say_caller(callers.BOOK[key], edges=True, **{k: v for k, v in values.items() if k in reveal})
    confirmed, twisted = False, False
    while not s.too_long:
        if not known["svc"]:
            s.say(lines.ASK_SERVICE, Thought("need the service", "They want a booking but "
                                             "haven't said which service."))  # fmt: skip
            s.say_caller(callers.GIVE_SVC, svc=phrase)
            known["svc"] = True
        elif not known["day"]:
            s.say(lines.ASK_DAY, Thought("need a day", f"A {service}; I still need the day."))
            if twist == "hangup":
                s.say_caller(callers.HANG_UP)
                s.call("end_call", LEAVING)
                s.ended = True
                return
            known["day"] = True
            spoken_day = lexicon.day_form(s.rng, s.split, day)
            if s.rng.random() < 0.3:
                time = s.rng.choice(SLOT_TIMES)
                s.say_caller(callers.GIVE_DAY_TIME, day=spoken_day,
                             time=lexicon.time_form(s.rng, s.split, time))  # fmt: skip
            elif s.rng.random() < 0.4:
                s.say_caller(callers.GIVE_DAY_VAGUE, day=spoken_day, vague=values["vague"])
            else:
                s.say_caller(callers.GIVE_DAY, day=spoken_day)
        elif time is None:
            free = s.call("check_availability", CHECK, day=day, service=service)
            if isinstance(free, Availability):
                s.say(f"{free.say} {lines.WHICH_TIME}", OFFER)
                spoken = free.times[:OFFERED_TIMES_SPOKEN]
                time = s.rng.choice(spoken if s.rng.random() < 0.8 else free.times)
                said = lexicon.time_form(s.rng, s.split, time)
                if not known["name"] and s.rng.random() < 0.35:
                    s.say_caller(callers.GIVE_TIME_NAME, time=said, name=name)
                    known["name"] = True
                else:
                    s.say_caller(callers.GIVE_TIME, time=said)
            elif isinstance(free, ToolError):
                s.say(free.message, REFUSED)
                if (new_day := offered_day(s, free)) is None:
                    _never_mind(s)
                    return
                day = new_day
                s.say_caller(callers.GIVE_DAY, day=lexicon.day_form(s.rng, s.split, day))
        elif not known["name"]:
            s.say(
                lines.ASK_NAME, Thought("need a name", "Service, day and time known; ask the name.")
            )
            s.say_caller(callers.GIVE_NAME, name=name)
            known["name"] = True
        elif not confirmed:
            s.say(lines.confirm_booking(service, day, time, name), READ_BACK)
            if twist in ("change_time", "change_day", "fix_name") and not twisted:
                twisted = True
                if twist == "change_time":
                    time = s.rng.choice(SLOT_TIMES)
                    s.say_caller(callers.CHANGE_TIME, time=lexicon.time_form(s.rng, s.split, time))
                elif twist == "change_day":
                    day = pick_day(s)
                    s.say_caller(callers.CHANGE_DAY, day=lexicon.day_form(s.rng, s.split, day))
                else:
                    name = s.name(lexicon.person_name(s.rng, s.split))
                    s.say_caller(callers.NAME_WRONG, name=name)
            else:
                s.say_caller(callers.YES)
                confirmed = True
        else:
            done = s.call("book_service", BOOK, name=name, day=day, time=time, service=service)
            if isinstance(done, Booking):
                s.say(f"{done.say} {phrases().anything_else}", BOOKED)
                return
            assert isinstance(done, ToolError)
            confirmed = False
            if done.kind in (ToolErrorKind.SLOT_TAKEN, ToolErrorKind.INVALID_TIME) or (
                done.kind is ToolErrorKind.IN_THE_PAST and done.alternatives
            ):
                text = done.message
                if done.kind is not ToolErrorKind.SLOT_TAKEN:
                    text = f"{text} {lines.OTHER_TIME}"
                s.say(text, REFUSED)
                time = s.rng.choice(done.alternatives[:OFFERED_TIMES_SPOKEN])
                s.say_caller(callers.GIVE_TIME, time=lexicon.time_form(s.rng, s.split, time))
            else:
                s.say(done.message, REFUSED)
                if (new_day := offered_day(s, done)) is None:
                    _never_mind(s)
                    return
                day, time = new_day, None
                s.say_caller(callers.GIVE_DAY, day=lexicon.day_form(s.rng, s.split, day))


def _never_mind(s: Sim) -> None:
    s.say_caller(callers.NEVER_MIND)
    s.say(phrases().anything_else, Thought("offer more help", "Nothing to book; ask if "
                                           "there's anything else."))  # fmt: skip


def cancel(s: Sim) -> None:
    """A cancellation: name and day, read-back, the real cancel (or its refusal)."""
    s.begin(Intent.CANCEL)
    name = s.name(lexicon.person_name(s.rng, s.split))
    twist = s.rng.choice(("none", "none", "wrong_day", "no_booking"))
    days = [w for d in range(1, DAYS_IN_VIEW) if (w := day_word(s, d))]
    real_day, service = s.rng.choice(days), s.rng.choice(SERVICES)
    if twist != "no_booking":
        free = s.run("check_availability", day=real_day, service=service)
        if isinstance(free, Availability):
            s.run("book_service", name=name, day=real_day, time=free.times[0], service=service)
    day = s.rng.choice([d for d in days if d != real_day]) if twist == "wrong_day" else real_day
    key = s.rng.choice(list(callers.CANCEL))
    reveal = set(key)
    known = {"name": "name" in reveal, "day": "day" in reveal}
    values = {"name": name, "day": lexicon.day_form(s.rng, s.split, day)}
    s.say_caller(
        callers.CANCEL[key], edges=True, **{k: v for k, v in values.items() if k in reveal}
    )
    confirmed = False
    while not s.too_long:
        if not known["name"]:
            s.say(lines.ASK_BOOKING_NAME, Thought("need the name", "To cancel I need the name "
                                                  "the booking is under."))  # fmt: skip
            s.say_caller(callers.GIVE_NAME, name=name)
            known["name"] = True
        elif not known["day"]:
            s.say(lines.ASK_BOOKING_DAY, Thought("need the day", "I have the name; which day?"))
            s.say_caller(callers.GIVE_DAY, day=lexicon.day_form(s.rng, s.split, day))
            known["day"] = True
        elif not confirmed:
            s.say(lines.confirm_cancel(day, name), CANCEL_READ_BACK)
            s.say_caller(callers.YES)
            confirmed = True
        else:
            done = s.call("cancel_booking", CANCEL, name=name, day=day)
            if isinstance(done, Cancellation):
                s.say(f"{done.say} {phrases().anything_else}", BOOKED)
                return
            assert isinstance(done, ToolError)
            s.say(done.message, REFUSED)
            if (new_day := offered_day(s, done)) is None:
                _never_mind(s)
                return
            day, confirmed = new_day, False
            s.say_caller(callers.GIVE_DAY, day=lexicon.day_form(s.rng, s.split, day))
