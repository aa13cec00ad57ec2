"""What callers say: frame templates per dialogue act, training and held-out parts.

Slots: {svc} service phrase, {day}, {time}, {vague} (a vague time), {name}, {order},
{product}, {pname} (a product name from a result), {qty}, {item} (an item number).
Held-out frames are whole templates that never occur in training dialogues; openers and
closers are composed around the frames (`with_edges`), multiplying the variety.
"""

from __future__ import annotations

import random

from voice_agent.brain.phrasing import Pool, Split, pool

OPENERS = pool("|hi|hello|hi there|yeah hi|good morning|hey|hello, yes|hi, um|morning",
               "good afternoon|hiya", mixed=True)  # fmt: skip
CLOSERS = pool("|please|thanks|if that's possible|thank you|cheers", "if you can", mixed=True)


def with_edges(rng: random.Random, split: Split, frame: str, *, opener: bool = True) -> str:
    """`frame` with an optional greeting before and a politeness word after."""
    head = OPENERS.pick(rng, split) if opener else ""
    tail = CLOSERS.pick(rng, split)
    return " ".join(p for p in (f"{head}," if head else "", frame, tail) if p)


BOOK: dict[tuple[str, ...], Pool] = {
    (): pool("my bike needs some work|i'd like to book my bike in|can i book a repair|"
             "i need to bring my bike in|i want to make an appointment for my bike|"
             "do you have space in the workshop|"
             "can i get my bike serviced|my bike needs looking at|i want to book a service|"
             "could you fit my bike in|i'd like a service appointment|"
             "can i drop my bike in for a repair",
             "i'd like to get my bike booked in somewhere|my bike's not riding right"),
    ("svc",): pool("i'd like {svc}|i need {svc}|can i book {svc}|could i get {svc}|"
                   "i'm looking to get {svc}|i want to book in for {svc}|"
                   "is it possible to get {svc}|"
                   "my bike needs {svc}|i was hoping to get {svc}|can you do {svc}",
                   "i'm after {svc}|would you have room for {svc}|need {svc} done"),
    ("svc", "day"): pool("i'd like {svc} {day}|can i book {svc} for {day}|"
                         "could you do {svc} {day}|i need {svc}, {day} ideally|"
                         "{day}, can i get {svc}|is {svc} possible {day}",
                         "any room for {svc} {day}|hoping for {svc} {day}"),
    ("svc", "day", "vague"): pool("i'd like {svc} {day} {vague}|can i get {svc} {day}, {vague}|"
                                  "i need {svc}, {day} {vague} would be great",
                                  "{svc} {day} {vague} if you have space"),
    ("svc", "day", "time"): pool("can i book {svc} {day} at {time}|i'd like {svc} {day} at {time}|"
                                 "could i get {svc} {day}, {time}|{svc} for {day} at {time}|"
                                 "is {time} {day} free for {svc}",
                                 "what about {svc} {day} around {time}"),
    ("svc", "day", "time", "name"): pool(
        "this is {name}, can i book {svc} {day} at {time}|"
        "hi it's {name}, i'd like {svc} {day} at {time}|"
        "{name} here, i need {svc} {day} at {time}|"
        "my name is {name} and i'd like {svc} {day} at {time}|"
        "can you book {svc} for {name} {day} at {time}",
        "please put {name} down for {svc} {day} at {time}|"
        "it's {name}, wondering about {svc} {day} at {time}"),
}  # fmt: skip
GIVE_SVC = pool(
    "{svc}|{svc} please|i need {svc}|just {svc}|i think {svc}|it needs {svc}", "probably {svc}"
)
GIVE_DAY = pool(
    "{day}|{day} would be good|how about {day}|{day} works for me|"
    "could we do {day}|{day} if you can",
    "{day} suits me|let's say {day}",
)
GIVE_DAY_VAGUE = pool(
    "{day} {vague}|{day}, {vague}|{day} {vague} if possible", "maybe {day} {vague}"
)
GIVE_DAY_TIME = pool(
    "{day} at {time}|{day}, {time}|{day} around {time}|how about {day} at {time}",
    "could do {day} {time}",
)
GIVE_TIME = pool(
    "{time}|{time} please|let's do {time}|{time} works|can i have {time}|"
    "{time} would be great|i'll take {time}",
    "go with {time}|{time} is fine",
)
GIVE_NAME = pool(
    "it's {name}|{name}|my name is {name}|the name's {name}|under {name}|"
    "put it under {name}|{name}, thanks",
    "it'll be {name}|name is {name}",
)
GIVE_TIME_NAME = pool(
    "{time} please, my name's {name}|{time}, and it's {name}|{time} is good, name {name}",
    "i'll take {time}, under {name}",
)
YES = pool(
    "yes|yeah that's right|yep perfect|that's correct|sounds good|yes please|"
    "yeah go ahead|correct|that's it|great yes|"
    "yes that's correct|yep|yup, go ahead|please do|go for it|yes book it|that's right, yes|"
    "perfect|spot on|exactly right|yes, all correct|okay yes|yes, lovely|that works, yes|"
    "brilliant, yes please|yeah, that's perfect|uh huh, that's right|yes, confirm it|"
    "sure|sure, go ahead|definitely|certainly|of course|yes, do that|go on then|"
    "yeah, book it in|fine by me|all good, yes|yes, that's the one|lovely, go ahead|"
    "cool, yes|yep, sounds right|ok, go for it|yes thanks|that's fine, book it",
    "sure thing|right, do it|absolutely",
)
CHANGE_TIME = pool(
    "actually can we make it {time}|no sorry, {time} instead|"
    "wait, {time} would be better|hmm, make that {time}",
    "oh, better {time} actually",
)
CHANGE_DAY = pool(
    "actually {day} would be better|hmm can we do {day} instead|"
    "sorry, i meant {day}|no wait, {day}",
    "let's change it to {day}",
)
DONE = pool(
    "no that's all thanks|that's it, bye|no thank you, bye|nope that's everything|"
    "no i'm good thanks|that's all, cheers|"
    "no that's everything, bye|that's all i needed, thanks|no, that's it for today|"
    "i think that covers it, bye|no more questions, thanks|that'll be all|"
    "no, you've been a great help, bye|all done, thank you|okay that's it, goodbye|"
    "no i think i'm sorted|that's me done, cheers|nah that's all, bye|no, all set thanks|"
    "that was everything, bye bye|no, i'm good for now|no thanks, have a good day|"
    "no thanks, take care|i'm done, thanks a lot",
    "all good, bye now|nothing else, thanks",
)

CANCEL: dict[tuple[str, ...], Pool] = {
    (): pool("i need to cancel my booking|i want to cancel an appointment|"
             "i have to cancel my service booking|can i cancel a booking|"
             "i need to call off my appointment|please cancel my booking|"
             "i can't come in anymore|i'd like to cancel my service",
             "i won't make my appointment"),
    ("day",): pool("i need to cancel my booking {day}|i can't make my appointment {day}|"
                   "can you cancel my {day} booking", "my slot {day} won't work, cancel it"),
    ("day", "name"): pool("this is {name}, i need to cancel {day}|"
                          "cancel the booking for {name} {day}|"
                          "it's {name}, can't make it {day}, please cancel",
                          "{name} here, scrap my booking {day}"),
}  # fmt: skip
ORDER: dict[tuple[str, ...], Pool] = {
    (): pool("where's my order|i'm calling about an online order|my order hasn't arrived|"
             "can you check on my order|i ordered something and wanted an update|"
             "has my order shipped yet|i'm still waiting on my order|"
             "what's happening with my order|can you tell me where my parcel is|"
             "i want to track my order",
             "any news on my delivery"),
    ("order",): pool("where is order {order}|i'm calling about order {order}|"
                     "can you check order number {order}|my order {order} hasn't come|"
                     "status of order {order}|"
                     "can you track order {order}|has order {order} shipped|"
                     "what's up with order {order}|order {order}, where is it|"
                     "i'm waiting on order {order}", "any update on {order}"),
}  # fmt: skip
GIVE_ORDER = pool(
    "it's {order}|{order}|the number is {order}|order number {order}|"
    "it's order {order}|yeah it's {order}",
    "it should be {order}",
)
REREAD_ORDER = pool(
    "sorry, it's {order}|let me check, {order}|oh, {order}|i think it's {order}",
    "my mistake, {order}",
)
SEARCH = pool(
    "do you have {product}|do you sell {product}|i'm looking for {product}|"
    "have you got {product} in stock|i need {product}|do you carry {product}|"
    "is there {product} in stock|"
    "i'm after {product}|have you got {product}|do you stock {product}|"
    "can i buy {product} from you|i want to get {product}|i'd like to buy {product}|"
    "would you have {product}|looking to buy {product}|do you happen to have {product}|"
    "i'm trying to find {product}|"
    "got any {product}|do you guys have {product}|i was wondering if you have {product}|"
    "have you any {product}|could i get {product} from the shop|"
    "you wouldn't have {product}, would you|do you keep {product}|"
    "is {product} in stock at the moment|what do you have in the way of {product}|"
    "i'm hoping you sell {product}|can i pick up {product} today|"
    "does the shop sell {product}|i'd like to get hold of {product}",
    "any chance you stock {product}|are {product} something you sell",
)
RESERVE_YES = pool(
    "yes please, {qty}|yeah put {qty} aside|can you hold {qty}|"
    "yes, {qty} of the {pname}|{qty} of the {pname} please",
    "go on, {qty} of the {pname}",
)
RESERVE_NO = pool(
    "no thanks, just checking|not right now|i'll think about it|no that's fine", "maybe later"
)
RESERVE_BY_ID = pool(
    "can you put aside item {item} for me|i saw item {item} on your flyer, "
    "can you hold one|please reserve item number {item}",
    "could you keep item {item} for me",
)
ALTERNATIVE_YES = pool(
    "okay, the {pname} then|fine, {qty} of the {pname}|the {pname} is fine",
    "i'll go with the {pname}",
)
FEWER = pool("okay then just {qty}|fine, {qty} then|i'll take {qty}", "{qty} will do")
HOURS = pool(
    "are you open {day}|what are your hours {day}|when do you close {day}|"
    "what time do you open {day}|how late are you open {day}|are you guys open {day}|"
    "what are your opening hours {day}|when are you open {day}|are you open at all {day}|"
    "what time do you shut {day}|do you open {day}|what time are you open till {day}|"
    "can i come in {day}|what hours are you {day}|when can i drop by {day}|"
    "how early do you open {day}|is the shop open {day}",
    "until when are you open {day}|what are the opening times {day}",
)
TRANSFER: dict[str, Pool] = {
    "caller asked": pool("can i speak to a person|i'd like to talk to someone|"
                         "can you put me through to a human|is there someone i can talk to|"
                         "i want to speak to a manager|transfer me to someone please|"
                         "can i talk to a real person|put me through to the staff please|"
                         "i'd rather speak to a human|operator please",
                         "get me a real person please"),
    "complaint": pool("i want to make a complaint|my bike came back worse than before|"
                      "i'm not happy with the repair you did|the service was terrible|"
                      "i'm really unhappy with how my bike was fixed|"
                      "your mechanic damaged my bike|i need to complain about my repair",
                      "i have a complaint about my service"),
    "warranty claim": pool("my frame cracked and it's under warranty|"
                           "i want to make a warranty claim|"
                           "my new bike broke, is that covered by warranty|"
                           "the gears failed and it's still under warranty|"
                           "i think this is a warranty issue", "the warranty should cover this"),
    "refund": pool("i want a refund for my order|can i get my money back|"
                   "i'd like a refund please|i want my money back for this|"
                   "can you refund my purchase|how do i get a refund",
                   "i'd like to return this and get refunded"),
    "out of scope": pool("do you rent bikes|can i trade in my old bike|"
                         "do you do bike fittings|"
                         "do you sell cars|can i hire a bike for the weekend|"
                         "do you do bike insurance|can you fix my scooter|do you do lessons",
                         "do you buy used bikes"),
}  # fmt: skip
OFF_TOPIC = pool(
    "what's the weather like|can you order me a pizza|tell me a joke|"
    "who won the game last night|can you call me a taxi",
    "what's the capital of france|do you know a good restaurant",
)
GREETING_ONLY = pool(
    "hello?|hi|hello, is this the bike shop|hi there, hello", "hello, anyone there"
)
HOW_ARE_YOU = pool("how are you doing today|how's it going|how are you", "you doing okay")
THANKS = pool("thanks|thank you|great thanks|cheers|perfect thank you", "lovely, thanks")
GARBLED = pool(
    "uh the the thing with|sorry what was|hm hm the|i was wondering if the um", "so the uh"
)
HANG_UP = pool(
    "oh sorry i have to go, bye|i'll call back later, bye|never mind, bye", "gotta run, bye"
)
NEVER_MIND = pool(
    "oh that's too far out, never mind|no, never mind then|forget it then", "hmm, no thanks then"
)
NAME_WRONG = pool(
    "no, it's {name}|sorry, the name is {name}|it's actually {name}", "wrong name, it's {name}"
)
