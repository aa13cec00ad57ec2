"""Telemetry to a broker that wants a login, and to one that speaks only TLS: real
mosquitto brokers on loopback (a password file; a certificate made for 127.0.0.1). The
right login and CA deliver; a wrong one, an anonymous client or an unverified
certificate never connect, and the publisher still never blocks the caller."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiomqtt
import pytest

from scripts.services import MOSQUITTO, Broker
from voice_agent.config import ConfigError, load_settings
from voice_agent.telemetry.publisher import BrokerAddress, MqttPublisher, PublisherConfig
from voice_agent.telemetry.topics import Message

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not Path(MOSQUITTO).exists(), reason="mosquitto is not installed"),
]

FAST = PublisherConfig(buffer_size=10, reconnect_min_s=0.05, reconnect_max_s=0.2,
                       connect_timeout_s=2.0, close_timeout_s=0.5)  # fmt: skip
WAIT_S = 10.0
TOPIC = "voice-agent/n1/status"


async def received(address: BrokerAddress) -> bool:
    """Publish one message through a publisher for `address` and read it back with a
    subscriber logged in the same way: did it arrive, acknowledged?"""
    async with address.client(identifier="reader", timeout=3.0) as reader:
        await reader.subscribe("voice-agent/#", qos=1)
        pub = MqttPublisher(address, FAST)
        await pub.start()
        pub.publish(Message(TOPIC, b"{}", 1))
        try:
            async with asyncio.timeout(WAIT_S):
                async for message in reader.messages:
                    if message.topic.value == TOPIC:
                        break
        except TimeoutError:
            return False
        finally:
            assert await pub.wait_idle(WAIT_S)
            await pub.close()
        return pub.stats.delivered == 1


@pytest.fixture
def login_broker(tmp_path: Path) -> Broker:
    broker = Broker(tmp_path, users={"agent": "s3cret"})
    broker.start()
    yield broker  # type: ignore[misc]
    broker.stop()


async def test_a_broker_that_wants_a_login_gets_it_and_refuses_the_rest(
    login_broker: Broker,
) -> None:
    good = BrokerAddress.parse(login_broker.url, "agent", "s3cret")
    assert await received(good)
    anonymous = BrokerAddress.parse(login_broker.url)
    with pytest.raises(aiomqtt.MqttError):
        async with anonymous.client(timeout=2.0):
            pass
    wrong = BrokerAddress.parse(login_broker.url, "agent", "guess")
    pub = MqttPublisher(wrong, FAST)
    await pub.start()
    pub.publish(Message(TOPIC, b"{}", 1))  # never blocks, never raises
    await asyncio.sleep(1.0)
    assert not pub.stats.connected and pub.stats.delivered == 0
    await pub.close()


async def test_a_tls_broker_is_reached_with_its_ca_and_not_without(tmp_path: Path) -> None:
    broker = Broker(tmp_path, users={"agent": "s3cret"}, tls=True)
    broker.start()
    try:
        assert broker.url.startswith("mqtts://") and broker.ca_file is not None
        good = BrokerAddress.parse(broker.url, "agent", "s3cret", broker.ca_file)
        assert good.tls and good.port == broker.port
        assert await received(good)
        unverified = BrokerAddress.parse(broker.url, "agent", "s3cret")  # system CAs only
        with pytest.raises(aiomqtt.MqttError):
            async with unverified.client(timeout=2.0):
                pass
        clear = BrokerAddress.parse(broker.url.replace("mqtts", "mqtt"), "agent", "s3cret")
        with pytest.raises(aiomqtt.MqttError):
            async with clear.client(timeout=2.0):
                pass
    finally:
        broker.stop()


def test_broker_settings_are_checked_before_anything_connects(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="credentials go in"):
        BrokerAddress.parse("mqtt://agent:s3cret@127.0.0.1")
    with pytest.raises(ValueError, match="mqtts:// brokers only"):
        BrokerAddress.parse("mqtt://127.0.0.1", ca_file=tmp_path / "ca.pem")
    with pytest.raises(ValueError, match="needs a username"):
        BrokerAddress.parse("mqtt://127.0.0.1", password="s3cret")
    assert BrokerAddress.parse("mqtts://broker.example").port == 8883
    assert "s3cret" not in repr(BrokerAddress.parse("mqtt://h", "agent", "s3cret"))
    with pytest.raises(ConfigError):
        load_settings(telemetry={"broker_url": "http://127.0.0.1"})
    cfg = load_settings(telemetry={"broker_url": "mqtts://h", "username": "agent",
                                   "password": "s3cret"}).telemetry  # fmt: skip
    assert cfg.password is not None and "s3cret" not in repr(cfg)
