"""Bike-shop tool outcomes as tool-result turns (prompts/FORMAT.md), for the simulator.

A result is its speakable `say` line; a refusal is `error <kind>: <message>`. Product ids
the next call may need (search hits, out-of-stock alternatives) are appended in brackets
with their names (`tools.bike_shop.pack.result_notes`), so a reserve call can copy the id
from the prompt. The agent builds the same turns from any pack (`ToolResultTurn.of`).
"""

from __future__ import annotations

from tools.bike_shop.pack import result_notes
from tools.bike_shop.results import ToolError, ToolResult
from voice_agent.dialogue.format import ToolResultTurn


def result_turn(tool: str, outcome: ToolResult | ToolError) -> ToolResultTurn:
    """The turn fed back to the model after `tool` returned or raised `outcome`."""
    return ToolResultTurn.of(tool, outcome, result_notes(outcome))
