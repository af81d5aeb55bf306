"""User-facing errors and the exit codes of DESIGN.md."""

from __future__ import annotations

EXIT_OK = 0
EXIT_BENCHMARK_FAILED = 1
EXIT_USAGE = 2
EXIT_PREFLIGHT = 3
EXIT_AXIS_NOT_LIVE = 6


class HarnessError(Exception):
    """An error the user can fix; the CLI prints it as one line and exits with `exit_code`."""

    exit_code = EXIT_USAGE


class UsageError(HarnessError):
    """A bad invocation or input: an unknown name, a malformed value, a missing file argument."""

    exit_code = EXIT_USAGE


class PreflightError(HarnessError):
    """A named preflight check failed: the environment is broken, not an operator."""

    exit_code = EXIT_PREFLIGHT

    def __init__(self, check: str, detail: str) -> None:
        super().__init__(f"PREFLIGHT_FAILED check={check} detail={detail}")
        self.check = check
        self.detail = detail


def choice_error(name: str, value: object, accepted: list[str] | tuple[str, ...],
                 hint: str = "") -> UsageError:
    """Build the one-line error for a value outside a closed set, listing what is accepted
    (and `hint`, a way out, in parentheses)."""
    tail = f" ({hint})" if hint else ""
    return UsageError(f"{name}={value!r} is not accepted; expected one of: "
                      f"{', '.join(accepted)}{tail}")
