"""The bisection under noise (harness.bisect.simulate): a wrong step is named in under 5% of
trials; where the noise is too large to tell, it ends undecided instead."""

from __future__ import annotations

import pytest

from harness.bisect import simulate

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("step, noise, heavy", [
    (30.0, 0.01, False), (30.0, 0.05, True), (30.0, 0.10, False), (5.0, 0.005, True),
    (5.0, 0.02, False), (2.0, 0.01, False)])
def test_a_wrong_step_is_rare_at_any_noise(step, noise, heavy):
    s = simulate.run(seed=7, trials=150, steps=16, step_pct=step, noise=noise, heavy=heavy)
    assert s.wrong < 0.05
    assert s.right + s.wrong + s.undecided == pytest.approx(1.0)


def test_a_step_well_above_the_noise_is_named_nearly_always_in_few_abs():
    s = simulate.run(seed=3, trials=150, steps=16, step_pct=30.0, noise=0.01)
    assert s.right >= 0.97
    assert s.abs <= 1 + 2 * 5  # the ends, then at most 5 steps of two A/Bs each


def test_a_step_lost_in_noise_ends_undecided_not_wrong():
    s = simulate.run(seed=5, trials=60, steps=16, step_pct=2.0, noise=0.20)
    assert s.wrong == 0.0 and s.undecided >= 0.9
