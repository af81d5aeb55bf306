"""Seeded simulations of ROUNDS=auto: its false-call rate in A/A campaigns and its rounds by effect.

    python3 scripts/rounds_auto_sim.py [--campaigns 200] [--seed 1]

Each simulated campaign has 60 operators of 5 rows (300 rows). A row's per-round log ratio is its
effect plus noise (a row's sd log-uniform in [lo, hi]; normal, or Student t(3) scaled to that sd)
plus a slowly drifting round effect every row shares. The campaign runs as the driver runs it:
MIN_ROUNDS rounds, then, after each look (harness.stats.looks.judge: alpha spent over each
operator's looks), one more round for every operator with a row inconclusive, up to MAX_ROUNDS.
Printed: for A/A campaigns, the share with any row called faster or slower; for effects of 0, 1,
5 and 50% at 0.5% noise, the mean rounds an operator ran and the share of rows called; for A/A
campaigns of quieter rows, the share read same against 3 fixed rounds; and, with every row 1%
apart (the floor), the share wrongly read same.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from harness import stats  # noqa: E402
from harness.settings.variables import AUTO_MAX_ROUNDS, AUTO_MIN_ROUNDS  # noqa: E402
from harness.stats import looks  # noqa: E402

PER_OP = 5
CALLS = (stats.Verdict.FASTER, stats.Verdict.SLOWER)


def campaign(rng: np.random.Generator, *, effect: float = 0.0, sd: tuple[float, float] =
             (0.02, 0.10), heavy: bool = False, n_ops: int = 60, least: int = AUTO_MIN_ROUNDS,
             most: int = AUTO_MAX_ROUNDS, drift: float = 0.001
             ) -> tuple[list[stats.RowStats], list[int]]:
    """One adaptive campaign: its rows as judged at the end, and each operator's rounds;
    `drift`: the sd of each round's step of the effect every row shares."""
    n = n_ops * PER_OP
    sds = np.exp(rng.uniform(math.log(sd[0]), math.log(sd[1]), n))
    noise = (rng.standard_t(3, (n, most)) / math.sqrt(3) if heavy
             else rng.standard_normal((n, most)))
    shared = np.cumsum(rng.normal(0.0, drift, most))
    ratios = np.exp(noise * sds[:, None] + shared[None, :] + effect)
    rounds = [least] * n_ops
    seen: list[list[int]] = [[] for _ in range(n_ops)]
    active = set(range(n_ops))
    while True:
        for op in active:
            seen[op].append(rounds[op])
        rows = [stats.row_stats(ratios[i, :rounds[i // PER_OP]].tolist(),
                                [1.0] * rounds[i // PER_OP], noise_floor_pct=1.0)
                for i in range(n)]
        _, judged = looks.judge(rows, [seen[i // PER_OP] for i in range(n)],
                                noise_floor_pct=1.0, planned=most - least + 1)
        active = {op for op in active if rounds[op] < most and any(
            judged[i].verdict is stats.Verdict.INCONCLUSIVE
            for i in range(op * PER_OP, (op + 1) * PER_OP))}
        if not active:
            return judged, rounds
        for op in active:
            rounds[op] += 1


def false_call_rate(seed: int, campaigns: int, heavy: bool = False) -> float:
    """A/A: the share of campaigns with any row called faster or slower."""
    rng = np.random.default_rng(seed)
    return float(np.mean([any(r.verdict in CALLS for r in campaign(rng, heavy=heavy)[0])
                          for _ in range(campaigns)]))


def by_effect(seed: int, campaigns: int, effect_pct: float, sd: float = 0.005
              ) -> tuple[float, float, float]:
    """(mean rounds an operator ran, share of rows called, share read same) for `effect_pct`
    at noise `sd`."""
    rng = np.random.default_rng(seed)
    rounds, called, same = [], [], []
    for _ in range(campaigns):
        rows, ran = campaign(rng, effect=math.log1p(effect_pct / 100), sd=(sd, sd), n_ops=20)
        rounds += ran
        called += [r.verdict in CALLS for r in rows]
        same += [r.verdict is stats.Verdict.SAME for r in rows]
    return float(np.mean(rounds)), float(np.mean(called)), float(np.mean(same))


def a_a_same(seed: int, campaigns: int, sd: tuple[float, float] = (0.001, 0.02)
             ) -> tuple[float, float, float]:
    """A/A at noise `sd`: (share of rows read same with ROUNDS=auto, the same with 3 fixed
    rounds, mean rounds per operator with ROUNDS=auto)."""
    rng = np.random.default_rng(seed)
    auto, fixed, rounds = [], [], []
    for _ in range(campaigns):
        state = rng.bit_generator.state
        rows, ran = campaign(rng, sd=sd, n_ops=20)
        auto += [r.verdict is stats.Verdict.SAME for r in rows]
        rounds += ran
        rng.bit_generator.state = state  # the same rows, judged once at 3 rounds
        rows, _ = campaign(rng, sd=sd, n_ops=20, least=3, most=3)
        fixed += [r.verdict is stats.Verdict.SAME for r in rows]
    return float(np.mean(auto)), float(np.mean(fixed)), float(np.mean(rounds))


def same_at_the_floor(seed: int, campaigns: int, sd: float = 0.004) -> float:
    """The share of rows read same with ROUNDS=auto when every row truly differs by the floor
    (1%, the hardest case for the equivalence rule; no drift, which would move the truth off
    the floor): at most (1 - confidence) / 2."""
    rng = np.random.default_rng(seed)
    return float(np.mean([r.verdict is stats.Verdict.SAME for _ in range(campaigns)
                          for r in campaign(rng, effect=math.log1p(0.01), sd=(sd, sd),
                                            n_ops=20, drift=0.0)[0]]))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--campaigns", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    print(f"ROUNDS=auto, MIN_ROUNDS={AUTO_MIN_ROUNDS}, MAX_ROUNDS={AUTO_MAX_ROUNDS}, "
          f"{args.campaigns} campaigns, seed {args.seed}")
    for heavy in (False, True):
        rate = false_call_rate(args.seed, args.campaigns, heavy)
        print(f"A/A, 300 rows, noise 2-10% {'t(3)' if heavy else 'normal'}: campaigns with "
              f"any row called {rate:.3f} (q = {stats.FDR_Q})")
    print("effect  mean rounds per operator  rows called  rows same  (noise 0.5%, 100 rows "
          "a campaign)")
    for effect in (0.0, 1.0, 5.0, 50.0):
        rounds, called, same = by_effect(args.seed, max(10, args.campaigns // 10), effect)
        print(f"{effect:5.0f}%  {rounds:24.2f}  {called:11.3f}  {same:9.3f}")
    auto, fixed, rounds = a_a_same(args.seed, max(10, args.campaigns // 10))
    print(f"A/A, noise 0.1-2%: rows read same {auto:.3f} with ROUNDS=auto ({rounds:.2f} rounds "
          f"an operator), {fixed:.3f} with 3 fixed rounds")
    rate = same_at_the_floor(args.seed, max(10, args.campaigns // 10))
    print(f"every row 1% slower (at the floor), noise 0.4%: rows read same {rate:.3f} "
          f"(at most {(1 - stats.CONFIDENCE) / 2:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
