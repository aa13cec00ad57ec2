"""Component configs for hearing, built from the validated process settings."""

from __future__ import annotations

from voice_agent.config import Settings
from voice_agent.hearing.asr import AsrConfig
from voice_agent.hearing.streaming import StreamingConfig
from voice_agent.hearing.turns import TurnConfig


def turn_config(settings: Settings) -> TurnConfig:
    h = settings.hearing
    return TurnConfig(
        speech_threshold=h.speech_threshold,
        silence_threshold=h.silence_threshold,
        min_speech_ms=h.min_speech_ms,
        onset_gap_ms=h.onset_gap_ms,
        end_of_turn_silence_ms=h.end_of_turn_silence_ms,
        barge_in_ms=h.barge_in_ms,
        barge_in_threshold=h.barge_in_threshold,
        end_of_turn=h.end_of_turn,
        complete_silence_ms=h.complete_silence_ms,
        incomplete_silence_ms=h.incomplete_silence_ms,
        complete_threshold=h.complete_threshold,
        reask_ms=h.reask_ms,
        words_wait_ms=h.words_wait_ms,
        check_words=h.check_words,
        max_turn_ms=round(h.max_turn_s * 1000),
    )


def streaming_config(settings: Settings) -> StreamingConfig:
    return StreamingConfig(partial_interval_ms=settings.hearing.partial_interval_ms)


def asr_config(settings: Settings) -> AsrConfig:
    h = settings.hearing
    return AsrConfig(
        model=settings.models.asr_model,
        device=settings.models.device,
        compute_type=h.compute_type,
        cpu_threads=h.cpu_threads,
        beam_size=h.beam_size,
        initial_prompt=h.initial_prompt,
        hotwords=h.hotwords,
        max_pending=h.max_pending,
        max_batch=h.max_batch,
        cache_dir=h.cache_dir,
        partial_context_s=h.partial_context_s,
        final_context_s=h.final_context_s,
    )
