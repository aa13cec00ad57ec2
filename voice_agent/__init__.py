"""A real-time phone voice agent whose brain is a diffusion language model."""

__version__ = "0.1.0"
