"""Each preflight check, in order, with the check named on failure and nothing created."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from harness import spec
from harness.errors import PreflightError
from harness.preflight import CHECKS, Environment, iter_checks, probe_python, run_preflight

NVIDIA_SMI_LINE = "0, NVIDIA H200, GPU-1111, 580.159.04, 143771, 1980\n"


def make_tree(root, layout="new"):
    bench = root / "benchmark"
    bench.mkdir(parents=True)
    (bench / ("base.py" if layout == "new" else "performance_utils.py")).write_text("")
    (bench / "test_tanh.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.mark.tanh
        def test_tanh():
            pass
    """))
    return root


def fake_run(stdout=NVIDIA_SMI_LINE, rc=0):
    real = subprocess.run

    def run(cmd, **kwargs):
        if cmd[0] == sys.executable:  # the python probe runs for real
            return real(cmd, **kwargs)
        return subprocess.CompletedProcess(cmd, rc, stdout=stdout, stderr="")

    return run


def env(which=lambda name: f"/usr/bin/{name}", run=None, python=sys.executable):
    return Environment(python=python, which=which, run=run or fake_run())


def settings(tmp_path, **flags):
    base = {"backend": "cpu", "op": "tanh", "flaggems_dir": str(tmp_path / "fg")}
    return spec.resolve({**base, **flags}, {}, which=lambda _: None)


def failing_check(s, environment=None, with_accelerator=True):
    with pytest.raises(PreflightError) as info:
        run_preflight(s, environment or env(), with_accelerator=with_accelerator)
    assert str(info.value).startswith(f"PREFLIGHT_FAILED check={info.value.check} detail=")
    return info.value.check, info.value.detail


def test_all_checks_pass_in_order_on_cpu(tmp_path):
    make_tree(tmp_path / "fg")
    seen = [name for name, _, _ in iter_checks(settings(tmp_path), env())]
    assert seen == list(CHECKS)
    plan = run_preflight(settings(tmp_path), env())
    assert plan.node.nodeid == "benchmark/test_tanh.py::test_tanh" and plan.op == "tanh"
    assert "shape_file" in plan.skipped and "python_modules" in plan.passed
    assert plan.versions.get("torch")


def test_missing_flaggems_dir(tmp_path):
    assert failing_check(settings(tmp_path, flaggems_dir="/nope"))[0] == "flaggems_dir"


def test_older_layout_is_named(tmp_path):
    make_tree(tmp_path / "fg", layout="old")
    check, detail = failing_check(settings(tmp_path))
    assert check == "benchmark_file" and "performance_utils.py" in detail


def test_unknown_op_lists_close_matches(tmp_path):
    make_tree(tmp_path / "fg")
    check, detail = failing_check(settings(tmp_path, op="tanhh"))
    assert check == "test_node" and "benchmark/test_tanh.py::test_tanh" in detail


def test_shape_file_checked_only_in_file_mode(tmp_path):
    make_tree(tmp_path / "fg")
    missing = settings(tmp_path, shape_mode="file", shape_file=str(tmp_path / "no.yaml"))
    assert failing_check(missing)[0] == "shape_file"
    bad = tmp_path / "bad.yaml"
    bad.write_text("tanh: [unclosed\n")
    assert failing_check(settings(tmp_path, shape_mode="file", shape_file=str(bad)))[0] == \
        "shape_file"
    good = tmp_path / "good.yaml"
    good.write_text("tanh:\n  shapes: [[64, 64]]\n")
    plan = run_preflight(settings(tmp_path, shape_mode="file", shape_file=str(good)), env())
    assert "shape_file" in plan.passed


def test_replay_from_must_exist(tmp_path):
    make_tree(tmp_path / "fg")
    assert failing_check(settings(tmp_path, replay_from=str(tmp_path / "gone")))[0] == \
        "replay_from"


def cuda_settings(tmp_path, **flags):
    return settings(tmp_path, backend="cuda", runner="host", **flags)


def test_backend_tool_missing(tmp_path):
    make_tree(tmp_path / "fg")
    check, detail = failing_check(cuda_settings(tmp_path), env(which=lambda _: None))
    assert check == "backend" and "nvidia-smi" in detail


def test_no_visible_device(tmp_path):
    make_tree(tmp_path / "fg")
    assert failing_check(cuda_settings(tmp_path), env(run=fake_run(stdout="")))[0] == "device"
    assert failing_check(cuda_settings(tmp_path, devices="3"))[0] == "device"


def test_python_modules_missing_on_an_accelerator_backend(tmp_path):
    make_tree(tmp_path / "fg")
    check, detail = failing_check(cuda_settings(tmp_path, devices="0"))
    assert check == "python_modules" and "flag_gems" in detail  # not installed here


def test_dry_run_skips_only_the_accelerator_checks(tmp_path):
    make_tree(tmp_path / "fg")
    def run(cmd, **kwargs):  # a probe that finds every module
        return subprocess.CompletedProcess(cmd, 0, '{"python": "3.12.3", "missing": [], '
                                           '"versions": {}}', "")

    steps = {name: reason for name, reason, _ in
             iter_checks(cuda_settings(tmp_path), env(which=lambda _: None, run=run),
                         with_accelerator=False)}
    assert steps["backend"].startswith("dry run") and steps["device"].startswith("dry run")
    assert steps["flaggems_dir"] is None and steps["python_modules"] is None


def test_probe_reports_missing_modules_without_importing_them():
    facts = probe_python(sys.executable, ("json", "surely_not_a_module_xyz"))
    assert facts["missing"] == ["surely_not_a_module_xyz"]
    assert facts["python"].count(".") == 2


def test_probe_of_a_broken_interpreter_is_a_python_modules_failure(tmp_path):
    with pytest.raises(PreflightError) as info:
        probe_python(str(tmp_path / "no-python"), ("torch",))
    assert info.value.check == "python_modules"


def test_failure_leaves_nothing_on_disk(tmp_path):
    out = tmp_path / "runs"
    failing_check(settings(tmp_path, flaggems_dir="/nope", out=str(out)))
    assert not out.exists()


def test_probe_sees_the_pythonpath_pytest_will_add(tmp_path):
    (tmp_path / "src" / "fakegems").mkdir(parents=True)
    (tmp_path / "src" / "fakegems" / "__init__.py").write_text("")
    assert probe_python(sys.executable, ("fakegems",))["missing"] == ["fakegems"]
    facts = probe_python(sys.executable, ("fakegems",), extra_paths=(tmp_path / "src",))
    assert facts["missing"] == []


def test_caller_visibility_variable_narrows_devices_when_devices_unset(tmp_path, monkeypatch):
    from harness.backends import Device
    from harness.preflight import visible_devices

    found = [Device(0, "a"), Device(1, "b"), Device(2, "c")]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,2")
    assert [d.index for d in visible_devices(found, cuda_settings(tmp_path))] == [1, 2]
    assert [d.index for d in visible_devices(found, cuda_settings(tmp_path, devices="2"))] == [2]


def test_unparseable_tool_output_is_a_device_failure(tmp_path):
    make_tree(tmp_path / "fg")
    check, detail = failing_check(cuda_settings(tmp_path), env(run=fake_run(stdout="garbage\n")))
    assert check == "device" and "nvidia-smi" in detail
