"""Helpers the wire codecs share: JSON in and out, validation mapped to ProtocolError.

Pure functions, no state: each codec keeps its own ordering rules.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, Field, ValidationError

from voice_agent.transports.errors import CloseCode, ProtocolError

MAX_CALL_ID_CHARS = 128
CALL_ID_PATTERN = r"^[A-Za-z0-9._:+-]+$"
"""Call and stream ids become MQTT topic levels, log fields and plot labels: plain ASCII
only (a lone surrogate or a `$...$` once stalled the publisher or broke a report)."""
CallId = Annotated[str, Field(min_length=1, max_length=MAX_CALL_ID_CHARS, pattern=CALL_ID_PATTERN)]

DtmfDigit = Annotated[str, Field(pattern=r"^[0-9*#A-D]$")]
"""One DTMF key: `0`-`9`, `*`, `#` or `A`-`D`."""

ModelT = TypeVar("ModelT", bound=BaseModel)


def parse_json_object(message: str) -> dict[str, Any]:
    """Parse a text frame that must hold one JSON object.

    Raises ProtocolError(INVALID_PAYLOAD) for malformed JSON, JSON Python refuses to
    hold (an integer of more than 4300 digits, nesting deeper than the recursion limit)
    or any JSON value other than an object.
    """
    try:
        data = json.loads(message)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        if isinstance(exc, json.JSONDecodeError):
            detail = exc.msg
        elif isinstance(exc, RecursionError):
            detail = "nested too deeply"
        else:
            detail = "a number too long"
        raise ProtocolError(CloseCode.INVALID_PAYLOAD, f"malformed JSON: {detail}") from None
    if not isinstance(data, dict):
        raise ProtocolError(
            CloseCode.INVALID_PAYLOAD, f"expected a JSON object, got {_json_kind(data)}"
        )
    return data


def event_name(data: Mapping[str, Any]) -> str:
    """The message's `event` field; raises ProtocolError(BAD_MESSAGE) when absent or not text."""
    event = data.get("event")
    if not isinstance(event, str):
        missing = "event" not in data
        problem = "missing" if missing else f"must be a string, got {_json_kind(event)}"
        raise ProtocolError(CloseCode.BAD_MESSAGE, f"field 'event' {problem}")
    return event


def validate(model: type[ModelT], data: Mapping[str, Any], what: str) -> ModelT:
    """Validate `data` as `model`; on failure raise ProtocolError(BAD_MESSAGE) naming the field.

    `what` names the message in the reason (e.g. "start message"). Input values are left
    out of the reason: they may hold secrets.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        field = ".".join(str(part) for part in first["loc"]) or "<message>"
        more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ProtocolError(
            CloseCode.BAD_MESSAGE, f"{what}: field '{field}': {first['msg']}{more}"
        ) from None


def dump_json(message: Mapping[str, Any]) -> str:
    """Serialize an outbound message compactly (no spaces)."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False)


def _json_kind(value: object) -> str:
    kinds = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "a number"
    return kinds.get(type(value), type(value).__name__)
