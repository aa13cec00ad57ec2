"""The websocket server: a thin asyncio shell around the sans-I/O codecs.

Paths: `/twilio` (Twilio Media Streams) and `/pcm` (raw PCM16, see the README). One
session per connection. Bad input closes only that connection, with a specific code.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ipaddress
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Protocol
from urllib.parse import urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.protocol import State

from voice_agent.clock import Clock, MonotonicClock
from voice_agent.config import ServerSettings, Settings
from voice_agent.events import (
    AudioReceived,
    CallStarted,
    CallStopped,
    MarkReceived,
    OutboundEvent,
)
from voice_agent.transports.auth import (
    CallTokens,
    bearer_or_query_token,
    secret_matches,
    twilio_signature_valid,
)
from voice_agent.transports.call import Inbound, SessionFactory
from voice_agent.transports.errors import CloseCode, ProtocolError
from voice_agent.transports.pcm import PcmCodec
from voice_agent.transports.player import AudioPlayer
from voice_agent.transports.twilio import TwilioCodec

log = logging.getLogger(__name__)

TWILIO_PATH = "/twilio"
PCM_PATH = "/pcm"
MAX_ADDRESS_CHARS = 64
"""An X-Forwarded-For hop longer than any address is cut (it only keys a counter)."""
DRAIN_POLL_S = 0.5
"""How often a drain looks at the clock while nothing ends."""
HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
METRICS_PATH = "/metrics"
HANGUP_GRACE_S = 5.0
"""After the caller hangs up, the session gets this long to finish before it is cancelled."""
CALL_LOG_SIZE = 1000
ABNORMAL_CLOSURE = 1006
"""Recorded when the TCP connection ended without a close frame either way."""
CLOSE_TIMEOUT_S = 2.0
"""How long the closing handshake may take. A peer that has stopped reading never lets
our close frame out (websockets' `close()` waits for the send buffer to drain, without a
limit): after this long its TCP connection is aborted, so the call's slot is freed."""

Codec = TwilioCodec | PcmCodec


@dataclass(frozen=True, slots=True)
class CallRecord:
    """How one connection ended (kept for operators and tests)."""

    path: str
    call_id: str | None
    close_code: int
    close_reason: str


AUDIO_AHEAD_S = 2.0
"""How far a caller's audio may run ahead of real time (network bursts, a client's
buffered start) before the call is closed with TOO_FAST."""


class RealTimePace:
    """Caller audio against the wall clock since the call's start."""

    def __init__(self, start_s: float) -> None:
        self.start_s = start_s
        self.audio_s = 0.0

    def add(self, duration_s: float, now_s: float) -> None:
        """Count `duration_s` of audio received at `now_s`. Raises ProtocolError
        (TOO_FAST) once the audio is `AUDIO_AHEAD_S` ahead of the time elapsed."""
        self.audio_s += duration_s
        ahead_s = self.audio_s - (now_s - self.start_s)
        if ahead_s > AUDIO_AHEAD_S:
            raise ProtocolError(
                CloseCode.TOO_FAST,
                f"audio {ahead_s:.1f} s ahead of real time (at most {AUDIO_AHEAD_S:g} s)",
            )


def refusal(cfg: ServerSettings, waiting: int, address: str | None, open_here: int) -> str:
    """Why a new connection is turned away before it may send its start ('' to admit):
    too many are waiting for their start already, or its (non-loopback) `address` has
    `open_here` connections, the most one address may hold."""
    if waiting >= cfg.max_waiting:
        return f"{waiting} connections waiting to start; try again later"
    if address is not None and open_here >= cfg.max_per_address:
        return f"too many connections from {address}; try again later"
    return ""


def _peer_address(ws: ServerConnection) -> str | None:
    peer = ws.remote_address
    return str(peer[0]) if isinstance(peer, tuple) and peer else None


def client_address(
    peer: str | None, forwarded_for: str | None, trusted: Iterable[str]
) -> str | None:
    """The caller's address: the peer's, or, when the peer is a trusted proxy that sent
    X-Forwarded-For, the nearest hop in it that is not itself a trusted proxy. Read from
    the right: a proxy appends the address it saw, so entries a client wrote itself are
    further left and never chosen."""
    proxies = set(trusted)
    if peer is None or peer not in proxies or not forwarded_for:
        return peer
    hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
    for hop in reversed(hops):
        if hop not in proxies:
            return hop[:MAX_ADDRESS_CHARS]
    return peer


def is_loopback(host: str) -> bool:
    """Whether `host` (a listen address) is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


def open_endpoints(settings: Settings) -> list[str]:
    """Why serving `settings` would be open to anyone who can reach it: each enabled
    endpoint without auth, when the listen address is not loopback; [] when safe."""
    if is_loopback(settings.server.host):
        return []
    auth, problems = settings.auth, []
    twilio_auth = (auth.twilio_auth_token, auth.twilio_stream_token, auth.twilio_call_token_secret)
    if all(secret is None for secret in twilio_auth):
        problems.append(f"{TWILIO_PATH} has no auth (set auth.twilio_auth_token, "
                        "auth.twilio_stream_token or auth.twilio_call_token_secret)")  # fmt: skip
    if settings.server.pcm_enabled and auth.pcm_secret is None:
        problems.append(f"{PCM_PATH} has no auth (set auth.pcm_secret, or server.pcm_enabled "
                        "= false)")  # fmt: skip
    return problems


def open_telemetry(settings: Settings) -> list[str]:
    """Why the call events (what callers asked, their numbers in call ids, and with
    `record_text` their words) would cross the network unprotected: a broker on another
    host reached in the clear (mqtt://) or without a login; [] when safe."""
    cfg = settings.telemetry
    if cfg.broker_url is None:
        return []
    parts = urlsplit(cfg.broker_url)
    host = parts.hostname or ""
    if is_loopback(host):
        return []
    problems = []
    if parts.scheme != "mqtts":
        problems.append(f"telemetry goes to {host} in the clear (use mqtts://)")
    if cfg.username is None:
        problems.append(f"telemetry logs in to {host} anonymously (set telemetry.username "
                        "and telemetry.password)")  # fmt: skip
    return problems


class MetricsSink(Protocol):
    """Where the server counts what it refuses and closes (`telemetry.metrics.Metrics`)."""

    def call_closed(self, path: str, code: int) -> None: ...
    def http_refused(self, status: int) -> None: ...
    def render(self) -> tuple[bytes, str]:
        """The `/metrics` body and its content type."""
        ...


class VoiceServer:
    """Serves `/twilio` and `/pcm`. Use `async with VoiceServer(...)` or start()/close()."""

    def __init__(
        self,
        settings: Settings,
        session_factory: SessionFactory,
        clock: Clock | None = None,
        health: Callable[[], Mapping[str, object]] | None = None,
        metrics: MetricsSink | None = None,
    ) -> None:
        """`health`: the figures `/healthz` and `/readyz` report (`Pipeline.health`); its
        `alive` False makes both answer 503. None: the server alone (the echo stand-in).
        `metrics`: counts closes and refused handshakes and renders `/metrics`."""
        self.settings = settings
        self._factory = session_factory
        self._health = health
        self._metrics = metrics
        secret = settings.auth.twilio_call_token_secret
        self._call_tokens = (
            CallTokens(secret.get_secret_value(), max_ttl_s=settings.auth.call_token_max_ttl_s)
            if secret is not None
            else None
        )
        """Per-call tokens, one replay memory for every call of this server."""
        self.stopping = False
        """Set when `close()` begins: no new calls (`/readyz` answers 503)."""
        self._clock = clock or MonotonicClock()
        self._server: Server | None = None
        self.active_calls = 0
        self.waiting = 0
        """Connections waiting for their start message (not yet calls)."""
        self._ended = asyncio.Event()
        """Set when a call or a waiting connection ends (what `drain` waits for)."""
        self._per_address: collections.Counter[str] = collections.Counter()
        self.calls: collections.deque[CallRecord] = collections.deque(maxlen=CALL_LOG_SIZE)

    async def start(self) -> None:
        cfg = self.settings.server
        self._server = await serve(
            self._handle,
            cfg.host,
            cfg.port,
            process_request=self._check_request,
            max_size=cfg.max_message_bytes,
            compression=None,
            close_timeout=CLOSE_TIMEOUT_S,
        )

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("server not started")
        return int(next(iter(self._server.sockets)).getsockname()[1])

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        assert self._server is not None
        await self._server.serve_forever()

    async def drain(self, timeout_s: float) -> int:
        """Stop taking calls and let the ones in progress finish, for up to `timeout_s`:
        `/readyz` answers 503 and new call handshakes get 503 at once (a load balancer
        retries them on another worker), connections already waiting for their start are
        refused with 1013. Returns the calls still in progress at the end (0: drained).
        `close()` then ends those with 1001."""
        self.stopping = True
        deadline = self._clock.now() + timeout_s
        while self.active_calls + self.waiting and (left := deadline - self._clock.now()) > 0:
            self._ended.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ended.wait(), min(left, DRAIN_POLL_S))
        return self.active_calls

    async def close(self) -> None:
        self.stopping = True
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def __aenter__(self) -> VoiceServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ handshake

    def _check_request(self, connection: ServerConnection, request: Request) -> Response | None:
        response = self._answer_request(connection, request)
        refused = response is not None and response.status_code >= HTTPStatus.BAD_REQUEST
        if refused and response is not None and self._metrics is not None:
            self._metrics.http_refused(response.status_code)
        return response

    def _answer_request(self, connection: ServerConnection, request: Request) -> Response | None:
        path = urlsplit(request.path).path
        if path in (HEALTH_PATH, READY_PATH):
            return self._health_response(connection, path)
        if path == METRICS_PATH:
            return self._metrics_response(connection)
        if self.stopping and path in (TWILIO_PATH, PCM_PATH):
            return connection.respond(
                HTTPStatus.SERVICE_UNAVAILABLE, "this worker is draining; call another\n"
            )
        auth = self.settings.auth
        if path == PCM_PATH and not self.settings.server.pcm_enabled:
            return connection.respond(HTTPStatus.NOT_FOUND, f"{PCM_PATH} is switched off\n")
        if path == PCM_PATH and auth.pcm_secret is not None:
            token = bearer_or_query_token(request.headers.get("Authorization"), request.path)
            if not secret_matches(token, auth.pcm_secret.get_secret_value()):
                return connection.respond(
                    HTTPStatus.UNAUTHORIZED, "missing or wrong token (Bearer header or ?token=)\n"
                )
        elif path == TWILIO_PATH and auth.twilio_auth_token is not None:
            url = self._public_url(request)
            signature = request.headers.get("X-Twilio-Signature")
            if not twilio_signature_valid(
                auth.twilio_auth_token.get_secret_value(), url, signature
            ):
                return connection.respond(HTTPStatus.FORBIDDEN, "invalid X-Twilio-Signature\n")
        elif path not in (TWILIO_PATH, PCM_PATH):
            return connection.respond(
                HTTPStatus.NOT_FOUND,
                f"no such endpoint {path!r}; use {TWILIO_PATH} or {PCM_PATH}\n",
            )
        return None

    def _health_response(self, connection: ServerConnection, path: str) -> Response:
        """`/healthz`: 200 while the process can serve (engine and database alive), else
        503, for a supervisor to restart it. `/readyz`: 200 only when it can also take
        one more call (alive, under `max_calls`, not stopping), for a load balancer."""
        figures = dict(self._health() if self._health is not None else {"alive": True})
        figures["calls"] = self.active_calls
        figures["max_calls"] = self.settings.server.max_calls
        figures["stopping"] = self.stopping
        ok = bool(figures.get("alive", False))
        if path == READY_PATH:
            ok = ok and not self.stopping and self.active_calls < self.settings.server.max_calls
        status = HTTPStatus.OK if ok else HTTPStatus.SERVICE_UNAVAILABLE
        body = (json.dumps(figures, default=str) + "\n").encode()
        return _respond(connection, status, body, "application/json")

    def _metrics_response(self, connection: ServerConnection) -> Response:
        """`/metrics`: the Prometheus text format (404 when the server has no metrics)."""
        if self._metrics is None:
            return connection.respond(HTTPStatus.NOT_FOUND, "no metrics in this process\n")
        body, content_type = self._metrics.render()
        return _respond(connection, HTTPStatus.OK, body, content_type)

    def _public_url(self, request: Request) -> str:
        base = self.settings.server.public_url
        if base is None:
            base = "wss://" + request.headers.get("Host", "")
        return base.rstrip("/") + request.path

    # ------------------------------------------------------------------ a call

    async def _handle(self, ws: ServerConnection) -> None:
        """A connection: admitted while few are waiting for their start and its address
        has few open; it takes a call slot only once its start (and token) arrived, so
        sockets that never start cannot hold the calls' slots."""
        path = urlsplit(ws.request.path if ws.request else "").path
        headers = ws.request.headers if ws.request else None
        peer = client_address(
            _peer_address(ws),
            ",".join(headers.get_all("X-Forwarded-For")) if headers is not None else None,
            self.settings.server.trusted_proxies,
        )
        capped = peer if peer is not None and not is_loopback(peer) else None
        open_here = self._per_address[capped] if capped else 0
        why = refusal(self.settings.server, self.waiting, capped, open_here)
        if why:
            await self._close(ws, path, None, CloseCode.TRY_AGAIN_LATER, why)
            return
        if capped:
            self._per_address[capped] += 1
        try:
            await self._run_call(ws, path)
        finally:
            if capped:
                self._per_address[capped] -= 1
                if not self._per_address[capped]:
                    del self._per_address[capped]

    def _new_codec(self, path: str) -> Codec:
        if path == PCM_PATH:
            return PcmCodec()
        auth = self.settings.auth
        if self._call_tokens is not None:
            return TwilioCodec(call_tokens=self._call_tokens)
        token = None
        if auth.twilio_auth_token is None and auth.twilio_stream_token is not None:
            token = auth.twilio_stream_token.get_secret_value()
        return TwilioCodec(expected_token=token)

    async def _run_call(self, ws: ServerConnection, path: str) -> None:
        codec = self._new_codec(path)
        self.waiting += 1
        try:
            call = await asyncio.wait_for(
                self._await_start(ws, codec), self.settings.server.start_timeout_s
            )
        except TimeoutError:
            await self._close(ws, path, None, CloseCode.OUT_OF_ORDER, "no start message in time")
            return
        except ProtocolError as exc:
            await self._close(ws, path, None, exc.code, exc.reason)
            return
        except ConnectionClosed:
            await self._close(ws, path, None, CloseCode.GOING_AWAY, "connection lost")
            return
        finally:
            self.waiting -= 1
            self._ended.set()
        if call is None:  # stop before start: nothing to do
            await self._close(ws, path, None, CloseCode.NORMAL, "stopped before start")
            return
        if self.stopping:
            why = "this worker is draining; call again"
            await self._close(ws, path, call.call_id, CloseCode.TRY_AGAIN_LATER, why)
            return
        max_calls = self.settings.server.max_calls
        if self.active_calls >= max_calls:
            why = f"server at capacity ({max_calls} calls); try again later"
            await self._close(ws, path, call.call_id, CloseCode.TRY_AGAIN_LATER, why)
            return
        self.active_calls += 1
        try:
            code, reason = await self._converse(ws, codec, call)
        finally:
            self.active_calls -= 1
            self._ended.set()
        await self._close(ws, path, call.call_id, code, reason)

    async def _await_start(self, ws: ServerConnection, codec: Codec) -> CallStarted | None:
        async for message in ws:
            for event in codec.feed(message):
                if isinstance(event, CallStarted):
                    return event
                if isinstance(event, CallStopped):
                    return None
        raise ConnectionClosed(None, None)

    async def _converse(
        self, ws: ServerConnection, codec: Codec, call: CallStarted
    ) -> tuple[int, str]:
        timeout_s = self.settings.server.slow_consumer_timeout_s

        async def send(event: OutboundEvent) -> None:
            try:
                await asyncio.wait_for(ws.send(codec.encode(event)), timeout_s)
            except TimeoutError:
                raise ProtocolError(
                    CloseCode.SLOW_CONSUMER, f"peer stopped reading for {timeout_s:g} s"
                ) from None

        player = AudioPlayer(send, codec.wire_rate_hz, self._clock)
        inbound = Inbound()
        session = self._factory()
        reader = asyncio.create_task(self._read(ws, codec, player, inbound), name="reader")
        pacer = asyncio.create_task(player.run(), name="player")
        talker = asyncio.create_task(session.run(call, inbound, player), name="session")
        try:
            done, _ = await asyncio.wait(
                {reader, pacer, talker}, return_when=asyncio.FIRST_COMPLETED
            )
            if reader in done and reader.exception() is None:
                # The caller hung up: let the session wind down, then stop it.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(talker), HANGUP_GRACE_S)
                return CloseCode.NORMAL, "call ended by the caller"
            for task in (reader, pacer, talker):
                if task in done and (exc := task.exception()) is not None:
                    return self._close_for(exc, call)
            return CloseCode.NORMAL, "call ended"
        finally:
            player.close()
            for task in (reader, pacer, talker):
                task.cancel()
            await asyncio.gather(reader, pacer, talker, return_exceptions=True)

    @staticmethod
    def _close_for(exc: BaseException, call: CallStarted) -> tuple[int, str]:
        if isinstance(exc, ProtocolError):
            return exc.code, exc.reason
        if isinstance(exc, ConnectionClosed):
            return CloseCode.GOING_AWAY, "connection lost"
        log.error("call %s failed", call.call_id, exc_info=exc)
        return CloseCode.INTERNAL_ERROR, f"internal error: {type(exc).__name__}"

    async def _read(
        self, ws: ServerConnection, codec: Codec, player: AudioPlayer, inbound: Inbound
    ) -> None:
        """Feed the codec until the caller stops or the socket closes; then end `inbound`.
        Raises ProtocolError(TOO_FAST) when the caller's audio runs more than
        `AUDIO_AHEAD_S` ahead of the wall clock: a phone line delivers it in real time, a
        flood of it would only starve the other calls' recognition."""
        pace = RealTimePace(self._clock.now())
        try:
            async for message in ws:
                for event in codec.feed(message):
                    if isinstance(event, MarkReceived):
                        player.on_mark(event.name)
                    if isinstance(event, AudioReceived):
                        pace.add(len(event.samples) / event.sample_rate_hz, self._clock.now())
                    await inbound.put(event)
                if codec.stopped:
                    break
        except ConnectionClosed:
            pass
        await inbound.end()

    async def _close(
        self, ws: ServerConnection, path: str, call_id: str | None, code: int, reason: str
    ) -> None:
        """Close with `code` and record the call. When the peer or the websocket library
        closed first (the peer's close frame, 1009 too big, 1007 invalid UTF-8, a dropped
        TCP connection), what actually happened on the wire is recorded instead."""
        if ws.protocol.state is State.OPEN:
            try:
                await asyncio.wait_for(ws.close(code, reason), CLOSE_TIMEOUT_S)
            except TimeoutError:
                log.warning("%s call %s: close not sent in %g s; connection aborted",
                            path, call_id, CLOSE_TIMEOUT_S)  # fmt: skip
                ws.transport.abort()
        else:
            wire_code, wire_reason = _closed_with(ws)
            if wire_code != code:
                code, reason = wire_code, wire_reason
        if code != CloseCode.NORMAL:
            log.warning("closed %s call %s: %s (%d)", path, call_id, reason, code)
        if self._metrics is not None:
            self._metrics.call_closed(path, int(code))
        self.calls.append(CallRecord(path, call_id, int(code), reason))


def _respond(
    connection: ServerConnection, status: HTTPStatus, body: bytes, content_type: str
) -> Response:
    """An HTTP answer with `body` as `content_type` (websockets' `respond` makes text/plain;
    its Headers append on assignment, so the two headers are replaced, not doubled)."""
    response = connection.respond(status, "")
    response.body = body
    for name, value in (("Content-Type", content_type), ("Content-Length", str(len(body)))):
        del response.headers[name]
        response.headers[name] = value
    return response


def _closed_with(ws: ServerConnection) -> tuple[int, str]:
    """How a connection the websocket library closed ended: the close frame we sent (our
    reply to the peer's close echoes its code; a failure such as 1009 or 1007 is only
    sent, the peer's answer is not awaited), else the one received, else 1006."""
    close = ws.protocol.close_sent or ws.protocol.close_rcvd
    if close is None:
        return ABNORMAL_CLOSURE, "connection lost"
    return close.code, close.reason
