"""The agent's brain: the model's turn format, fixed phrases, and the dialogue data the
embedded model is trained and evaluated on (prompts/FORMAT.md)."""
