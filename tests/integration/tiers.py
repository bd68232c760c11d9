"""The depth of a test run: DRA_TEST_TIER, `ci` (`make test`, the README's test command) or `full`
(`make test-full`: every test on every pinned release, generative tests at their full counts)."""
import os

TIERS = ("ci", "full")
TIER = os.environ.get("DRA_TEST_TIER", "ci")
if TIER not in TIERS:
    raise ValueError(f"DRA_TEST_TIER={TIER!r}: use one of {', '.join(TIERS)} (make test: ci, make test-full: full)")


def sized(ci, full):
    """A generative test's count for this tier."""
    return full if TIER == "full" else ci
