"""The in-process diffusion-LLM inference engine (filled in by the engine issue)."""
