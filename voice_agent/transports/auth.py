"""Handshake authentication: bearer secrets and Twilio's request signature.

All comparisons are timing-safe (`hmac.compare_digest`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
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
