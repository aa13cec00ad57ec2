"""Bike-shop tool outcomes as tool-result turns (prompts/FORMAT.md).

A result is its speakable `say` line; a refusal is `error <kind>: <message>`. Product ids
the next call may need (search hits, out-of-stock alternatives) are appended in brackets
with their names, so a reserve call can copy the id from the prompt.
"""

from __future__ import annotations

from tools.bike_shop.catalogue import PRODUCTS
from tools.bike_shop.results import SearchResult, ToolError, ToolErrorKind, ToolResult
from voice_agent.brain.format import ERROR_PREFIX, ToolResultTurn

PRODUCT_NAMES = {p.product_id: p.name for p in PRODUCTS}


def _ids(pairs: list[tuple[str, str]]) -> str:
    return " [" + "; ".join(f"{pid} {name}" for pid, name in pairs) + "]" if pairs else ""


def result_turn(tool: str, outcome: ToolResult | ToolError) -> ToolResultTurn:
    """The turn fed back to the model after `tool` returned or raised `outcome`."""
    if isinstance(outcome, ToolError):
        ids = []
        if outcome.kind is ToolErrorKind.OUT_OF_STOCK:
            ids = [(pid, PRODUCT_NAMES.get(pid, "")) for pid in outcome.alternatives]
        text = f"{ERROR_PREFIX} {outcome.kind.value}: {outcome.message}{_ids(ids)}"
        return ToolResultTurn(tool, text, outcome.kind.value)
    ids = []
    if isinstance(outcome, SearchResult):
        ids = [(h.product_id, h.name) for h in outcome.products if h.in_stock]
    return ToolResultTurn(tool, f"{outcome.say}{_ids(ids)}")
