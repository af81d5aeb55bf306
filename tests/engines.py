"""A fake container engine (docker, podman, skopeo, crane) for the image and container tests."""

from __future__ import annotations

import subprocess


def proc(rc: int = 0, out: str = "", err: str = "") -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess([], rc, out, err)


class FakeEngine:
    """Records each command; answers by the first matching prefix in `answers`."""

    def __init__(self, answers: dict[tuple[str, ...], subprocess.CompletedProcess]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def __call__(self, argv, **_: object) -> subprocess.CompletedProcess:
        self.calls.append(list(argv))
        for prefix, answer in self.answers.items():
            if tuple(argv[:len(prefix)]) == prefix:
                return answer
        return proc()

