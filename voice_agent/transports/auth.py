"""Handshake and call authentication: bearer secrets, Twilio's request signature, and
per-call tokens bound to one call.

Twilio signs the websocket handshake over the stream URL alone, so with a fixed URL
every call carries the same signature and a leaked header replays forever; custom
parameters such as `caller` are not signed at all. A call token (`call_token`) is
minted per call by the operator's TwiML webhook, over the call's CallSid, its caller
number and an expiry, and `CallTokens` admits each token once, for that call only.

All comparisons are timing-safe (`hmac.compare_digest`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit


def bearer_or_query_token(authorization: str | None, request_path: str) -> str | None:
    """The token a client presented: `Authorization: Bearer T`, else `?token=T`."""
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    tokens = parse_qs(urlsplit(request_path).query).get("token")
    return tokens[0] if tokens else None


def secret_matches(presented: str | None, secret: str) -> bool:
    if presented is None:
        return False
    return hmac.compare_digest(presented.encode(), secret.encode())


def twilio_signature(auth_token: str, url: str, params: dict[str, str] | None = None) -> str:
    """Twilio's X-Twilio-Signature: base64(HMAC-SHA1(auth token, URL + sorted k+v params)).

    The websocket handshake is a GET, so it is signed over the full URL alone.
    """
    payload = url + "".join(k + v for k, v in sorted((params or {}).items()))
    digest = hmac.new(auth_token.encode(), payload.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


def twilio_signature_valid(auth_token: str, url: str, signature: str | None) -> bool:
    if not signature:
        return False
    return hmac.compare_digest(twilio_signature(auth_token, url).encode(), signature.encode())


CALL_TOKEN_VERSION = "v1"


def call_token(secret: str, call_sid: str, caller: str, expires_unix: int) -> str:
    """A start-message token for one call: `v1.<expiry>.<hex HMAC-SHA256>` over the
    version, the call's CallSid, its `caller` parameter and the expiry (Unix seconds).
    The operator's TwiML webhook, which knows the incoming call's CallSid and From,
    mints it per call (`voice-agent twiml --call-sid ... --caller ...`)."""
    mac = _call_mac(secret, call_sid, caller, expires_unix)
    return f"{CALL_TOKEN_VERSION}.{expires_unix}.{mac}"


def _call_mac(secret: str, call_sid: str, caller: str, expires_unix: int) -> str:
    payload = "|".join((CALL_TOKEN_VERSION, call_sid, caller, str(expires_unix)))
    return hmac.new(secret.encode(), payload.encode(), hashlib.sha256).hexdigest()


class CallTokens:
    """Checks per-call tokens: bound to the call's CallSid and caller number, unexpired,
    not minted for longer than `max_ttl_s`, and used once (a replayed start message is
    refused even within its lifetime). Thread-safe enough for one event loop; the
    used-token memory is pruned as tokens expire."""

    def __init__(
        self, secret: str, *, max_ttl_s: int = 3600, clock: Callable[[], float] = time.time
    ) -> None:
        if not secret:
            raise ValueError("a call-token secret must not be empty")
        self._secret, self._max_ttl_s, self._clock = secret, max_ttl_s, clock
        self._used: dict[str, int] = {}  # mac -> expiry

    @property
    def remembered(self) -> int:
        """Used tokens held to refuse a replay (until they expire)."""
        return len(self._used)

    def check(self, token: str | None, call_sid: str, caller: str) -> str | None:
        """None when `token` admits this call, else why not (for the close reason)."""
        if token is None:
            return "start has no call token"
        version, _, rest = token.partition(".")
        expiry_text, _, mac = rest.partition(".")
        if version != CALL_TOKEN_VERSION or not expiry_text.isdigit() or not mac:
            return "malformed call token"
        expiry, now = int(expiry_text), self._clock()
        expected = _call_mac(self._secret, call_sid, caller, expiry)
        if not hmac.compare_digest(mac.encode(), expected.encode()):
            return "call token does not match this call"
        if expiry < now:
            return "call token expired"
        if expiry > now + self._max_ttl_s:
            return "call token lives too long"
        self._used = {m: e for m, e in self._used.items() if e >= now}
        if mac in self._used:
            return "call token already used"
        self._used[mac] = expiry
        return None
