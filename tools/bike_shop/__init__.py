"""The demo business: a bike shop's phone line.

`schemas` holds the tools' argument models (their JSON schemas drive the engine's
constrained decoding), `db` the SQLite store, `timewords` the day/time words a caller
says, `pack` the implementations and the registry, `speakable` the words the agent says.
"""
