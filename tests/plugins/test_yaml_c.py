"""yaml_c: a session's yaml.safe_load parses with libyaml, returns PyYAML's document, falls
back to PyYAML's own parser where libyaml refuses, and is put back at the session's end."""

from __future__ import annotations

import pytest
import yaml

from harness.plugins import yaml_c
from harness.settings.spec import REPO_ROOT

SHAPES = REPO_ROOT / "examples" / "cpu_suite" / "benchmark" / "core_shapes.yaml"

pytestmark = pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML without libyaml")


def test_a_session_parses_with_libyaml_the_same_document_and_puts_the_original_back(pytester):
    original = yaml.safe_load
    pytester.makepyfile(test_it=f"""
        import yaml
        from harness.plugins import yaml_c
        def test_it():
            assert yaml.safe_load is yaml_c.safe_load
            with open({str(SHAPES)!r}) as fh:
                parsed = yaml.safe_load(fh)
            assert parsed == yaml.load(open({str(SHAPES)!r}).read(), Loader=yaml.SafeLoader)
            assert yaml.safe_load("a: [1, 2]") == {{"a": [1, 2]}}
    """)
    pytester.runpytest("-p", "harness.plugins.yaml_c").assert_outcomes(passed=1)
    assert yaml.safe_load is original


def test_a_text_libyaml_refuses_is_parsed_or_refused_by_pyyamls_own(monkeypatch):
    class Refusing(yaml.CSafeLoader):
        def __init__(self, stream):
            raise yaml.YAMLError("libyaml refuses")

    monkeypatch.setattr(yaml, "CSafeLoader", Refusing)
    monkeypatch.setattr(yaml_c, "_ORIGINAL", [yaml.safe_load])
    assert yaml_c.safe_load("shapes: [[64, 64]]") == {"shapes": [[64, 64]]}
    with pytest.raises(yaml.YAMLError) as info:
        yaml_c.safe_load("a: [1, 2")
    assert "while parsing a flow sequence" in str(info.value)  # PyYAML's own message
