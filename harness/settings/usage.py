"""What `harness`, `harness --help` and each subcommand's help tell a user: words and examples."""

from __future__ import annotations

import textwrap

from harness import backends

DESCRIPTION = textwrap.fill(
    "Run FlagGems' pytest benchmarks reproducibly on any backend of `harness backends`: one "
    "operator (run), many (batch), or an A/B campaign of a switch (ab) with a verdict per "
    "shape. Each setting is a flag here and an environment variable (`harness vars` lists "
    "them); in a checkout, `make help` shows the same as make targets.", 88)

# The subcommands a user runs, in the order the short usage lists them; the others (ab-unit,
# and each executor kind's task, e.g. slurm-task) are run by the harness itself and kept out
# of every help.
COMMON = ("run", "batch", "ab", "summary", "preflight", "backends", "vars")
INTERNAL = ("ab-unit",)

EXAMPLES: dict[str, tuple[str, ...]] = {
    "backends": ("harness backends", "harness backends --json"),
    "vars": ("harness vars",),
    "preflight": ("harness preflight --backend <backend> --op tanh --runner host "
                  "--flaggems-dir ~/FlagGems",),
    "run": ("harness run --backend cpu --op mm",
            "harness run --backend <backend> --op tanh --runner host --flaggems-dir ~/FlagGems "
            "--dry-run"),
    "ab": ("harness ab --backend cpu --op mm --axis OMP_NUM_THREADS --a 1 --b 2 --rounds 3",
           "harness ab --backend <backend> --axis none --op tanh --runner host   # an A/A: the "
           "noise floor",
           "harness ab --backend <backend> --axis env:MY_SWITCH --ops tanh,mm --runner host",
           "harness ab --resume runs/ab/OMP_NUM_THREADS-mm/<ts> --rounds 5",
           "harness ab --backend cpu --ops tanh,mm --axis OMP_NUM_THREADS --a 1 --b 2 "
           "--fail-on slower,failed   # CI: exit 7 on a regression"),
    "batch": ("harness batch --backend cpu --ops tanh,add,mm",
              "harness batch --backend <backend> --ops-file ops.txt --devices 0,1 --runner host"),
    "summary": ("harness summary runs/mm/<ts>",
                "harness summary --ab runs/mm/<ts-a> runs/mm/<ts-b> --format csv"),
    "image": ("harness image --backend <backend>",),
    "pin": ("harness pin --backend <backend> --dry-run",),
    "shell": ("harness shell --backend <backend> --devices 0",),
    "receipt": ("harness receipt verify runs/ab/OMP_NUM_THREADS-mm/<ts>",),
    "report": ("harness report runs/ab/OMP_NUM_THREADS-mm/<ts>",
               "harness report runs/ab/OMP_NUM_THREADS-mm/<ts> --fail-on slower,failed"),
    "status": ("harness status runs/ab/OMP_NUM_THREADS-suite/<ts>   # from another terminal, "
               "at any moment",
               "make status RUN=runs/ab/OMP_NUM_THREADS-suite/<ts>"),
    "history": ("harness history list",
                "harness history trend mm --by commit --format csv",
                "harness history changes --since 2026-11-01",
                "harness history import runs/ab/OMP_NUM_THREADS-mm/<ts>"),
    "bisect": ("harness bisect --backend <backend> --op mm --flaggems-dir ~/FlagGems --good "
               "v4.0 --bad main --dtypes float16 --shape '[[1024,1024]]'",
               "harness bisect --backend <backend> --op mm --axis python --stacks nightlies.txt",
               "harness bisect --resume runs/bisect/mm/<ts>"),
    "publish": ("harness publish --out runs/site",
                "harness publish --history runs/history.sqlite --since 2026-11-01"),
}


FIRST = EXAMPLES["ab"][0]  # the demo's campaign: needs no accelerator
TOP_EPILOG = (f"a first campaign, on the cpu suite:\n  {FIRST}\n"
              "harness <command> --help: that command's options, with examples")


def epilog(command: str) -> str:
    """The examples block at the foot of `command`'s help."""
    lines = EXAMPLES[command]
    text = "example" + ("s" if len(lines) > 1 else "") + ":\n" + "\n".join(
        f"  {line}" for line in lines)
    if any("<backend>" in line for line in lines):
        text += f"\n<backend>: {', '.join(backends.registry().accepted())}"
    return text


def short_usage(helps: dict[str, str]) -> list[str]:
    """What bare `harness` prints: the common subcommands with their one-line help, and
    where to read more (`helps`: each subcommand's help)."""
    lines = ["usage: harness <command> [options]   (harness <command> --help for its options)",
             "", "common commands:"]
    lines += [f"  {name:<10} {helps[name]}" for name in COMMON]
    others = [name for name in helps if name not in COMMON]
    lines += ["", f"also: {', '.join(others)} (harness --help lists them all)",
              "", "a first campaign, on the cpu suite (no accelerator needed):", f"  {FIRST}"]
    return lines
