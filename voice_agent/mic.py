"""`voice-agent mic`: talk to the agent through this machine's microphone and speakers,
or headless from a WAV file (`--input-wav caller.wav --output-wav reply.wav`).

Both feed the same `PipelineSession` as a phone call (`voice_agent.transports.local`).
Headless, the caller's file streams at real-time pace (the session times turns against
the clock, so a faster feed would distort every latency), followed by silence until the
agent has answered the last turn; the reply WAV holds what the agent said on the input's
timeline, and the conversation and per-turn latency table are printed as the demo does.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

from voice_agent.audio import ASR_RATE_HZ, FRAME_MS, PHONE_RATE_HZ, resample
from voice_agent.clock import MonotonicClock
from voice_agent.config import Settings
from voice_agent.demo import call_report
from voice_agent.dialogue.phrases import phrases
from voice_agent.events import Pcm16
from voice_agent.pipeline import Pipeline, PipelineSession
from voice_agent.simulator import caller_turn_ends_ms, first_reply_ms
from voice_agent.transports.local import LocalCall, Recording, headless
from voice_agent.wav import WavError, read_wav, write_wav

EXIT_USAGE = 2
EXIT_FAILED = 1
HEADLESS_RATE_HZ = ASR_RATE_HZ
"""Headless input is resampled to this rate and the reply WAV is written at it."""
MIN_INPUT_RATE_HZ = PHONE_RATE_HZ
HANG_UP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass(frozen=True, slots=True)
class MicOptions:
    input_wav: Path | None = None
    output_wav: Path | None = None
    max_tail_s: float = 15.0
    """Headless: longest wait for the agent after the caller's audio ends."""


class UsageError(ValueError):
    """Bad arguments or input file: exit 2 with this one-line message."""


def _fail(message: str, code: int) -> int:
    print(f"voice-agent mic: {message}", file=sys.stderr)
    return code


async def run_mic(settings: Settings, options: MicOptions) -> int:
    """The `mic` command; returns the exit status (2: bad input or no audio device,
    1: the pipeline failed)."""
    from voice_agent.transports.sound import NoAudioDevice

    try:
        if options.input_wav is not None or options.output_wav is not None:
            return await _run_headless(settings, options, _headless_input(options))
        return await _run_devices(settings)
    except (UsageError, NoAudioDevice) as exc:
        return _fail(str(exc), EXIT_USAGE)
    except (OSError, ValueError, RuntimeError) as exc:
        return _fail(str(exc), EXIT_FAILED)


def _headless_input(options: MicOptions) -> Pcm16:
    if options.input_wav is None or options.output_wav is None:
        raise UsageError("headless runs need both --input-wav and --output-wav")
    if options.max_tail_s <= 0:
        raise UsageError("--max-tail-s must be positive")
    try:
        samples, rate = read_wav(options.input_wav)
    except WavError as exc:
        raise UsageError(str(exc)) from None
    if rate < MIN_INPUT_RATE_HZ:
        raise UsageError(f"{options.input_wav}: {rate} Hz is below {MIN_INPUT_RATE_HZ} Hz")
    return resample(samples, rate, HEADLESS_RATE_HZ)


async def _run_headless(settings: Settings, options: MicOptions, caller: Pcm16) -> int:
    assert options.output_wav is not None
    rate = HEADLESS_RATE_HZ
    ends_ms = caller_turn_ends_ms(resample(caller, rate, PHONE_RATE_HZ))
    recording = Recording(rate)
    async with _started(settings, rate) as pipeline:
        session = pipeline.new_session()
        call = LocalCall(rate, rate, MonotonicClock())
        line = headless(call, caller, recording, last_turn_end_ms=max(ends_ms, default=0),
                        max_tail_s=options.max_tail_s)  # fmt: skip
        await call.run(session, line)
    write_wav(options.output_wav, recording.audio(), rate)
    _print_call(session, first_reply_ms(ends_ms, recording.frames))
    seconds = len(recording.frames) * FRAME_MS / 1000
    print(f"voice-agent mic: what the agent said in {options.output_wav} ({seconds:.1f} s at "
          f"{rate} Hz, aligned with {options.input_wav}); turn records in "
          f"{settings.pipeline.records}", file=sys.stderr)  # fmt: skip
    return 0


async def _run_devices(settings: Settings) -> int:
    from voice_agent.transports.sound import default_devices, device_line, import_sounddevice

    sd = import_sounddevice()
    devices = default_devices(sd)  # before minutes of model loading
    async with _started(settings, devices.output_rate_hz) as pipeline:
        session = pipeline.new_session()
        call = LocalCall(devices.input_rate_hz, devices.output_rate_hz, MonotonicClock())
        print(f"voice-agent mic: listening on {devices.input_name!r} and speaking on "
              f"{devices.output_name!r}; Ctrl-C hangs up", file=sys.stderr)  # fmt: skip
        talk = asyncio.ensure_future(call.run(session, device_line(sd, call, devices)))
        remove = _hang_up_on_signals(talk)
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await talk
        finally:
            remove()
    _print_call(session, [])
    return 0


def _hang_up_on_signals(talk: asyncio.Future[None]) -> Callable[[], None]:
    """Ctrl-C or SIGTERM ends the call (it is then printed); a second one gets the signal's
    default action. On the loop rather than left to `asyncio.run`, which handles only
    SIGINT and only when SIGINT has its default handler: a command started in the
    background by a non-interactive shell inherits SIGINT ignored. Returns the remover."""
    loop = asyncio.get_running_loop()

    def remove() -> None:
        for s in HANG_UP_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(s)

    def received() -> None:
        remove()
        talk.cancel()

    for s in HANG_UP_SIGNALS:
        with contextlib.suppress(NotImplementedError):  # loops without signal support
            loop.add_signal_handler(s, received)
    return remove


@contextlib.asynccontextmanager
async def _started(settings: Settings, out_rate_hz: int) -> AsyncIterator[Pipeline]:
    print("voice-agent: loading the models...", file=sys.stderr, flush=True)
    async with Pipeline(settings) as pipeline:
        # The filler plays at a turn's deadline: it must not wait on synthesis then.
        await pipeline.phrase_cache(out_rate_hz).warm_async(phrases().all())
        yield pipeline


def _print_call(session: PipelineSession, heard_ms: list[int | None]) -> None:
    print("\n".join(call_report(session.greeting, session.turns, heard_ms)))
