"""The call pipeline: process-wide resources (`Pipeline`) and one session per call."""

from voice_agent.pipeline.brain import resolve_checkpoint
from voice_agent.pipeline.heard import SpokenPiece, heard_text
from voice_agent.pipeline.pipeline import Pipeline
from voice_agent.pipeline.session import PipelineSession, TurnSummary
from voice_agent.pipeline.voice import AgentVoice

__all__ = [
    "AgentVoice",
    "Pipeline",
    "PipelineSession",
    "SpokenPiece",
    "TurnSummary",
    "heard_text",
    "resolve_checkpoint",
]
