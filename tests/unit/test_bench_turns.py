"""The pause set's cut inside a sentence (scripts/bench_turns.py): where the silence goes."""

from __future__ import annotations

import numpy as np

from scripts.bench_turns import cut_inside

PER_MS = 8  # 8 kHz


def speech_with_gap(total_ms: int, gap_at_ms: int, gap_ms: int = 20) -> np.ndarray:
    rng = np.random.default_rng(0)
    samples = rng.integers(-8000, 8000, total_ms * PER_MS).astype(np.int16)
    samples[gap_at_ms * PER_MS : (gap_at_ms + gap_ms) * PER_MS] //= 100  # a quiet joint
    return samples


def test_the_cut_lands_in_the_quiet_joint_near_the_estimate() -> None:
    whole = speech_with_gap(1000, gap_at_ms=430)
    first, second = cut_inside(whole, share=0.4)  # the estimate is 400 ms: 30 ms off
    assert 430 * PER_MS <= len(first) <= 450 * PER_MS
    assert np.array_equal(np.concatenate([first, second]), whole)  # nothing lost


def test_a_joint_beyond_the_search_window_is_not_taken() -> None:
    whole = speech_with_gap(2000, gap_at_ms=1500)
    first, _ = cut_inside(whole, share=0.25)  # 500 ms: the joint is 1 s away
    assert abs(len(first) - 500 * PER_MS) <= 110 * PER_MS


def test_an_estimate_at_the_edge_still_leaves_two_pieces() -> None:
    whole = speech_with_gap(300, gap_at_ms=150)
    for share in (0.0, 1.0):
        first, second = cut_inside(whole, share)
        assert len(first) > 0 and len(second) > 0
