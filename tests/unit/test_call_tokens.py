"""Per-call tokens: bound to one CallSid and caller, unexpired, short-lived, used once."""

from __future__ import annotations

import pytest

from voice_agent.transports.auth import CallTokens, call_token

SECRET, SID, CALLER = "s3cret", "CA" + "a" * 32, "+15551234567"


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_token_admits_its_call_once() -> None:
    clock = Clock(1_000_000.0)
    tokens = CallTokens(SECRET, max_ttl_s=600, clock=clock)
    token = call_token(SECRET, SID, CALLER, 1_000_300)
    assert tokens.check(token, SID, CALLER) is None
    assert tokens.check(token, SID, CALLER) == "call token already used"


@pytest.mark.parametrize(
    ("token", "sid", "caller", "why"),
    [
        (None, SID, CALLER, "start has no call token"),
        ("v2.1000300.ab", SID, CALLER, "malformed call token"),
        ("v1.soon.ab", SID, CALLER, "malformed call token"),
        (call_token(SECRET, SID, CALLER, 1_000_300), "CA" + "b" * 32, CALLER, "does not match"),
        (call_token(SECRET, SID, CALLER, 1_000_300), SID, "+15550000000", "does not match"),
        (call_token("other", SID, CALLER, 1_000_300), SID, CALLER, "does not match"),
        (call_token(SECRET, SID, CALLER, 999_999), SID, CALLER, "expired"),
        (call_token(SECRET, SID, CALLER, 1_000_601), SID, CALLER, "lives too long"),
    ],
)
def test_a_token_for_anything_else_is_refused_with_its_reason(
    token: str | None, sid: str, caller: str, why: str
) -> None:
    tokens = CallTokens(SECRET, max_ttl_s=600, clock=Clock(1_000_000.0))
    reason = tokens.check(token, sid, caller)
    assert reason is not None and why in reason


def test_used_tokens_are_forgotten_once_expired() -> None:
    clock = Clock(1_000_000.0)
    tokens = CallTokens(SECRET, max_ttl_s=600, clock=clock)
    for k in range(50):
        assert (
            tokens.check(
                call_token(SECRET, f"CA{k:032d}", CALLER, 1_000_010), f"CA{k:032d}", CALLER
            )
            is None
        )
    clock.now = 1_000_020.0
    assert tokens.check(call_token(SECRET, SID, CALLER, 1_000_100), SID, CALLER) is None
    assert tokens.remembered == 1  # the fifty expired ones were pruned
    with pytest.raises(ValueError, match="empty"):
        CallTokens("")
