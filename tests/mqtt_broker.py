"""A real mosquitto broker on 127.0.0.1 for tests (`scripts.services.Broker`: a free port,
a config file in a temp folder, stop and restart on the same port)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts.services import MOSQUITTO, Broker, free_port

__all__ = ["Broker", "broker", "free_port"]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    if not Path(MOSQUITTO).exists():
        pytest.skip("mosquitto is not installed (Debian package `mosquitto`)")
    b = Broker(tmp_path)
    b.start()
    yield b
    b.stop()
