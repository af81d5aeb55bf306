"""autotune plugin: record on one run, replay on the next, every missing key shown."""

from __future__ import annotations

import gc
import json

import pytest

from harness.contract.records import Records, Winner, merge, read_records, records_path, to_text
from harness.plugins.held import every_object
from harness.tuning.autotune import finish_run
from tests.plugins import fakedev

KERNELS = """
from triton.runtime.autotuner import Autotuner, Config


def _scale(x, n, **meta):
    return x


scale = Autotuner(_scale, ["x", "n"], [Config({"BLOCK": b}) for b in (16, 32, 64)], key=["n"])
"""
TEST = """
import kernels
from triton.runtime.autotuner import Autotuner


class Tensor:
    dtype = "torch.float32"


def test_kernels():
    for n in {sizes}:
        kernels.scale.run(Tensor(), n)
    print("BENCHED=" + ",".join(map(str, Autotuner.BENCHED)))
"""


@pytest.fixture
def suite(pytester, monkeypatch, tmp_path):
    fakedev.install(pytester)
    pytester.makepyfile(kernels=KERNELS)
    for name in ("ZL_PLUGIN_AUTOTUNE_REPLAY", "ZL_PLUGIN_REPLAY_STRICT",
                 "ZL_PLUGIN_WARMUP_SHARE", "ZL_PLUGIN_WARMUP_CLAIMS"):
        monkeypatch.delenv(name, raising=False)
    return pytester


def run(pytester, monkeypatch, run_dir, sizes, replay=None, strict=False, share=None):
    run_dir.mkdir()
    monkeypatch.setenv("ZL_PLUGIN_RUN_DIR", str(run_dir))
    if replay:
        monkeypatch.setenv("ZL_PLUGIN_AUTOTUNE_REPLAY", str(replay))
        monkeypatch.setenv("ZL_PLUGIN_REPLAY_STRICT", "1" if strict else "0")
    pytester.makepyfile(test_kernels=TEST.format(sizes=sizes))
    plugins = ["-p", "harness.plugins.autotune"]
    if share:  # a parallel warmup's shard, as the plan loads it
        monkeypatch.setenv("ZL_PLUGIN_WARMUP_SHARE", share)
        plugins += ["-p", "harness.plugins.warmup_share"]
    result = pytester.runpytest("test_kernels.py", "-s", *plugins)
    outcome = finish_run(run_dir, run_dir / "no-libtuner", record=True)
    return result, outcome


def test_record_then_replay_pins_winners_without_a_sweep(suite, monkeypatch, tmp_path):
    first, outcome = run(suite, monkeypatch, tmp_path / "a", (8, 16))
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines(["*BENCHED=16,32,64,16,32,64"])  # a full sweep per key
    assert outcome.recorded == 2
    winners = read_records(tmp_path / "a").winners
    assert {w.key: w.config["BLOCK"] for w in winners} == {(8, "torch.float32"): 32,
                                                          (16, "torch.float32"): 32}
    assert winners[0].kernel == "kernels:_scale"

    second, outcome = run(suite, monkeypatch, tmp_path / "b", (8, 16),
                          replay=records_path(tmp_path / "a"))
    second.assert_outcomes(passed=1)
    second.stdout.fnmatch_lines(["*BENCHED=32,32"])  # only each pinned winner runs
    second.stdout.no_fnmatch_line("*AUTOTUNE_REPLAY_FALLBACK*")
    assert outcome.fallbacks == ()
    assert read_records(tmp_path / "b").index().keys() == \
        read_records(tmp_path / "a").index().keys()


def test_a_missing_key_is_reported_exactly_and_self_tuned(suite, monkeypatch, tmp_path):
    run(suite, monkeypatch, tmp_path / "a", (8,))
    result, outcome = run(suite, monkeypatch, tmp_path / "b", (8, 24),
                          replay=records_path(tmp_path / "a"))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(['AUTOTUNE_REPLAY_FALLBACK reason=key_missing '
                                 'kernel=kernels:_scale key=*24, "torch.float32"*'])
    assert [json.dumps(f["key"]) for f in outcome.fallbacks] == ['[24, "torch.float32"]']
    result.stdout.fnmatch_lines(["*BENCHED=32,16,32,64"])


def test_strict_replay_fails_the_operator_naming_the_key(suite, monkeypatch, tmp_path):
    run(suite, monkeypatch, tmp_path / "a", (8,))
    result, _ = run(suite, monkeypatch, tmp_path / "b", (24,),
                    replay=records_path(tmp_path / "a"), strict=True)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*AUTOTUNE_REPLAY_FALLBACK reason=key_missing *24*"
                                 "REPLAY_STRICT=1 forbids self-tuning*"])


FAILING = """
from triton.runtime.autotuner import Autotuner, Config


class OutOfResources(Exception):  # named as Triton's: the plugin knows it by its class name
    pass


FAILED = []


def _scale(x, n, **meta):
    if not FAILED:
        FAILED.append(n)
        raise OutOfResources("shared memory exceeds the device's limit")
    return x


class NoDeleteCache:  # libtuner's ConfigCache: lookups and stores, no way to delete
    def __init__(self):
        self.rows = {}

    def __contains__(self, key):
        return key in self.rows

    def __getitem__(self, key):
        return self.rows[key]

    def __setitem__(self, key, config):
        self.rows[key] = config


class LibTunerLike(Autotuner):
    config_table_name = "scale_table"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cache = NoDeleteCache()

    def get_key(self, args):
        return (args["n"],)


configs = [Config({"BLOCK": b}) for b in (16, 32, 64)]
scale = Autotuner(_scale, ["x", "n"], configs, key=["n"])
"""
RETRY = """
import pytest

import kernels


class Tensor:
    dtype = "torch.float32"


def test_kernels():
    with pytest.raises(kernels.OutOfResources):
        kernels.scale.run(Tensor(), 8)
    kernels.scale.run(Tensor(), 8)
"""


def test_a_replayed_config_that_fails_to_compile_is_evicted_then_retuned(
        suite, monkeypatch, tmp_path):
    run(suite, monkeypatch, tmp_path / "a", (8,))
    suite.makepyfile(kernels=FAILING, test_retry=RETRY)
    monkeypatch.setenv("ZL_PLUGIN_RUN_DIR", str(tmp_path))
    monkeypatch.setenv("ZL_PLUGIN_AUTOTUNE_REPLAY", str(records_path(tmp_path / "a")))
    result = suite.runpytest("test_retry.py", "-s", "-p", "harness.plugins.autotune")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "*AUTOTUNE_REPLAY_EVICTED stage=resources kernel=kernels:_scale key=*8*",
        "*AUTOTUNE_REPLAY_FALLBACK reason=evicted kernel=kernels:_scale key=*8*"])


def test_a_cache_that_cannot_delete_says_so_and_claims_no_fallback(suite, monkeypatch, tmp_path):
    suite.makepyfile(kernels=FAILING.replace("scale = Autotuner(", "scale = LibTunerLike("),
                     test_retry=RETRY.rsplit("\n    kernels.scale.run(Tensor(), 8)", 1)[0])
    records = tmp_path / "winners.jsonl"
    records.write_text('{"config": {"BLOCK": 32, "num_ctas": 1, "num_stages": 3, '
                       '"num_warps": 4}, "kernel": "scale_table", "key": [8], '
                       '"kind": "winner", "source": "flaggems"}\n')
    monkeypatch.setenv("ZL_PLUGIN_RUN_DIR", str(tmp_path))
    monkeypatch.setenv("ZL_PLUGIN_AUTOTUNE_REPLAY", str(records))
    result = suite.runpytest("test_retry.py", "-s", "-p", "harness.plugins.autotune")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*compile_resources_no_evict kernel=scale_table key=*8*"])
    result.stdout.no_fnmatch_line("*AUTOTUNE_REPLAY_FALLBACK*")
    result.stdout.no_fnmatch_line("*AUTOTUNE_REPLAY_EVICTED*")


def test_each_share_sweeps_its_part_of_the_configs_and_records_its_winners_time(
        suite, monkeypatch, tmp_path):
    first, _ = run(suite, monkeypatch, tmp_path / "s0", (8,), share="0/2")
    first.stdout.fnmatch_lines(["*BENCHED=16,64"])  # configs 0 and 2 of (16, 32, 64)
    second, _ = run(suite, monkeypatch, tmp_path / "s1", (8,), share="1/2")
    second.stdout.fnmatch_lines(["*BENCHED=32"])
    parts = [read_records(tmp_path / name) for name in ("s0", "s1")]
    ident = ("triton", "kernels:_scale", '[8, "torch.float32"]')
    assert [p.index()[ident].config["BLOCK"] for p in parts] == [16, 32]
    assert [p.times[ident] for p in parts] == [0.16, 0.0]  # each winner's p50 in its sweep
    merged, differ = merge(parts)
    assert differ == 1 and merged.index()[ident].config["BLOCK"] == 32


def test_a_share_splits_only_the_sweeps_the_autotune_plugin_watches(suite, monkeypatch):
    monkeypatch.setenv("ZL_PLUGIN_WARMUP_SHARE", "0/2")
    suite.makepyfile(test_kernels=TEST.format(sizes=(8,)))
    result = suite.runpytest("test_kernels.py", "-s", "-p",
                             "harness.plugins.warmup_share")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*BENCHED=16,32,64"])  # no autotune plugin: the whole sweep


def test_more_shares_than_configs_still_sweep_every_key(suite, monkeypatch, tmp_path):
    result, outcome = run(suite, monkeypatch, tmp_path / "s4", (8,), share="4/5")
    result.stdout.fnmatch_lines(["*BENCHED=32"])  # share 4 of 3 configs: config 4 mod 3
    assert outcome.recorded == 1


def test_a_replayed_key_is_pinned_whatever_the_share(suite, monkeypatch, tmp_path):
    run(suite, monkeypatch, tmp_path / "a", (8,))
    result, _ = run(suite, monkeypatch, tmp_path / "b", (8,), share="0/2",
                    replay=records_path(tmp_path / "a"))
    result.stdout.fnmatch_lines(["*BENCHED=32"])  # the pinned winner, not share 0's 16, 64


def test_shares_with_a_claims_directory_never_sweep_the_same_config_twice(
        suite, monkeypatch, tmp_path):
    claims = tmp_path / "claims"
    claims.mkdir()
    monkeypatch.setenv("ZL_PLUGIN_WARMUP_CLAIMS", str(claims))
    first, _ = run(suite, monkeypatch, tmp_path / "s0", (8, 16), share="0/2")
    # alone so far, it claims every config at key 8, then sweeps its own again at key 16
    first.stdout.fnmatch_lines(["*BENCHED=16,32,64,16,32,64"])
    assert len(list(claims.iterdir())) == 3  # one claim per (kernel, dtypes, config)
    second, _ = run(suite, monkeypatch, tmp_path / "s1", (8, 16), share="1/2")
    second.stdout.fnmatch_lines(["*BENCHED="])  # everything was claimed: nothing ran here
    late = read_records(tmp_path / "s1")
    assert late.times == {} and len(late.winners) == 2  # winners, but none of its own
    merged, _ = merge([late, read_records(tmp_path / "s0")])
    assert {w.key[0]: w.config["BLOCK"] for w in merged.winners} == {8: 32, 16: 32}


def test_a_replayed_key_with_candidates_times_exactly_those_and_keeps_the_fastest(
        suite, monkeypatch, tmp_path):
    records = tmp_path / "winners.jsonl"
    records.write_text(to_text(Records(
        winners=[Winner("triton", "kernels:_scale", (8, "torch.float32"), {"BLOCK": 64})],
        candidates=[Winner("triton", "kernels:_scale", (8, "torch.float32"), {"BLOCK": 32})])))
    result, outcome = run(suite, monkeypatch, tmp_path / "b", (8,), replay=records,
                          strict=True)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*BENCHED=64,32"])  # the run-off, not the whole sweep
    assert outcome.fallbacks == ()
    (winner,) = read_records(tmp_path / "b").winners
    assert winner.config["BLOCK"] == 32



FROZEN_TEST = """
import gc

import kernels


class Tensor:
    dtype = "torch.float32"


def test_kernels():
    for n in (8, 16):
        kernels.scale.run(Tensor(), n)
    gc.freeze()  # as a worker freezes what outlives a session: the session ends frozen
"""
UNFREEZE = "import gc\n\n\ndef pytest_unconfigure(config):\n    gc.unfreeze()\n"


def test_a_tuner_frozen_out_of_the_collections_still_has_its_winners_recorded(
        suite, monkeypatch, tmp_path):
    # gc.get_objects lists no frozen object: with a worker's gc.freeze, A/r0 recorded no
    # winner and B/r0's strict replay failed (rot90, pixel_shuffle_out, softmax_backward_out).
    (tmp_path / "a").mkdir()
    monkeypatch.setenv("ZL_PLUGIN_RUN_DIR", str(tmp_path / "a"))
    suite.makepyfile(test_frozen=FROZEN_TEST)
    suite.makeconftest(UNFREEZE)
    result = suite.runpytest("test_frozen.py", "-s", "-p", "harness.plugins.autotune")
    result.assert_outcomes(passed=1)
    outcome = finish_run(tmp_path / "a", tmp_path / "a" / "no-libtuner", record=True)
    assert outcome.recorded == 2
    assert {w.key for w in read_records(tmp_path / "a").winners} == {
        (8, "torch.float32"), (16, "torch.float32")}


KEEPING = """
from triton.runtime.autotuner import Autotuner, Config


class Keeping(Autotuner):  # as FlagGems' LibTuner: its run keeps its last call's arguments
    def run(self, *args, **kwargs):
        self._last_benchmark_args = tuple(args)
        self._last_benchmark_meta = dict(kwargs)
        return super().run(*args, **kwargs)


def _scale(x, n, **meta):
    return x


scale = Keeping(_scale, ["x", "n"], [Config({"BLOCK": b}) for b in (16, 32)], key=["n"])
"""
KEPT_AFTER = """
import gc
import json
import sys


def pytest_unconfigure(config):
    tuner = sys.modules["kernels"].scale
    with open("kept.json", "w") as f:
        json.dump([repr(tuner._last_benchmark_args), repr(tuner._last_benchmark_meta)], f)
"""


def test_a_tuner_lets_go_of_its_last_calls_arguments_when_the_session_ends(
        suite, monkeypatch, tmp_path):
    # FlagGems' LibTuner kept max_dim's 2 GiB input after the session, and every worker that
    # ran it retired for the memory still allocated
    (tmp_path / "a").mkdir()
    monkeypatch.setenv("ZL_PLUGIN_RUN_DIR", str(tmp_path / "a"))
    suite.makepyfile(kernels=KEEPING, test_kernels=TEST.format(sizes=(8,)))
    suite.makeconftest(KEPT_AFTER)
    result = suite.runpytest("test_kernels.py", "-s", "-p", "harness.plugins.autotune")
    result.assert_outcomes(passed=1)
    assert json.loads((suite.path / "kept.json").read_text()) == ["None", "None"]
    assert finish_run(tmp_path / "a", tmp_path / "a" / "no-libtuner", record=True).recorded == 1


def test_every_object_lists_what_gc_froze_and_leaves_it_frozen():
    class Marker:
        pass

    marker = Marker()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert not any(o is marker for o in gc.get_objects())  # why every_object exists
        assert any(o is marker for o in every_object())
        assert gc.get_freeze_count() >= frozen  # a worker's session goes on frozen
        assert not any(o is marker for o in gc.get_objects())
    finally:
        gc.unfreeze()
