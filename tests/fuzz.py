"""Hostile websocket input for the fuzz tests: hypothesis strategies and the case budget.

`FUZZ_CASES` (env) sets how many cases each fuzz property runs; the default keeps CI
fast. Without it the runs are derandomized (the same cases every run, no example
database written); with it each run draws new cases.

A message is a `str` (a text frame) or `bytes` (a binary frame). Sequences mix protocol
messages that are right, nearly right (a field dropped, retyped or added, the event
renamed) and plain garbage: malformed JSON, other JSON values, binary where text is
expected, invalid base64, payloads far over the limits, deep nesting, huge numbers, lone
surrogates.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

DEFAULT_CASES = 400
FUZZ_CASES = int(os.environ.get("FUZZ_CASES", DEFAULT_CASES))
"""Cases per fuzz property."""
STREAM_SID = "MZ" + "0" * 32
CALL_SID = "CA" + "2" * 32
OVER_LIMIT_BYTES = 70_000
"""Bigger than the server's default `max_message_bytes` (65,536)."""

Message = str | bytes


def fuzz_settings(cases: int = FUZZ_CASES) -> settings:
    return settings(
        max_examples=cases,
        deadline=None,
        database=None,
        derandomize="FUZZ_CASES" not in os.environ,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# --------------------------------------------------------------------------- building blocks

_surrogates = st.sampled_from(["\ud800", "\udfff", "\udc80"])
text = st.text(st.one_of(st.characters(), _surrogates), max_size=40)
"""Any text, lone surrogates included (they reach us as JSON `\\ud800` escapes)."""
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    text,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=10,
)


def _dumps(value: Any) -> str:
    return json.dumps(value)  # ensure_ascii: surrogates travel as \\u escapes


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


ulaw_payload = st.one_of(
    st.binary(max_size=320).map(_b64),
    st.just(_b64(b"\xff" * 9000)),  # over the codec's 8,000-byte limit
    st.text(alphabet="*!@ =\n", min_size=1, max_size=20),  # not base64
    st.binary(min_size=1, max_size=30).map(lambda b: _b64(b)[:-1]),  # bad padding
    json_values,
)


# --------------------------------------------------------------------------- Twilio messages


def twilio_start(**fmt: Any) -> dict[str, Any]:
    media_format = {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1} | fmt
    return {
        "event": "start",
        "sequenceNumber": "1",
        "streamSid": STREAM_SID,
        "start": {
            "streamSid": STREAM_SID,
            "accountSid": "AC" + "1" * 32,
            "callSid": CALL_SID,
            "tracks": ["inbound"],
            "customParameters": {},
            "mediaFormat": media_format,
        },
    }


def twilio_media(payload: Any, track: str = "inbound") -> dict[str, Any]:
    media = {"track": track, "chunk": "1", "timestamp": "0", "payload": payload}
    return {"event": "media", "streamSid": STREAM_SID, "media": media}


_twilio_objects = st.one_of(
    st.just({"event": "connected", "protocol": "Call", "version": "1.0.0"}),
    st.builds(
        twilio_start,
        sampleRate=st.sampled_from([8000, 8000, 16000, "8000", -1, 2**80]),
        encoding=st.sampled_from(["audio/x-mulaw", "audio/x-mulaw", "audio/pcm", "\ud800"]),
    ),
    st.builds(twilio_media, ulaw_payload, st.sampled_from(["inbound", "outbound", "sideways"])),
    st.builds(
        lambda d: {"event": "dtmf", "streamSid": STREAM_SID, "dtmf": {"digit": d}},
        st.sampled_from(["1", "#", "X", "12", ""]),
    ),
    st.builds(
        lambda n: {"event": "mark", "streamSid": STREAM_SID, "mark": {"name": n}}, json_values
    ),
    st.just({"event": "stop", "streamSid": STREAM_SID}),
    st.builds(lambda e: {"event": e, "streamSid": STREAM_SID}, text),
)


# --------------------------------------------------------------------------- PCM messages

_pcm_objects = st.one_of(
    st.fixed_dictionaries(
        {
            "event": st.just("start"),
            "sample_rate_hz": st.sampled_from([16000, 8000, 11025, "8000"]),
        },
        optional={
            "encoding": st.sampled_from(["pcm16le", "mulaw"]),
            "channels": st.sampled_from([1, 2, True]),
            "call_id": st.one_of(text, st.just("x" * 200)),
            "parameters": st.dictionaries(text, json_values, max_size=3),
        },
    ),
    st.builds(lambda n: {"event": "mark", "name": n}, json_values),
    st.builds(lambda d: {"event": "dtmf", "digit": d}, st.sampled_from(["5", "*", "E", 5])),
    st.just({"event": "stop"}),
    st.builds(lambda e: {"event": e}, text),
)
pcm_audio = st.one_of(
    st.binary(max_size=640),
    st.integers(0, 200).map(lambda n: b"\x01" * (2 * n + 1)),  # odd: not whole samples
    st.just(b"\x00" * 100_000),  # over one second at 16 kHz, over the server's limit
)


# --------------------------------------------------------------------------- mutation


@st.composite
def _mutated(draw: st.DrawFn, objects: st.SearchStrategy[dict[str, Any]]) -> dict[str, Any]:
    """A protocol object, sometimes broken: a key dropped, a value retyped, a key added."""
    obj: dict[str, Any] = json.loads(json.dumps(draw(objects)))  # a deep copy
    for _ in range(draw(st.integers(0, 2))):
        target = obj
        nested = [k for k, v in target.items() if isinstance(v, dict)]
        if nested and draw(st.booleans()):
            target = target[draw(st.sampled_from(nested))]
        action = draw(st.sampled_from(["drop", "retype", "add"]))
        if action == "drop" and target:
            del target[draw(st.sampled_from(sorted(target)))]
        elif action == "retype" and target:
            target[draw(st.sampled_from(sorted(target)))] = draw(json_values)
        else:
            target[draw(text)] = draw(json_values)
    return obj


garbage = st.one_of(
    text,  # mostly not JSON
    json_values.map(_dumps),  # JSON, often not an object
    st.binary(max_size=200),  # binary
    st.just("{" * 10 + '"event": "start"'),  # truncated
    st.just("[" * 100_000 + "]" * 100_000),  # nested past the recursion limit
    st.just('{"event": "start", "sample_rate_hz": ' + "9" * 5000 + "}"),  # int too long
    st.just('{"event": "media", "pad": "' + "A" * OVER_LIMIT_BYTES + '"}'),  # too big
)


def twilio_messages() -> st.SearchStrategy[Message]:
    return st.one_of(_mutated(_twilio_objects).map(_dumps), garbage)


def pcm_messages() -> st.SearchStrategy[Message]:
    return st.one_of(_mutated(_pcm_objects).map(_dumps), pcm_audio, garbage)


def sequences(protocol: str) -> st.SearchStrategy[list[Message]]:
    """Up to eight messages, half the time after a valid opening (to reach in-call states)."""
    if protocol == "twilio":
        opening = [_dumps(twilio_start())]
        messages = twilio_messages()
    else:
        opening = [_dumps({"event": "start", "sample_rate_hz": 16000})]
        messages = pcm_messages()
    return st.builds(
        lambda opened, rest: (opening if opened else []) + rest,
        st.booleans(),
        st.lists(messages, min_size=1, max_size=8),
    )
