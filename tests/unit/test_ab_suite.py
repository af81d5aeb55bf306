"""The campaign driver's pure parts: which operators OPS=all names, what a unit's child gets."""

from __future__ import annotations

from harness import ab_suite, batch, spec
from harness.spec import EMBEDDED_SUITE


def settings(**flags):
    return spec.resolve({"backend": "cpu", **flags}, {}, which=lambda _: None)


def test_ops_all_names_every_node_of_the_tree_once():
    found = batch.all_ops(settings())
    assert found == {op: f"benchmark/test_{op}.py::test_{op}"
                     for op in ("add", "mm", "softmax", "sum", "tanh")}
    assert batch.resolve_ops(settings(), {"ops": "all"}, {}) == list(found)


def test_ops_all_gives_a_second_node_of_one_name_its_own_name(tmp_path):
    import shutil

    suite = shutil.copytree(EMBEDDED_SUITE, tmp_path / "s",
                            ignore=shutil.ignore_patterns("__pycache__", "result_*.log"))
    (suite / "benchmark" / "test_add_more.py").write_text(
        "import pytest\n\n\n@pytest.mark.add\ndef test_add_more():\n    pass\n")
    found = batch.all_ops(settings(flaggems_dir=str(suite)))
    assert found["add"] == "benchmark/test_add.py::test_add"
    assert found["add-2"] == "benchmark/test_add_more.py::test_add_more"


def test_a_campaign_stores_settings_from_the_environment_as_flags_so_a_resume_repeats_them():
    env = {"SHAPE_MODE": "file", "SHAPE_FILE": "/s.yaml", "ZL_DEVICES": "3", "OP": "mm"}
    base = spec.resolve({"backend": "cpu"}, env, which=lambda _: None)
    argv = ab_suite.settings_argv(base, {"level": "core"}, env)
    assert argv == ["--backend", "cpu", "--level", "core", "--shape-mode", "file",
                    "--shape-file", "/s.yaml"]  # what to run and where come per unit
    again, _ = ab_suite.settings_from_argv(argv)
    assert again.caliber() == base.caliber()
    child = ab_suite.unit_argv(EMBEDDED_SUITE, argv, "benchmark/test_mm.py::test_mm", "mm/r1",
                               "3")
    assert child[3:6] == ["ab-unit", str(EMBEDDED_SUITE), "mm/r1"]
    assert child[-4:] == ["--node", "benchmark/test_mm.py::test_mm", "--devices", "3"]


def test_a_second_driver_of_one_campaign_is_refused(tmp_path):
    import pytest

    from harness.errors import UsageError

    with ab_suite._sole_driver(tmp_path):
        with pytest.raises(UsageError, match="is being run by another harness process"):
            with ab_suite._sole_driver(tmp_path):
                pass
    with ab_suite._sole_driver(tmp_path):  # released when the first driver ends
        pass
