"""Seeded simulations of harness bisect with noise in the loop: right, wrong and undecided rates.

    python3 scripts/bisect_sim.py [--trials 300] [--seed 1] [--steps 16]

Each trial bisects `steps` steps (GOOD first) whose row gets `step` percent slower at a step
drawn uniformly; every A/B is one row judged as ROUNDS=auto judges it (harness.bisect.simulate).
Printed for each step size and per-round noise (normal, and heavy-tailed t(3)): the share of
trials that named the right step, a wrong one, or none (ambiguous, or the ends not told
apart), and the A/Bs and rounds a bisection took.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.bisect import simulate  # noqa: E402

CASES = ((30.0, 0.01), (30.0, 0.05), (30.0, 0.10), (30.0, 0.20), (5.0, 0.005), (5.0, 0.02),
         (2.0, 0.005), (2.0, 0.01))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, default=16)
    args = parser.parse_args(argv)
    print(f"{args.trials} trials a case, {args.steps} steps, seed {args.seed}")
    print("| step % | noise sd % | tails | right | wrong | undecided | A/Bs | rounds |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for step, noise in CASES:
        for heavy in (False, True):
            s = simulate.run(args.seed, args.trials, args.steps, step, noise, heavy=heavy)
            print(f"| {step:g} | {noise * 100:g} | {'t(3)' if heavy else 'normal'} | "
                  f"{s.right:.3f} | {s.wrong:.3f} | {s.undecided:.3f} | {s.abs:.1f} | "
                  f"{s.rounds:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
