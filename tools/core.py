"""What a tool pack is: the agent's tools for one business, as one value.

A `ToolPack` holds everything the agent and the pipeline need of a business's tools, so
neither names a business (`tools.bike_shop` is one pack; `tests/packs/restaurant.py` is
another):

* `tools`: name → `ToolSpec` (pydantic argument model, synchronous implementation,
  one-line description, timeout). The argument models' JSON schemas lay out the engine's
  constrained calls (engine/constraints.py says which field types and options decode);
* `result_types`: what an implementation may return besides a `Handoff` (each a value
  with a speakable `say` line); a refusal is a `ToolError`;
* `readbacks`: the lines the agent reads back before a write (`engine.readback.SayTemplate`);
* `consent`: tool → the caller acts (the brain's caller-hint labels) that ask for it;
* `closing`: tools under `consent` that a line's closing words may ask for (a goodbye or
  a request for a person said after something else); the others need the whole line;
* `said`: tool → a regex the caller's words must match besides the act (`end_call` needs
  a goodbye or thanks said, not just a line the hint reader took for one);
* `closing_said`: tool of `closing` → a regex its closing words must match to count (a
  transfer from a line's last clause needs a person asked for in it);
* `notes`: extra text the model reads after a result or a refusal (ids to copy from it);
* `open`: the pack's state for one process (its database): `open(where, now)` with the
  address from `[tools] database_url` or `[pipeline] shop_db` and the business's wall
  clock; the state hands each call its context and says whether it can be written.

A tool's context is any dataclass with a `caller` field (who is on the line, set by the
session, never by the model); the runner scopes it with `dataclasses.replace`.

`[tools] pack` names the pack: a package under `tools` ("bike_shop": `PACK` in its `pack`
module) or any importable module ("tests.packs.restaurant") that defines `PACK`;
"module:NAME" picks another name.

    pack = load_pack("bike_shop")
    state = pack.open("shop.sqlite", datetime.now)
    result = pack.call("opening_hours", {"day": "today"}, state.context())
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from engine.readback import SayTemplate
from voice_agent.speech.say import say_list

A = TypeVar("A", bound=BaseModel)
C = TypeVar("C")
C_co = TypeVar("C_co", covariant=True)


class CallRefusal(Enum):
    """Refusals of a call the pack itself cannot run, whatever the business."""

    INVALID_ARGUMENTS = "invalid_arguments"
    UNKNOWN_TOOL = "unknown_tool"


class ToolError(Exception):
    """A tool's refusal the agent talks about, never a crash.

    `kind` is an enum member (`CallRefusal` or the pack's own kinds) whose value the model
    reads as `error <kind>: ...`; `message` is speakable; `alternatives` are values for a
    retry (times, dates, ids), as the pack documents them."""

    def __init__(self, kind: Enum, message: str, alternatives: tuple[str, ...] = ()):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.alternatives = alternatives

    def to_dict(self) -> dict[str, Any]:
        return {
            "error": self.kind.value,
            "message": self.message,
            "alternatives": list(self.alternatives),
        }


class CallAction(Enum):
    """What the agent must do with the call after a hand-off result."""

    TRANSFER = "transfer"
    HANG_UP = "hang_up"


@dataclass(frozen=True, slots=True)
class Handoff:
    """A result that ends the turn with `say` and then transfers or hangs up."""

    action: CallAction
    reason: str
    say: str


@dataclass(frozen=True, slots=True)
class ToolSpec(Generic[A, C]):
    name: str
    args_model: type[A]
    run: Callable[[A, C], Any]
    """Returns one of the pack's result types or a `Handoff`, or raises `ToolError`."""
    description: str
    """One line for the system prompt."""
    timeout_s: float


class PackState(Protocol[C_co]):
    """A pack's state in one process (its database connection)."""

    def context(self) -> C_co:
        """A fresh context for one call, not yet scoped to a caller."""
        ...

    def writable(self) -> bool:
        """For the health check: False when the tools could not write now."""
        ...

    def close(self) -> None: ...


def no_notes(outcome: object) -> str:
    return ""


def _unset_open(where: str, now: Callable[[], datetime]) -> PackState[Any]:
    raise NotImplementedError("this tool pack keeps no state")


@dataclass(frozen=True, eq=False)
class ToolPack(Generic[C]):
    """One business's tools (see the module docstring). Compared and hashed by identity,
    so grammars built from a pack can be cached per pack."""

    name: str
    tools: Mapping[str, ToolSpec[Any, C]]
    result_types: tuple[type, ...]
    open: Callable[[str, Callable[[], datetime]], PackState[C]] = _unset_open
    readbacks: tuple[SayTemplate, ...] = ()
    consent: Mapping[str, frozenset[str]] = field(default_factory=dict)
    closing: frozenset[str] = frozenset()
    said: Mapping[str, str] = field(default_factory=dict)
    """Tool → a regex (case-insensitive) the line asking for it must match, besides its act."""
    closing_said: Mapping[str, str] = field(default_factory=dict)
    """Tool of `closing` → a regex (case-insensitive) its closing words must match to count."""
    held_back: Mapping[str, str] = field(default_factory=dict)
    """Tool → a regex (case-insensitive) by which a line holds the tool back whatever its
    act reads as ("actually no, don't cancel it"): the call is not run."""
    notes: Callable[[object], str] = no_notes
    """Text appended to a result's or a refusal's line for the model (`[107 winter tyre]`)."""

    def __post_init__(self) -> None:
        for name, spec in self.tools.items():
            if spec.name != name:
                raise ValueError(f"tool pack {self.name}: {name!r} holds the spec of {spec.name!r}")
        for template in self.readbacks:
            if template.tool not in self.tools:
                raise ValueError(f"tool pack {self.name}: read-back for unknown {template.tool!r}")
        unknown = set(self.consent) - set(self.tools)
        if unknown:
            raise ValueError(f"tool pack {self.name}: consent for unknown tools {sorted(unknown)}")
        if not self.closing <= set(self.consent):
            wrong = sorted(self.closing - set(self.consent))
            raise ValueError(f"tool pack {self.name}: closing for tools without consent {wrong}")
        if not set(self.said) <= set(self.consent):
            wrong = sorted(set(self.said) - set(self.consent))
            raise ValueError(f"tool pack {self.name}: said for tools without consent {wrong}")
        if not set(self.held_back) <= set(self.consent):
            wrong = sorted(set(self.held_back) - set(self.consent))
            raise ValueError(f"tool pack {self.name}: held_back for tools without consent {wrong}")
        if not set(self.closing_said) <= self.closing:
            wrong = sorted(set(self.closing_said) - self.closing)
            raise ValueError(f"tool pack {self.name}: closing_said for tools not closing {wrong}")
        for tool, pattern in (*self.said.items(), *self.closing_said.items(),
                              *self.held_back.items()):  # fmt: skip
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(
                    f"tool pack {self.name}: {tool!r}'s words are no regex: {exc}"
                ) from None

    @property
    def argument_models(self) -> dict[str, type[BaseModel]]:
        return {name: spec.args_model for name, spec in self.tools.items()}

    def call(self, name: str, arguments: Mapping[str, Any], ctx: C) -> Any:
        """Validate `arguments` for tool `name` and run it. Raises ToolError only for bad
        input: an unknown tool or invalid arguments are `CallRefusal`s."""
        spec = self.tools.get(name)
        if spec is None:
            raise ToolError(CallRefusal.UNKNOWN_TOOL, "Sorry, I can't do that over the phone.")
        try:
            args = spec.args_model.model_validate(dict(arguments))
        except ValidationError as exc:
            keys = dict.fromkeys(
                str(e["loc"][0]).replace("_", " ") for e in exc.errors() if e["loc"]
            )
            what = f"the {say_list(list(keys))}" if keys else "that"
            raise ToolError(
                CallRefusal.INVALID_ARGUMENTS, f"Sorry, I didn't catch {what}. Could you repeat it?"
            ) from None
        return spec.run(args, ctx)


def load_pack(spec: str) -> ToolPack[Any]:
    """The pack `[tools] pack` names (see the module docstring). Raises ValueError with
    what was tried when there is none, or with the pack's own import error when its
    module is there but fails to import."""
    module_name, _, attribute = spec.partition(":")
    attribute = attribute or "PACK"
    candidates = (
        [module_name]
        if "." in module_name
        else [f"tools.{module_name}.pack", f"tools.{module_name}", module_name]
    )
    errors = []
    for name in candidates:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not name.startswith(exc.name):  # not the pack: its import
                raise ValueError(f"tool pack {spec!r} fails to import: {exc}") from exc
            errors.append(f"no module {name}")
            continue
        except Exception as exc:  # the pack's module raised while importing
            raise ValueError(f"tool pack {spec!r} fails to import: {exc!r}") from exc
        pack = getattr(module, attribute, None)
        if isinstance(pack, ToolPack):
            return pack
        errors.append(f"{name} has no ToolPack named {attribute}")
    raise ValueError(f"no tool pack {spec!r}: {'; '.join(errors)}")


class WriteAbandoned(RuntimeError):
    """The tool's caller gave up on it (its timeout passed) before it committed: rolled
    back, nothing written."""


class WriteGate:
    """Decides, once, between a tool's write committing and its caller giving up on it,
    so a write never lands after the caller heard the apology for it. A pack's store
    asks `current_gate()` before it commits."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = ""

    def commit(self) -> bool:
        """May the write commit? False once abandoned."""
        with self._lock:
            if self._state == "abandoned":
                return False
            self._state = "committed"
            return True

    def abandon(self) -> bool:
        """Give up on the tool: True when nothing was committed (and now never will be),
        False when a write already committed (its result should be awaited instead)."""
        with self._lock:
            if self._state == "committed":
                return False
            self._state = "abandoned"
            return True


_gates = threading.local()


@contextmanager
def gated(gate: WriteGate) -> Iterator[None]:
    """Writes in this thread, inside the block, commit only through `gate`."""
    _gates.current = gate
    try:
        yield
    finally:
        _gates.current = None


def current_gate() -> WriteGate | None:
    """The gate of the tool running in this thread (None outside the agent's runner)."""
    gate: WriteGate | None = getattr(_gates, "current", None)
    return gate
