"""The runtime dialogue format: what the brain reads and writes on a live call.

`format.py` renders turns into the prompt and parses answers (prompts/FORMAT.md),
`phrases.py` holds the fixed phrases (prompts/phrases.toml), `hints.py` the caller hints
a checkpoint may be trained with, `spoken.py` how digits a caller reads out are written.
The training side (the simulator, scenarios, scoring) is `voice_agent/brain/`; nothing
here imports it.
"""
