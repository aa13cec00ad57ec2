"""Why a connection is closed: one specific close code per kind of bad input.

Codes 1000-1015 are RFC 6455's; the 4000-4999 range is ours, mirroring HTTP statuses
(4401 = unauthorized, 4409 = out of order, ...). The README lists them.
"""

from __future__ import annotations

from enum import IntEnum

MAX_REASON_BYTES = 123
"""RFC 6455: a close frame's reason is at most 123 bytes of UTF-8."""


class CloseCode(IntEnum):
    NORMAL = 1000
    GOING_AWAY = 1001
    UNSUPPORTED_DATA = 1003
    """A binary frame where text is expected, or the reverse."""
    INVALID_PAYLOAD = 1007
    """Malformed JSON, invalid base64, an odd number of PCM16 bytes."""
    MESSAGE_TOO_BIG = 1009
    INTERNAL_ERROR = 1011
    TRY_AGAIN_LATER = 1013
    """The server is at its maximum number of concurrent calls."""
    BAD_MESSAGE = 4400
    """Valid JSON whose fields are missing or of the wrong type."""
    UNAUTHORIZED = 4401
    """Missing or wrong token or signature."""
    OUT_OF_ORDER = 4409
    """Media before `start`, a second `start`, anything after `stop`."""
    UNSUPPORTED_MEDIA = 4415
    """A sample rate, encoding or channel count the endpoint does not accept."""
    SLOW_CONSUMER = 4408
    """The peer stopped reading outbound audio and the bounded buffer filled up."""
    TOO_FAST = 4429
    """The peer sent caller audio faster than real time (beyond `AUDIO_AHEAD_S`)."""


class ProtocolError(Exception):
    """Bad input on one connection; the server closes that connection with `code`."""

    def __init__(self, code: CloseCode, reason: str) -> None:
        super().__init__(f"{code.name} ({int(code)}): {reason}")
        self.code = code
        # RFC 6455 limits a close reason to 123 bytes of UTF-8. A reason may quote the
        # peer's own text, which can hold lone surrogates ("\ud800" in JSON): replace them.
        self.reason = reason.encode(errors="replace")[:MAX_REASON_BYTES].decode(errors="ignore")
