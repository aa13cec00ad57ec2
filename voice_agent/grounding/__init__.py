"""Grounding: which values a tool call's grounded slots may take, from what the caller said.

The engine lays out calls and chooses values (engine/constraints.py); it knows no
English. This package reads the dialogue (`ground`) and tells it, slot by slot, which
values were said: names that look like names (`names.py`), counts and the things a
caller asks for (`said.py`), numbers, phrases, the values of closed sets as a caller
says them, and what a read-back offered.
"""

from voice_agent.grounding.ground import CallSources, ground, grounder

__all__ = ["CallSources", "ground", "grounder"]
