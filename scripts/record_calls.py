"""Record a pipeline run: scripted calls against a `voice-agent serve` process, one after
the other and then N at once, keeping the server's turn records (for reports).

    python scripts/record_calls.py --out-dir out/run --single 2 --concurrent 3
    voice-agent report out/run/turns.jsonl --out out/run/report

`--broker mqtt://127.0.0.1:1883` also has the server publish its call events there
(watch them with `voice-agent report --mqtt mqtt://127.0.0.1:1883`). The server runs
the embedded defaults (Whisper tiny.en, the shipped brain, Piper) unless `--config`
says otherwise; caller lines come from scripts/calls.py, spoken by Piper.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.calls import ServerProcess, place_calls, scripts_for
from voice_agent.speech import default_synthesizer


async def record(args: argparse.Namespace) -> int:
    env = {"VOICE_AGENT_TELEMETRY__BROKER_URL": args.broker} if args.broker else {}
    if args.node:
        env["VOICE_AGENT_TELEMETRY__NODE"] = args.node
    server = ServerProcess(args.out_dir, config=args.config, env=env)
    voice = default_synthesizer()
    await server.start()
    failed = 0
    try:
        for script in scripts_for(args.single):
            single = await place_calls(server.twilio_url, [script], voice)
            failed += sum(r.summary is None for r in single)
        for n in args.concurrent:
            results = await place_calls(server.twilio_url, scripts_for(n, offset=n), voice,
                                        stagger_s=args.stagger_s)  # fmt: skip
            failed += sum(r.summary is None for r in results)
    finally:
        code = await server.stop()
    print(f"record_calls: turn records in {server.records} ({failed} calls failed, "
          f"server exit {code})")  # fmt: skip
    return 0 if code == 0 and not failed else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out-dir", type=Path, default=Path("out/record_calls"))
    p.add_argument("--single", type=int, default=2, help="calls placed one after the other")
    p.add_argument("--concurrent", type=int, nargs="*", default=[3], help="then N at once")
    p.add_argument("--stagger-s", type=float, default=1.0)
    p.add_argument("--broker", help="mqtt://HOST[:PORT]: the server publishes call events")
    p.add_argument("--node", help="the server's node name in the topic tree")
    p.add_argument("--config", type=Path, help="TOML settings for the server")
    args = p.parse_args()
    if args.single < 0 or any(n < 1 for n in args.concurrent) or args.stagger_s < 0:
        p.error("--single must not be negative, --concurrent must be positive")
    return asyncio.run(record(args))


if __name__ == "__main__":
    raise SystemExit(main())
