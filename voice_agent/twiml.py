"""The TwiML a user pastes into Twilio to connect a call to this server."""

from __future__ import annotations

from urllib.parse import urlsplit
from xml.sax.saxutils import quoteattr


def twiml_connect_stream(url: str, parameters: dict[str, str] | None = None) -> str:
    """`<Connect><Stream url=...>` with optional `<Parameter>`s. Raises ValueError for a
    URL Twilio would refuse (it must be wss://, with a host)."""
    parts = urlsplit(url)
    if parts.scheme != "wss" or not parts.netloc:
        raise ValueError(f"Twilio needs a wss:// URL with a host, got {url!r}")
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        "<Response>",
        "  <Connect>",
        f"    <Stream url={quoteattr(url)}>",
    ]
    for name, value in (parameters or {}).items():
        lines.append(f"      <Parameter name={quoteattr(name)} value={quoteattr(value)} />")
    lines += ["    </Stream>", "  </Connect>", "</Response>"]
    return "\n".join(lines) + "\n"
