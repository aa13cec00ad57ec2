"""Live call events over MQTT: the topic tree (`topics`), the call events (`calls`) and
the bounded, never-blocking publisher (`publisher`, which needs aiomqtt)."""

from voice_agent.telemetry.calls import CallTelemetry, Sink
from voice_agent.telemetry.topics import EventKind, Message, NodeState

__all__ = ["CallTelemetry", "EventKind", "Message", "NodeState", "Sink"]
