"""A bounded, never-blocking MQTT publisher with reconnect (aiomqtt).

    publisher = MqttPublisher(BrokerAddress.parse("mqtt://127.0.0.1:1883"), PublisherConfig())
    await publisher.start()
    publisher.publish(message)      # plain call: returns at once, whatever the broker does
    ...
    await publisher.close()

`publish` only appends to a bounded buffer; one background task takes messages from it
in order and publishes them, one at a time, waiting for the broker's acknowledgement
(QoS 1) or the socket write (QoS 0). What happens to a message (`PublisherStats`):

- broker reachable: it is **delivered** (counted when acknowledged / written);
- broker absent, restarting, or the connection drops: messages **wait in the buffer**
  and are delivered in order after the publisher reconnects (it retries with backoff
  from `reconnect_min_s` to `reconnect_max_s`). A message in flight when the connection
  dropped goes back to the head of the buffer and is sent again: at least once, so a
  QoS-1 subscriber may see it twice if the broker had it but the ack was lost;
- buffer full (`buffer_size` messages waiting): the **oldest** waiting message is
  dropped and counted in `dropped` — the newest events matter most to a live view;
- `close()`: messages still waiting after `close_timeout_s` are counted as dropped;
- a message that cannot be sent for a reason of its own (a topic or payload the client
  refuses, say a lone surrogate in a topic) is **dropped** at once and counted in
  `dropped` and `unsendable`, never retried: retrying it would stall every message
  behind it.

A QoS-0 message written to a socket that the broker has just abandoned, before the
client notices, is lost uncounted (that is what QoS 0 means); the events that matter
are published with QoS 1 (`topics`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import ssl
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiomqtt

from voice_agent.telemetry.topics import Message

log = logging.getLogger(__name__)

DEFAULT_PORT = 1883
TLS_PORT = 8883


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    """Where the broker is and how to log in: `mqtt://` in the clear, `mqtts://` over TLS
    (the server's certificate checked against the system's CAs, or `ca_file`). The
    credentials never come from the URL (URLs end up in logs)."""

    host: str
    port: int = DEFAULT_PORT
    tls: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_file: Path | None = None

    @classmethod
    def parse(cls, url: str, username: str | None = None, password: str | None = None,
              ca_file: Path | None = None) -> BrokerAddress:  # fmt: skip
        """`mqtt://HOST[:PORT]` or `mqtts://HOST[:PORT]`. Raises ValueError for anything
        else, credentials in the URL included."""
        parts = urlsplit(url)
        if parts.scheme not in ("mqtt", "mqtts") or not parts.hostname:
            raise ValueError(f"broker URL must be mqtt[s]://HOST[:PORT], got {url!r}")
        if parts.path not in ("", "/") or parts.query or parts.username:
            raise ValueError(
                f"broker URL takes only a host and a port (credentials go in [telemetry] "
                f"username and password): {parts.scheme}://{parts.hostname}..."
            )
        tls = parts.scheme == "mqtts"
        try:
            port = parts.port or (TLS_PORT if tls else DEFAULT_PORT)
        except ValueError:
            raise ValueError(f"bad port in broker URL {url!r}") from None
        if ca_file is not None and not tls:
            raise ValueError("a CA file is for mqtts:// brokers only")
        if password is not None and username is None:
            raise ValueError("a broker password needs a username")
        return cls(parts.hostname, port, tls, username, password, ca_file)

    def tls_context(self) -> ssl.SSLContext | None:
        """For mqtts://: the system's CAs, or only `ca_file`'s; host names checked."""
        if not self.tls:
            return None
        return ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)

    def client(self, **options: Any) -> aiomqtt.Client:
        """An aiomqtt client for this broker (`options`: identifier, will, timeouts)."""
        return aiomqtt.Client(self.host, self.port, username=self.username,
                              password=self.password, tls_context=self.tls_context(),
                              **options)  # fmt: skip


@dataclass(frozen=True, slots=True)
class PublisherConfig:
    buffer_size: int = 1000
    """Messages that may wait for the broker; beyond it the oldest is dropped."""
    reconnect_min_s: float = 0.2
    reconnect_max_s: float = 5.0
    """Backoff between connection attempts doubles from min to max."""
    connect_timeout_s: float = 3.0
    ack_timeout_s: float = 10.0
    """A publication not acknowledged by then counts as a dropped connection."""
    close_timeout_s: float = 2.0
    """At `close()`, how long waiting messages may take to go out."""
    keepalive_s: int = 10
    """MQTT keepalive; a silent broker is noticed within about 1.5 of it."""


@dataclass(frozen=True, slots=True)
class PublisherStats:
    accepted: int
    """`publish` calls."""
    delivered: int
    dropped: int
    waiting: int
    """In the buffer or in flight."""
    connected: bool
    connections: int
    """Successful connections so far (reconnects = connections - 1)."""
    unsendable: int = 0
    """Messages dropped because the client refused them (not a network fault)."""


class MqttPublisher:
    """Publishes `Message`s from a bounded buffer in a background task. Use from one
    event loop; `publish` never blocks and never raises for broker trouble."""

    def __init__(
        self,
        broker: BrokerAddress,
        config: PublisherConfig | None = None,
        *,
        will: Message | None = None,
        on_connect: Message | None = None,
        on_close: Message | None = None,
        client_id: str | None = None,
    ) -> None:
        """`will`: the broker publishes it if this client vanishes; `on_connect`: sent
        first on every connection (e.g. a retained "online"); `on_close`: sent last by
        a clean `close()` (e.g. "offline")."""
        self.broker = broker
        self.config = config or PublisherConfig()
        self._will = will
        self._on_connect = on_connect
        self._on_close = on_close
        self._client_id = client_id or f"voice-agent-{uuid.uuid4().hex[:12]}"
        self._buffer: collections.deque[Message] = collections.deque()
        self._inflight: Message | None = None
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._accepted = self._delivered = self._dropped = self._connections = 0
        self._unsendable = 0
        self._connected = False

    @property
    def stats(self) -> PublisherStats:
        waiting = len(self._buffer) + (self._inflight is not None)
        return PublisherStats(self._accepted, self._delivered, self._dropped, waiting,
                              self._connected, self._connections, self._unsendable)  # fmt: skip

    def publish(self, message: Message) -> None:
        """Queue `message`; returns at once. When `buffer_size` messages already wait,
        the oldest is dropped (counted). After `close()` the message is dropped."""
        self._accepted += 1
        if self._closing:
            self._dropped += 1
            return
        if len(self._buffer) >= self.config.buffer_size:
            self._buffer.popleft()
            self._dropped += 1
        self._buffer.append(message)
        self._wakeup.set()

    async def start(self) -> None:
        """Start the background task (it connects by itself; nothing here waits on the
        broker)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="mqtt-publisher")

    async def close(self) -> None:
        """Give waiting messages `close_timeout_s` to go out (then `on_close`), stop,
        and count what is left as dropped."""
        if self._task is None or self._closing:
            return
        if self._on_close is not None:
            self.publish(self._on_close)
        self._closing = True
        self._wakeup.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._task), self.config.close_timeout_s)
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        left = len(self._buffer) + (self._inflight is not None)
        self._dropped += left
        self._buffer.clear()
        self._inflight = None

    async def wait_idle(self, timeout_s: float) -> bool:
        """Wait until nothing is waiting (True) or `timeout_s` passes (False); for tests
        and shutdown."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout_s
        while self.stats.waiting:
            if loop.time() >= end:
                return False
            await asyncio.sleep(0.01)
        return True

    # ------------------------------------------------------------------ the task

    async def _run(self) -> None:
        backoff_s = self.config.reconnect_min_s
        while True:
            try:
                async with self._client() as client:
                    self._connected = True
                    self._connections += 1
                    backoff_s = self.config.reconnect_min_s
                    log.info("telemetry: connected to %s:%d", self.broker.host, self.broker.port)
                    if self._on_connect is not None:
                        await self._send(client, self._on_connect)
                    if await self._pump(client):
                        return
            except aiomqtt.MqttError as exc:
                if self._closing and not self._buffer and self._inflight is None:
                    return
                log.info("telemetry: broker %s:%d unavailable (%s); retrying in %.1f s",
                         self.broker.host, self.broker.port, exc, backoff_s)  # fmt: skip
            except Exception:  # a bug here must not end telemetry for the process
                log.exception("telemetry: publisher failed; retrying in %.1f s", backoff_s)
            finally:
                self._connected = False
            if self._closing and self._inflight is None and not self._buffer:
                return
            await asyncio.sleep(backoff_s)
            backoff_s = min(2 * backoff_s, self.config.reconnect_max_s)

    def _client(self) -> aiomqtt.Client:
        will = None
        if self._will is not None:
            w = self._will
            will = aiomqtt.Will(w.topic, w.payload, w.qos, w.retain)
        return self.broker.client(
            identifier=self._client_id,
            will=will,
            timeout=self.config.connect_timeout_s,
            keepalive=self.config.keepalive_s,
        )

    async def _pump(self, client: aiomqtt.Client) -> bool:
        """Publish until the connection drops (raises MqttError) or, closing, the buffer
        is empty (returns True)."""
        dropped = asyncio.create_task(_disconnected(client))
        try:
            while True:
                if not self._buffer:
                    if self._closing:
                        return True
                    self._wakeup.clear()
                    await _first(self._wakeup.wait(), dropped)
                    continue
                self._inflight = message = self._buffer.popleft()
                try:
                    await _first(self._send(client, message), dropped)
                except (aiomqtt.MqttError, OSError, asyncio.CancelledError):
                    self._requeue(message)
                    raise
                except Exception as exc:  # the message itself: drop it, go on
                    self._inflight = None
                    self._dropped += 1
                    self._unsendable += 1
                    log.warning("telemetry: dropped an unsendable message on %r: %s",
                                message.topic.encode("ascii", "backslashreplace"), exc)  # fmt: skip
                    continue
                self._inflight = None
                self._delivered += 1
        finally:
            dropped.cancel()
            await asyncio.gather(dropped, return_exceptions=True)

    async def _send(self, client: aiomqtt.Client, m: Message) -> None:
        await client.publish(m.topic, m.payload, m.qos, m.retain, timeout=self.config.ack_timeout_s)

    def _requeue(self, message: Message) -> None:
        """Put the in-flight message back at the head (dropped if the buffer filled)."""
        self._inflight = None
        if len(self._buffer) < self.config.buffer_size:
            self._buffer.appendleft(message)
        else:
            self._dropped += 1


async def _disconnected(client: aiomqtt.Client) -> None:
    """Returns never; raises MqttError when the connection drops (the client's message
    iterator ends with the disconnection)."""
    async for _ in client.messages:
        pass
    raise aiomqtt.MqttError("disconnected")


async def _first(work: Coroutine[Any, Any, Any], dropped: asyncio.Task[None]) -> None:
    """Await `work` unless the connection drops first (then MqttError)."""
    task = asyncio.ensure_future(work)
    try:
        await asyncio.wait({task, dropped}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if task.done():
        task.result()
        return
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    dropped.result()  # raises the disconnection
    raise aiomqtt.MqttError("disconnected")
