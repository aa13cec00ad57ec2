"""Speech synthesis: synthesizers, streaming sentence by sentence, fixed phrases.

`default_synthesizer()` picks Piper's joe voice (espeak-ng when Piper is unavailable);
`speak()` turns the engine's streaming reply text into phone-rate audio; `PhraseCache`
holds the fixed phrases, synthesized at start.
"""

from voice_agent.speech.gate import SynthesisGate
from voice_agent.speech.phrases import PhraseCache
from voice_agent.speech.sentences import SentenceSplitter, speakable
from voice_agent.speech.stream import SpeechChunk, speak, speak_chunks
from voice_agent.speech.tts import (
    CoquiSynthesizer,
    EspeakSynthesizer,
    HibariSynthesizer,
    PiperSynthesizer,
    Synthesizer,
    TtsUnavailable,
    default_synthesizer,
)

__all__ = [
    "CoquiSynthesizer",
    "EspeakSynthesizer",
    "HibariSynthesizer",
    "PhraseCache",
    "PiperSynthesizer",
    "SentenceSplitter",
    "SpeechChunk",
    "SynthesisGate",
    "Synthesizer",
    "TtsUnavailable",
    "default_synthesizer",
    "speak",
    "speak_chunks",
    "speakable",
]
