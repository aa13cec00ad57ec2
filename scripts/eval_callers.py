"""Evaluate the brain on caller lines and calls written independently of the simulator.

    python scripts/eval_callers.py --json out/eval_callers.json            # frozen test split
    python scripts/eval_callers.py --split dev --json out/dev.json          # for choices

Every case runs through the real `Agent` (prompt fitting, caller hints, the engine's
grammar and grounding, the tools on a fresh SQLite shop with no seed bookings), on
Tuesday 2026-12-08 at 11:00 (`independent.CALL_NOW`). Single lines: the agent's turn
after the line (after the greeting, and the agent line the case says came before it) is
scored by `independent_score.score_line`. Calls: the caller's lines are played in
order (the call stops when the agent hands it off) and the shop's database at the end
is compared with the writes the caller asked for (`score_call`).

Prints and writes JSON: `text.exact_action` (single lines), `text.task_completion`
(calls), `unasked_irreversible` and `wrong_writes` (counts), `latency_ms.{p50,p95}`
(engine time per answer), `tokens_per_forward`, per-act figures and every failure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.batching import Engine
from engine.checkpoint import Checkpoint, load
from tools.bike_shop.db import ShopContext, name_key
from tools.bike_shop.pack import CONSENT, IRREVERSIBLE_CONSENT, LOOKUP_CONSENT, PACK, call_tool
from tools.bike_shop.results import SearchResult
from tools.bike_shop.shop import open_shop
from voice_agent.agent import Agent, AgentConfig, AgentReply, ToolOutcome, prompt_budget
from voice_agent.brain.independent import (
    CALL_DAY,
    CALL_NOW,
    CallCase,
    Cases,
    LineCase,
    day_date,
    read_cases,
)
from voice_agent.brain.independent_score import (
    Booking,
    Hold,
    Observed,
    ObservedCall,
    Outcome,
    score_call,
    score_line,
)
from voice_agent.dialogue.format import AgentSay, CallerTurn, Turn, render_turn
from voice_agent.dialogue.hints import SCHEMES, for_card

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data" / "callers"
DEFAULT_DLM = ROOT / "engine" / "checkpoints" / "brain-dlm"
CALLER = "+15550100"
"""The caller identity every independent call is made from."""


def split_files(split: str) -> list[Path]:
    files = sorted((DATA / split).glob("*.jsonl"))
    if not files:
        raise SystemExit(f"eval_callers: no *.jsonl under {DATA / split}")
    return files


SHIPPED_MIN_CONFIDENCE = AgentConfig().min_confidence
"""The agent's own bar for asking the caller again (an instance's: the dataclass has slots)."""


class Runner:
    """One engine for the run; a fresh shop and agent per case."""

    def __init__(
        self,
        brain: Checkpoint,
        workdir: Path,
        hints: str | None,
        consent: str,
        min_confidence: float = SHIPPED_MIN_CONFIDENCE,
        decode_again: bool = True,
    ) -> None:
        self.brain = brain
        self.hints = for_card(brain.card.prompt_hints if hints is None else hints)
        self.consent = {
            "shipped": CONSENT,
            "irreversible": IRREVERSIBLE_CONSENT,
            "lookups": {**CONSENT, **LOOKUP_CONSENT},
            "none": None,
        }[consent]
        self.config = AgentConfig(
            max_prompt_tokens=prompt_budget(brain.card),
            min_confidence=min_confidence,
            decode_again=decode_again,
        )
        self.workdir = workdir
        self.engine = Engine(brain.model, brain.tokenizer.ids, max_batch=1)
        self.latencies_ms: list[float] = []
        self.decided = 0
        self.forwards = 0
        self.transcripts: dict[str, list[str]] = {}
        """Each call's dialogue as the model read it (caller lines with their hints)."""
        self.degrades: dict[str, list[str]] = {}
        """Each call's degraded turns: which caller line, what the agent did instead."""
        self._degraded: list[str] = []
        self._n = 0

    def _shop(self, bookings: Sequence[Any] = ()) -> ShopContext:
        self._n += 1
        db = open_shop(self.workdir / f"shop-{self._n}.sqlite", CALL_DAY)
        with db.write() as tx:
            tx.execute("DELETE FROM bookings")  # the requested slots are free
            for b in bookings:
                tx.execute(
                    "INSERT INTO bookings (name, name_key, day, start, service, caller) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (b["name"], name_key(b["name"]), day_date(b["day"]).isoformat(), b["time"],
                     b["service"], CALLER),
                )  # fmt: skip
        return ShopContext(db, lambda: CALL_NOW, caller=CALLER)

    def _agent(self, ctx: ShopContext) -> Agent:
        agent = Agent(self.engine, self.brain.tokenizer, PACK, ctx, config=self.config,
                      hints=self.hints, consent=self.consent)  # fmt: skip
        agent.greet()
        return agent

    async def _turn(self, agent: Agent, ctx: ShopContext, line: str) -> Observed:
        reply: AgentReply = await agent.respond(line)
        self._degraded += [f"{line!r}: {d.kind.value} {d.detail}" for d in reply.degrades]
        if reply.engine.requests:
            self.latencies_ms.append(reply.engine.latency_ms / reply.engine.requests)
        self.decided += reply.engine.decided_tokens
        self.forwards += reply.engine.forwards
        calls = tuple(_observed(c.tool, c.arguments, c.outcome, ctx) for c in reply.tool_calls)
        return Observed(reply.kind.value, calls, reply.text)

    async def line(self, case: LineCase) -> Observed:
        ctx = self._shop()
        try:
            agent = self._agent(ctx)
            if case.after is not None:
                agent.turns.append(AgentSay(case.after))
            return await self._turn(agent, ctx, case.line)
        finally:
            ctx.db.close()

    async def call(self, case: CallCase) -> Outcome:
        ctx = self._shop(case.bookings)
        try:
            agent = self._agent(ctx)
            self._degraded = []
            turns: list[Observed] = []
            for line in case.turns:
                turns.append(await self._turn(agent, ctx, line))
                if turns[-1].ended:
                    break
            early = bool(turns[-1].ended) and len(turns) < len(case.turns)
            self.transcripts[case.id] = [render_turn(self._hinted(t)) for t in agent.turns]
            self.degrades[case.id] = self._degraded
            return Outcome(*_rows(ctx), tuple(turns), early)
        finally:
            ctx.db.close()

    def _hinted(self, turn: Turn) -> Turn:
        """A caller turn with the hint it had when it was the latest line."""
        if self.hints is None or not isinstance(turn, CallerTurn):
            return turn
        return replace(turn, hint=self.hints.hint(turn.text))


def _observed(
    tool: str, args: dict[str, Any], outcome: ToolOutcome, ctx: ShopContext
) -> ObservedCall:
    hits: tuple[str, ...] = ()
    if tool == "search_products" and outcome is ToolOutcome.OK:
        result = call_tool(tool, args, ctx)  # read-only: run again for its hits
        assert isinstance(result, SearchResult)
        hits = tuple(p.product_id for p in result.products)
    return ObservedCall(tool, dict(args), outcome is ToolOutcome.OK, hits)


def _rows(ctx: ShopContext) -> tuple[frozenset[Booking], frozenset[Hold]]:
    with ctx.db.read() as conn:
        bookings = conn.execute(
            "SELECT name, service, day, start FROM bookings WHERE cancelled = 0 AND caller = ?",
            (CALLER,),
        ).fetchall()
        holds = conn.execute("SELECT product_id, quantity, name FROM reservations").fetchall()
    return (
        frozenset(Booking(name_key(r[0]), r[1], date.fromisoformat(r[2]), r[3]) for r in bookings),
        frozenset(Hold(r[0], int(r[1]), name_key(r[2])) for r in holds),
    )


def _rate(n: int, d: int) -> float | None:
    return round(n / d, 4) if d else None


async def evaluate(
    brain: Checkpoint,
    cases: Cases,
    limit: int | None = None,
    hints: str | None = None,
    consent: str = "shipped",
    min_confidence: float = SHIPPED_MIN_CONFIDENCE,
    transcripts: dict[str, list[str]] | None = None,
    degrades: dict[str, list[str]] | None = None,
    decode_again: bool = True,
) -> dict[str, Any]:
    """Figures of `brain` on `cases` (at most `limit` of each kind). `hints`: the
    caller-hint scheme (None: the card's); `consent`: the agent's consent rule as the
    pipeline has it (`shipped`), on irreversible tools only, with lookups too, or `none`;
    `min_confidence`: the agent's bar under which it asks the caller again (0: it never
    does, to compare what two models decide). `transcripts`, when given, receives each
    call's dialogue by case id; `degrades`, each call's degraded turns; `decode_again`:
    the agent's second decode of an unsure first answer."""
    lines, calls = cases.lines[:limit], cases.calls[:limit]
    with tempfile.TemporaryDirectory() as tmp:
        runner = Runner(brain, Path(tmp), hints, consent, min_confidence, decode_again)
        runner.engine.start()
        try:
            line_verdicts = [(c, score_line(c, await runner.line(c))) for c in lines]
            call_verdicts = [(c, score_call(c, await runner.call(c))) for c in calls]
        finally:
            await runner.engine.close()
    if transcripts is not None:
        transcripts.update(runner.transcripts)
    if degrades is not None:
        degrades.update(runner.degrades)
    by_act: dict[str, Counter[str]] = defaultdict(Counter)
    for case, v in line_verdicts:
        by_act[case.act.value]["n"] += 1
        by_act[case.act.value]["right"] += v.correct
    firsts = [v for c, v in line_verdicts if c.after is None]
    lat = np.array(runner.latencies_ms or [0.0])
    unasked_lines = sum(v.unasked_irreversible for _, v in line_verdicts)
    unasked_calls = sum(v.unasked_irreversible for _, v in call_verdicts)
    return {
        "text": {
            "exact_action": _rate(sum(v.correct for _, v in line_verdicts), len(line_verdicts)),
            "exact_action_first_lines": _rate(sum(v.correct for v in firsts), len(firsts)),
            "task_completion": _rate(
                sum(v.completed for _, v in call_verdicts), len(call_verdicts)
            ),
            "lines": len(line_verdicts),
            "calls": len(call_verdicts),
            "unasked_irreversible": {"lines": unasked_lines, "calls": unasked_calls},
            "wrong_writes": {
                "lines": sum(v.wrong_write for _, v in line_verdicts),
                "calls": sum(v.wrong_write for _, v in call_verdicts),
            },
            "invented_values": sum(v.invented for _, v in line_verdicts),
            "repeat_requests": sum(v.repeat_requests for _, v in call_verdicts),
            "by_act": {a: _rate(c["right"], c["n"]) for a, c in sorted(by_act.items())},
            "line_failures": {c.id: v.why for c, v in line_verdicts if not v.correct},
            "call_failures": {c.id: v.why for c, v in call_verdicts if not v.completed},
        },
        "unasked_irreversible": unasked_lines + unasked_calls,
        "latency_ms": {
            "p50": round(float(np.median(lat)), 1),
            "p95": round(float(np.percentile(lat, 95)), 1),
        },
        "tokens_per_forward": round(runner.decided / max(1, runner.forwards), 2),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--json", type=Path, required=True)
    p.add_argument("--dlm", type=Path, default=DEFAULT_DLM)
    p.add_argument("--split", choices=("test", "dev", "train"), default="test")
    p.add_argument("--files", type=Path, nargs="*", help="case files instead of a split")
    p.add_argument("--limit", type=int, default=None, help="at most this many lines and calls")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument(
        "--hints", choices=SCHEMES, default=None, help="caller-hint scheme (default: the card's)"
    )
    p.add_argument(
        "--consent",
        choices=("shipped", "irreversible", "lookups", "none"),
        default="shipped",
        help="the agent's consent rule (tools.bike_shop.pack)",
    )
    p.add_argument(
        "--min-confidence",
        type=float,
        default=SHIPPED_MIN_CONFIDENCE,
        help="the agent's bar for asking again (0: trust every answer, to compare models)",
    )
    p.add_argument(
        "--no-decode-again", action="store_true",
        help="the agent asks again at once after an unsure answer (no second decode)",
    )  # fmt: skip
    p.add_argument(
        "--transcripts", type=Path, default=None,
        help="also write each call's dialogue (JSONL: id, failures, turns, degrades) here",
    )  # fmt: skip
    args = p.parse_args(argv)
    if not 0.0 <= args.min_confidence <= 1.0:
        p.error(f"--min-confidence is between 0 and 1, not {args.min_confidence}")
    if args.threads:
        torch.set_num_threads(args.threads)
    cases = read_cases(args.files or split_files(args.split))
    brain = load(args.dlm)
    started = time.monotonic()
    dialogues: dict[str, list[str]] = {}
    degraded: dict[str, list[str]] = {}
    run = evaluate(brain, cases, args.limit, args.hints, args.consent, args.min_confidence,
                   dialogues, degraded, decode_again=not args.no_decode_again)  # fmt: skip
    figures = asyncio.run(run)
    figures["hints"] = args.hints or brain.card.prompt_hints
    figures["min_confidence"] = args.min_confidence
    figures["decode_again"] = not args.no_decode_again
    figures["consent"] = args.consent
    figures["split"] = args.split if not args.files else [str(f) for f in args.files]
    figures["brain"] = str(args.dlm)
    figures["seconds"] = round(time.monotonic() - started, 1)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=1))
    if args.transcripts is not None:
        failed = figures["text"]["call_failures"]
        rows = (
            {"id": i, "failures": failed.get(i, []), "turns": t, "degrades": degraded.get(i, [])}
            for i, t in dialogues.items()
        )
        args.transcripts.parent.mkdir(parents=True, exist_ok=True)
        args.transcripts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    brief = {k: figures["text"][k] for k in ("exact_action", "exact_action_first_lines",
             "task_completion", "unasked_irreversible", "wrong_writes", "by_act")}  # fmt: skip
    print(json.dumps({**brief, "latency_ms": figures["latency_ms"]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
