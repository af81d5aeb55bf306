"""What the host and the warmup_share plugin agree on: the spelling of a share."""

from __future__ import annotations

from harness.errors import UsageError

WARMUP_SHARE_PLUGIN = "harness.plugins.warmup_share"


def share_text(share: tuple[int, int]) -> str:
    """The "I/N" spelling of a warmup share, as parse_share reads it."""
    return f"{share[0]}/{share[1]}"


def parse_share(text: str) -> tuple[int, int] | None:
    """ZL_WARMUP_SHARE / --warmup-share: "I/N" with 0 <= I < N (0/1: every config); "" is
    None."""
    if not text:
        return None
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and int(index) < int(count)):
        raise UsageError(f"WARMUP_SHARE={text!r} is not accepted; expected I/N with "
                         "0 <= I < N, e.g. 0/2 (0/1: every config)")
    return int(index), int(count)
