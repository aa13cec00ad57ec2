"""The seam between a transport and the pipeline: what a call session must implement.

The server decodes the wire, answers `mark` echoes through the player, and hands the
session everything else as an async stream of inbound events that ends when the caller
hangs up. The session speaks through the `AudioPlayer`. When `run()` returns the server
ends the call; when the caller hangs up first, the stream ends and the session should
return promptly (it is cancelled after a grace period).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from typing import Protocol

from voice_agent.events import CallStarted, InboundEvent
from voice_agent.transports.player import AudioPlayer

INBOUND_QUEUE_EVENTS = 250
"""Inbound events buffered per call (5 s of 20 ms frames); beyond it the socket read
waits, so TCP back-pressure slows the peer instead of memory growing."""


CALLER_PARAMETER = "caller"
"""The custom parameter carrying the caller's number: on Twilio the TwiML webhook writes
`<Parameter name="caller" value="{From}"/>` (the handshake signature vouches for it); on
`/pcm` the authenticated client sends it in `parameters`."""
_PHONE_NUMBER = re.compile(r"^\+?[0-9]{3,20}$")


def caller_identity(call: CallStarted) -> str:
    """Who is calling, for scoping what tools may change (`ShopContext.caller`):
    `phone:<number>` from the `caller` custom parameter when it is a phone number, else
    `call:<call id>`, which reaches only what this same call booked."""
    number = call.custom_parameters.get(CALLER_PARAMETER, "").replace(" ", "")
    if _PHONE_NUMBER.match(number):
        return f"phone:{number}"
    return f"call:{call.call_id}"


class CallSession(Protocol):
    async def run(self, call: CallStarted, inbound: Inbound, player: AudioPlayer) -> None:
        """Handle one call until it should end. Must not raise for caller behaviour."""
        ...


SessionFactory = Callable[[], CallSession]


class Inbound:
    """A bounded async stream of inbound events; iteration ends at hang-up."""

    def __init__(self, maxsize: int = INBOUND_QUEUE_EVENTS) -> None:
        self._queue: asyncio.Queue[InboundEvent | None] = asyncio.Queue(maxsize)
        self._ended = False

    async def put(self, event: InboundEvent) -> None:
        await self._queue.put(event)

    async def end(self) -> None:
        """No more events will come; waits for room like `put` (nothing queued is lost)."""
        if not self._ended:
            self._ended = True
            await self._queue.put(None)

    def __aiter__(self) -> AsyncIterator[InboundEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[InboundEvent]:
        while (event := await self._queue.get()) is not None:
            yield event
