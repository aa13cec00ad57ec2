"""`voice-agent`: serve, call (the simulator), twiml, mic, demo, report."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import json
import logging
import signal
import sys
from pathlib import Path

from websockets.exceptions import InvalidHandshake, InvalidURI

from voice_agent.config import ConfigError, Settings, load_settings
from voice_agent.transports.call import SessionFactory
from voice_agent.transports.server import PCM_PATH, TWILIO_PATH, VoiceServer

EXIT_USAGE = 2
EXIT_FAILED = 1
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""Either stops `serve` cleanly: no new calls, those in progress may finish for up to
`[server] drain_timeout_s`, then they are closed with 1001 and the pipeline is closed
(turn records, the shop). A second one stops the draining; a third gets the default
action."""


def _params(values: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"--param expects KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="voice-agent", description=__doc__)
    p.add_argument("--config", type=Path, help="TOML settings file")
    p.add_argument("-v", "--verbose", action="store_true")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="serve the /twilio and /pcm websocket endpoints")
    s.add_argument("--host")
    s.add_argument("--port", type=int)
    s.add_argument("--max-calls", type=int)
    s.add_argument("--records", type=Path, help="append one JSON line per turn to this file")
    s.add_argument("--shop-db", type=Path, help="the bike shop's SQLite file")
    s.add_argument(
        "--echo", action="store_true", help="answer with the echo stand-in (no models loaded)"
    )
    s.add_argument(
        "--insecure", action="store_true", default=None,
        help="serve a non-loopback address with an endpoint that has no auth (lab use)",
    )  # fmt: skip
    s.add_argument(
        "--no-pcm", dest="pcm_enabled", action="store_false", default=None,
        help="switch /pcm off (it answers 404)",
    )  # fmt: skip

    c = sub.add_parser("call", help="simulate a Twilio call against a server")
    c.add_argument("url", help="ws://HOST:PORT/twilio")
    c.add_argument("--wav", type=Path, required=True, help="caller audio (any PCM WAV)")
    c.add_argument("--out", type=Path, required=True, help="where to write the reply WAV")
    c.add_argument("--token", help="sent as the `token` custom parameter")
    c.add_argument("--param", action="append", default=[], metavar="KEY=VALUE")
    c.add_argument(
        "--max-tail-s",
        type=float,
        default=15.0,
        help="longest wait for replies after the caller's audio ends",
    )

    t = sub.add_parser("twiml", help="print the TwiML <Connect><Stream> snippet")
    t.add_argument("--url", required=True, help="wss://your.host/twilio")
    t.add_argument("--param", action="append", default=[], metavar="KEY=VALUE")
    t.add_argument(
        "--call-sid",
        help="mint a per-call token for this CallSid (needs auth.twilio_call_token_secret; "
        "run it from the webhook that answers the call)",
    )
    t.add_argument("--caller", default="", help="the caller's number (From), bound into the token")
    t.add_argument("--ttl-s", type=int, default=300, help="the token's lifetime in seconds")

    r = sub.add_parser(
        "report",
        help="latency budget report from turn records, or a live view from an MQTT broker",
    )
    r.add_argument("records", nargs="*", type=Path, help="turn-record JSONL files, one per run")
    r.add_argument("--out", type=Path, default=Path("out/report"), help="report folder")
    r.add_argument(
        "--label", action="append", default=[], help="a run's name, once per file, in order"
    )
    r.add_argument("--mqtt", metavar="URL", help="mqtt://HOST[:PORT]: live rolling summary")
    r.add_argument("--window", type=int, default=200, help="live view: turns summarized")
    r.add_argument("--refresh-s", type=float, default=1.0, help="live view: redraw interval")
    r.add_argument("--duration-s", type=float, help="live view: stop after this long")

    m = sub.add_parser(
        "mic", help="talk to the agent on this machine's microphone and speakers, or headless"
    )
    m.add_argument("--input-wav", type=Path, help="headless: the caller's audio (PCM WAV)")
    m.add_argument("--output-wav", type=Path, help="headless: where to write the agent's audio")
    m.add_argument(
        "--max-tail-s",
        type=float,
        default=15.0,
        help="headless: longest wait for the agent after the caller's audio ends",
    )
    m.add_argument("--records", type=Path, help="append one JSON line per turn to this file")
    m.add_argument("--shop-db", type=Path, help="the bike shop's SQLite file")

    w = sub.add_parser("deploy", help="write the fleet's nginx file and systemd unit (see deploy/)")
    w.add_argument("action", choices=["write"], help="write the files under OUT")
    w.add_argument("out", type=Path, help="folder (deploy/ holds the shipped examples)")
    w.add_argument(
        "--worker", action="append", default=[], metavar="HOST:PORT",
        help="a worker behind nginx, once per worker (default 127.0.0.1:8081 and :8082)",
    )  # fmt: skip
    w.add_argument("--listen", default="8080", help="nginx's listen: PORT or ADDRESS:PORT")
    w.add_argument("--drain-timeout-s", type=float, default=30.0,
                   help="the workers' drain time; systemd waits this plus a margin")  # fmt: skip

    d = sub.add_parser("demo", help="the end-to-end demo call on loopback")
    d.add_argument("--out-dir", type=Path, default=Path("out"))
    d.add_argument(
        "--echo", action="store_true", help="answer with the echo stand-in (no models loaded)"
    )
    return p


def _stacks_on_sigusr1() -> None:
    """`kill -USR1 PID` prints every thread's stack to stderr (for a process that does not
    stop); not where stderr is no file (main called in-process under a capture)."""
    if not hasattr(signal, "SIGUSR1"):
        return
    with contextlib.suppress(AttributeError, OSError, ValueError):  # no fileno: OSError
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _stacks_on_sigusr1()
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        if args.command == "twiml":
            return _twiml(args, load_settings(args.config) if args.call_sid else None)
        if args.command == "report":
            return _report(args)
        if args.command == "deploy":
            return _deploy(args)
        overrides = {}
        if args.command == "serve":
            overrides["server"] = {
                "host": args.host,
                "port": args.port,
                "max_calls": args.max_calls,
                "insecure": args.insecure,
                "pcm_enabled": args.pcm_enabled,
            }
        if args.command in ("serve", "mic"):
            overrides["pipeline"] = {"records": args.records, "shop_db": args.shop_db}
        settings = load_settings(args.config, **overrides)
        if args.command == "serve":
            return asyncio.run(_serve(settings, echo=args.echo))
        if args.command == "call":
            return asyncio.run(_call(args))
        if args.command == "mic":
            return _mic(settings, args)
        return asyncio.run(_demo(settings, args.out_dir, echo=args.echo))
    except ConfigError as exc:
        print(f"voice-agent: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except argparse.ArgumentTypeError as exc:
        print(f"voice-agent: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 0


def _twiml(args: argparse.Namespace, settings: Settings | None) -> int:
    import time

    from voice_agent.transports.auth import call_token
    from voice_agent.transports.call import CALLER_PARAMETER
    from voice_agent.transports.twilio import TOKEN_PARAMETER
    from voice_agent.twiml import twiml_connect_stream

    params = _params(args.param)
    if settings is not None:
        secret = settings.auth.twilio_call_token_secret
        if secret is None:
            print(
                "voice-agent twiml: --call-sid needs auth.twilio_call_token_secret "
                "(config or VOICE_AGENT_AUTH__TWILIO_CALL_TOKEN_SECRET)",
                file=sys.stderr,
            )
            return EXIT_USAGE
        if not 0 < args.ttl_s <= settings.auth.call_token_max_ttl_s:
            print(f"voice-agent twiml: --ttl-s must be 1..{settings.auth.call_token_max_ttl_s}",
                  file=sys.stderr)  # fmt: skip
            return EXIT_USAGE
        expires = int(time.time()) + args.ttl_s
        params[CALLER_PARAMETER] = args.caller
        params[TOKEN_PARAMETER] = call_token(
            secret.get_secret_value(), args.call_sid, args.caller, expires
        )
    try:
        print(twiml_connect_stream(args.url, params), end="")
    except ValueError as exc:
        print(f"voice-agent twiml: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return 0


def _report(args: argparse.Namespace) -> int:
    if bool(args.records) == bool(args.mqtt):
        print("voice-agent report: give record files or --mqtt URL (not both)", file=sys.stderr)
        return EXIT_USAGE
    if args.mqtt:
        return _live(args)
    from voice_agent.reports.report import write_report
    from voice_agent.reports.runs import load_runs

    try:
        runs = load_runs(args.records, args.label or None)
        files = write_report(runs, args.out)
    except (OSError, ValueError, ImportError) as exc:
        print(f"voice-agent report: {exc}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, ValueError) else EXIT_FAILED
    turns = sum(len(run.records) for run in runs)
    print(f"voice-agent report: {len(runs)} run(s), {turns} turns -> {files.markdown}, "
          f"{files.html}")  # fmt: skip
    return 0


def _live(args: argparse.Namespace) -> int:
    from voice_agent.telemetry.publisher import BrokerAddress

    try:
        cfg = load_settings(args.config).telemetry
        password = cfg.password.get_secret_value() if cfg.password is not None else None
        broker = BrokerAddress.parse(args.mqtt, cfg.username, password, cfg.ca_file)
    except (ValueError, ConfigError) as exc:
        print(f"voice-agent report: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.window < 1 or args.refresh_s <= 0:
        print("voice-agent report: --window and --refresh-s must be positive", file=sys.stderr)
        return EXIT_USAGE
    from voice_agent.reports.live import watch

    asyncio.run(watch(broker, sys.stdout, window=args.window,
                      refresh_s=args.refresh_s, duration_s=args.duration_s))  # fmt: skip
    return 0


async def _serve(settings: Settings, *, echo: bool = False) -> int:
    from voice_agent.echo import EchoSession
    from voice_agent.pipeline import Pipeline
    from voice_agent.telemetry.metrics import Metrics
    from voice_agent.transports.server import open_endpoints, open_telemetry

    open_to_all = open_endpoints(settings) + open_telemetry(settings)
    if open_to_all and not settings.server.insecure:
        print(f"voice-agent serve: refusing to serve {settings.server.host} unprotected: "
              f"{'; '.join(open_to_all)}. Use a loopback host, set the auth (or TLS and "
              "a login for the broker), or pass --insecure for lab use.",
              file=sys.stderr)  # fmt: skip
        return EXIT_USAGE
    for problem in open_to_all:
        logging.getLogger("voice_agent.serve").warning(
            "INSECURE: %s (serving %s)", problem, settings.server.host
        )

    async with contextlib.AsyncExitStack() as stack:
        if echo:
            factory: SessionFactory = EchoSession
            answer = "calls get the echo stand-in (it repeats each caller turn)"
        else:
            print("voice-agent: loading the models...", flush=True)
            try:
                pipeline = await stack.enter_async_context(Pipeline(settings))
            except (OSError, ValueError, RuntimeError) as exc:
                print(f"voice-agent serve: cannot start the pipeline: {exc}", file=sys.stderr)
                return EXIT_FAILED
            factory = pipeline.new_session
            records = settings.pipeline.records
            answer = f"calls get the agent (brain {pipeline.checkpoint_path.name}"
            answer += f", turn records to {records})" if records else ")"
        metrics = Metrics(settings.telemetry.node) if echo else pipeline.metrics
        server = VoiceServer(settings, factory, health=None if echo else pipeline.health,
                             metrics=metrics)  # fmt: skip
        try:
            await server.start()
        except OSError as exc:
            cfg = settings.server
            print(
                f"voice-agent serve: cannot listen on {cfg.host}:{cfg.port}: {exc}",
                file=sys.stderr,
            )
            return EXIT_FAILED
        signals = _Signals()
        base = f"ws://{settings.server.host}:{server.port}"
        pcm = f" and {base}{PCM_PATH} (raw PCM16)" if settings.server.pcm_enabled else ""
        print(
            f"voice-agent: serving {base}{TWILIO_PATH} (Twilio Media Streams){pcm}\n"
            f"voice-agent: {answer}. Ctrl-C or SIGTERM drains, a second one stops.",
            flush=True,
        )
        try:
            await signals.first.wait()
            await _drain(server, settings.server.drain_timeout_s, signals.second)
        except asyncio.CancelledError:  # no loop signal handlers here: asyncio's Ctrl-C
            pass
        finally:
            signals.remove()
            await server.close()
    return 0


def _deploy(args: argparse.Namespace) -> int:
    from voice_agent.deploy import Worker, write_examples

    try:
        workers = [Worker.parse(text) for text in args.worker] or None
    except ValueError as exc:
        print(f"voice-agent deploy: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.drain_timeout_s < 0:
        print("voice-agent deploy: --drain-timeout-s must be 0 or more", file=sys.stderr)
        return EXIT_USAGE
    try:
        written = write_examples(args.out, workers, args.listen, args.drain_timeout_s)
    except OSError as exc:
        print(f"voice-agent deploy: cannot write under {args.out}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    for path in written:
        print(path)
    return 0


async def _drain(server: VoiceServer, timeout_s: float, second: asyncio.Event) -> None:
    """Take no new calls and wait for those in progress, until they end, `timeout_s`
    passes, or a second signal comes."""
    if not (server.active_calls or server.waiting) or timeout_s <= 0:
        return
    print(f"voice-agent: draining: {server.active_calls} calls in progress may go on for "
          f"up to {timeout_s:g} s; no new calls", flush=True)  # fmt: skip
    drained = asyncio.ensure_future(server.drain(timeout_s))
    interrupted = asyncio.ensure_future(second.wait())
    await asyncio.wait({drained, interrupted}, return_when=asyncio.FIRST_COMPLETED)
    interrupted.cancel()
    if not drained.done():
        drained.cancel()
        print("voice-agent: second signal: closing the calls in progress", flush=True)
    elif left := drained.result():
        print(f"voice-agent: drain time up: closing {left} calls in progress", flush=True)


class _Signals:
    """`first` is set by the first of `STOP_SIGNALS` (drain), `second` by the next one
    (stop now); after that they get their default action.

    On the loop rather than left to `asyncio.run`: that one handles only SIGINT, and only
    when SIGINT has its default handler. A server started in the background by a
    non-interactive shell inherits SIGINT ignored, and SIGTERM (what supervisors send)
    kills at once, dropping the calls in progress."""

    def __init__(self) -> None:
        self.first, self.second = asyncio.Event(), asyncio.Event()
        self._loop = asyncio.get_running_loop()
        for s in STOP_SIGNALS:
            with contextlib.suppress(NotImplementedError):  # loops without signal support
                self._loop.add_signal_handler(s, self._received, s)

    def _received(self, signum: int) -> None:
        name = signal.Signals(signum).name
        if not self.first.is_set():
            print(f"voice-agent: {name}: stopping", flush=True)
            self.first.set()
            return
        self.second.set()
        self.remove()

    def remove(self) -> None:
        for s in STOP_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                self._loop.remove_signal_handler(s)


async def _call(args: argparse.Namespace) -> int:
    from voice_agent.simulator import simulate_call
    from voice_agent.wav import WavError, read_wav, write_wav

    try:
        caller, rate = read_wav(args.wav)
    except WavError as exc:
        print(f"voice-agent call: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        summary, reply = await simulate_call(
            args.url,
            caller,
            rate,
            token=args.token,
            parameters=_params(args.param),
            max_tail_s=args.max_tail_s,
        )
    except (OSError, InvalidHandshake, InvalidURI) as exc:
        print(f"voice-agent call: cannot call {args.url}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    write_wav(args.out, reply, 8000)
    print(json.dumps(summary.to_json(), indent=2))
    return 0


def _mic(settings: Settings, args: argparse.Namespace) -> int:
    from voice_agent.mic import MicOptions, run_mic

    options = MicOptions(args.input_wav, args.output_wav, args.max_tail_s)
    return asyncio.run(run_mic(settings, options))


async def _demo(settings: Settings, out_dir: Path, *, echo: bool = False) -> int:
    from voice_agent.demo import call_report, run_demo

    try:
        result = await run_demo(settings, out_dir, echo=echo)
    except (OSError, ValueError, RuntimeError) as exc:
        print(f"voice-agent demo: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if echo:
        print(json.dumps(result.summary.to_json(), indent=2))
    else:
        print("\n".join(call_report(result.greeting, result.turns, result.summary.first_reply_ms)))
        summary = result.summary
        print(
            f"call: {summary.turns} caller turns, {summary.frames_received} reply frames, "
            f"{summary.clears_received} clears, closed {summary.close_code} "
            f"({summary.close_reason or 'by the caller'})"
        )
    answered = "echo stand-in" if echo else f"turn records in {result.records_path}"
    print(
        f"voice-agent demo: caller audio in {out_dir / 'demo-caller.wav'}, what the caller "
        f"heard in {out_dir / 'demo-reply.wav'} ({answered})",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
