"""The call simulator against a hand-written loopback server: a reply whose first frame
arrives alone, after a long silence, is waited for and heard whole."""

from __future__ import annotations

import asyncio
import base64
import json

import numpy as np
import pytest
from websockets.asyncio.server import ServerConnection, serve

from voice_agent.audio import pcm16_to_ulaw
from voice_agent.simulator import simulate_call

pytestmark = [pytest.mark.integration, pytest.mark.timeout(30)]

RATE_HZ = 8000
FRAME = 160


def media(sid: str, samples: np.ndarray) -> str:
    payload = base64.b64encode(pcm16_to_ulaw(samples)).decode()
    return json.dumps({"event": "media", "streamSid": sid, "media": {"payload": payload}})


async def test_a_reply_whose_first_frame_comes_alone_is_heard_whole() -> None:
    tone = (8000 * np.sin(np.arange(FRAME) * 0.3)).astype(np.int16)

    async def answer(ws: ServerConnection) -> None:
        sid, sent = "", False
        async for message in ws:
            event = json.loads(message)
            if event["event"] == "start":
                sid = event["streamSid"]
            # After the caller's speech and a long silence: one frame, a pause, then more.
            elif event["event"] == "media" and int(event["media"]["chunk"]) == 90 and not sent:
                sent = True
                await ws.send(media(sid, tone))
                await asyncio.sleep(0.2)
                await ws.send(media(sid, np.tile(tone, 25)))  # 500 ms more

    caller = np.concatenate([np.tile(tone, 20), np.zeros(40 * FRAME, np.int16)])  # 0.4 s + 0.8 s
    async with serve(answer, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        summary, _ = await simulate_call(
            f"ws://127.0.0.1:{port}/twilio", caller, RATE_HZ,
            idle_after_reply_s=1.0, max_tail_s=5.0,
        )  # fmt: skip
    assert summary.frames_played == 26  # the lone first frame and the 25 after it
