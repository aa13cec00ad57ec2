"""The agent loop: dialogue state, prompts, engine answers, tool calls (see agent.py)."""

from voice_agent.agent.agent import (
    Agent,
    AgentConfig,
    AnswerEngine,
    Draft,
    EngineStalled,
    same_words,
)
from voice_agent.agent.prompt import fit_prompt, pack_grammar, prompt_budget
from voice_agent.agent.reply import (
    AgentDegrade,
    AgentReply,
    DegradeKind,
    EngineRecord,
    ReplyKind,
    ToolCallRecord,
    ToolOutcome,
)
from voice_agent.agent.streaming import TextChannel

__all__ = [
    "Agent",
    "AgentConfig",
    "AgentDegrade",
    "AgentReply",
    "AnswerEngine",
    "DegradeKind",
    "Draft",
    "EngineRecord",
    "EngineStalled",
    "ReplyKind",
    "TextChannel",
    "ToolCallRecord",
    "ToolOutcome",
    "fit_prompt",
    "pack_grammar",
    "prompt_budget",
    "same_words",
]
