"""Seeded simulations of ROUNDS=auto: its false-call rate in A/A campaigns and its rounds by effect.

    python3 scripts/rounds_auto_sim.py [--campaigns 200] [--seed 1]

Each simulated campaign has 60 operators of 5 rows (300 rows). A row's per-round log ratio is its
effect plus noise (a row's sd log-uniform in [lo, hi]; normal, or Student t(3) scaled to that sd)
plus a slowly drifting round effect every row shares. The campaign runs as the driver runs it:
MIN_ROUNDS rounds, then, after each look (harness.stats.looks.judge: alpha spent over each
operator's looks), one more round for every operator that the driver's rule
(harness.campaign.adaptive.stop_reason) keeps going: a row inconclusive that MAX_ROUNDS may
still decide (looks.futile_width), its code or source changed, up to MAX_ROUNDS.
Printed: for A/A campaigns, the share with any row called faster or slower; for effects of 0, 1,
5 and 50% at 0.5% noise, the mean rounds an operator ran and the share of rows called; for A/A
campaigns of quieter rows, the share read same against 3 fixed rounds; with every row 1%
apart (the floor), the share wrongly read same; and, with those rules off and on, campaigns
with a microsecond row in every operator (an A/A, and two FlagGems commits where most
operators are unchanged) and effects of 3 and 10% at 2% noise, which futility must not lose.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from harness import stats  # noqa: E402
from harness.campaign import adaptive  # noqa: E402
from harness.report.abresult import AbRow  # noqa: E402
from harness.settings.variables import AUTO_MAX_ROUNDS, AUTO_MIN_ROUNDS  # noqa: E402
from harness.stats import looks  # noqa: E402

PER_OP = 5
CALLS = (stats.Verdict.FASTER, stats.Verdict.SLOWER)


def campaign(rng: np.random.Generator, *, effect: float = 0.0, sd: tuple[float, float] =
             (0.02, 0.10), heavy: bool = False, n_ops: int = 60, least: int = AUTO_MIN_ROUNDS,
             most: int = AUTO_MAX_ROUNDS, drift: float = 0.001, rules: bool = True,
             micro: tuple[float, float] | None = None, unchanged: int = 0
             ) -> tuple[list[stats.RowStats], list[int]]:
    """One adaptive campaign: its rows as judged at the end, and each operator's rounds;
    `drift`: the sd of each round's step of the effect every row shares. `micro`: the noise
    of each operator's first row instead (a microsecond row); `unchanged`: the first that many
    operators have the same code and source on both sides (and no effect). `rules`: the
    driver's stops for those and for rows MAX_ROUNDS cannot decide; off, only decided and
    MAX_ROUNDS stop an operator."""
    n = n_ops * PER_OP
    sds = np.exp(rng.uniform(math.log(sd[0]), math.log(sd[1]), n))
    if micro is not None:
        sds[::PER_OP] = np.exp(rng.uniform(math.log(micro[0]), math.log(micro[1]), n_ops))
    noise = (rng.standard_t(3, (n, most)) / math.sqrt(3) if heavy
             else rng.standard_normal((n, most)))
    shared = np.cumsum(rng.normal(0.0, drift, most))
    effects = np.full(n, effect)
    effects[:unchanged * PER_OP] = 0.0
    ratios = np.exp(noise * sds[:, None] + shared[None, :] + effects[:, None])
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
        active = {op for op in active
                  if _goes_on(op, judged, seen[op], rounds[op], least, most,
                              rules, op < unchanged)}
        if not active:
            return judged, rounds
        for op in active:
            rounds[op] += 1


def _goes_on(op: int, judged: list[stats.RowStats], seen: list[int], done: int, least: int,
             most: int, rules: bool, unchanged: bool) -> bool:
    """Whether the driver (adaptive.stop_reason) gives operator `op` another round."""
    rows = [AbRow(f"op{op}", "float16", f"[{i}]", 1, judged[i], ())
            for i in range(op * PER_OP, (op + 1) * PER_OP)]
    undecided = sum(r.stats.verdict is stats.Verdict.INCONCLUSIVE for r in rows)
    look = adaptive.Look(rows=PER_OP, undecided=undecided, done=done, ended_well=True)
    if rules:
        look = dataclasses.replace(look, unchanged=unchanged and len(seen) == 1,
                                   futile=adaptive.futile_rows(rows, seen, most,
                                                               most - least + 1,
                                                               stats.CONFIDENCE, False))
    return adaptive.stop_reason(look, most) is None


def false_call_rate(seed: int, campaigns: int, heavy: bool = False) -> float:
    """A/A: the share of campaigns with any row called faster or slower."""
    rng = np.random.default_rng(seed)
    return float(np.mean([any(r.verdict in CALLS for r in campaign(rng, heavy=heavy)[0])
                          for _ in range(campaigns)]))


def by_effect(seed: int, campaigns: int, effect_pct: float, sd: float = 0.005,
              rules: bool = True) -> tuple[float, float, float]:
    """(mean rounds an operator ran, share of rows called, share read same) for `effect_pct`
    at noise `sd`."""
    rng = np.random.default_rng(seed)
    rounds, called, same = [], [], []
    for _ in range(campaigns):
        rows, ran = campaign(rng, effect=math.log1p(effect_pct / 100), sd=(sd, sd), n_ops=20,
                             rules=rules)
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


def micro_mix(seed: int, campaigns: int, rules: bool = True, effect_pct: float = 0.0,
              unchanged: int = 0) -> tuple[float, float, float]:
    """Campaigns of 20 operators whose first row is a microsecond one (noise 1.5-6%) and the
    others 0.1-0.3% (an A/A's mix, or two FlagGems commits where all but the first `unchanged`
    operators differ by `effect_pct`): (mean rounds an operator ran, share of rows read same,
    share called)."""
    rng = np.random.default_rng(seed)
    rounds, same, called = [], [], []
    for _ in range(campaigns):
        rows, ran = campaign(rng, effect=math.log1p(effect_pct / 100), sd=(0.001, 0.003),
                             micro=(0.015, 0.06), n_ops=20, rules=rules, unchanged=unchanged)
        rounds += ran
        same += [r.verdict is stats.Verdict.SAME for r in rows]
        called += [r.verdict in CALLS for r in rows]
    return float(np.mean(rounds)), float(np.mean(same)), float(np.mean(called))


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
    few = max(10, args.campaigns // 10)
    print("rules  mean rounds per operator  rows same  rows called  (20 operators a campaign, "
          "each with one row at 1.5-6% noise, the others 0.1-0.3%)")
    for name, kwargs in (("A/A", {}), ("16 of 20 unchanged, 4 changed by 5%",
                                       {"effect_pct": 5.0, "unchanged": 16})):
        for rules in (False, True):
            rounds, same, called = micro_mix(args.seed, few, rules, **kwargs)
            print(f"{'on' if rules else 'off':5}  {rounds:24.2f}  {same:9.3f}  {called:11.3f}  "
                  f"{name}")
    for effect in (3.0, 10.0):
        for rules in (False, True):
            rounds, called, _ = by_effect(args.seed, few, effect, sd=0.02, rules=rules)
            print(f"{'on' if rules else 'off':5}  {rounds:24.2f}  {'-':>9}  {called:11.3f}  "
                  f"every row {effect:g}% faster, noise 2%")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
