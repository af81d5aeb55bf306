"""yaml_cache: a YAML document parsed once a process (and a worker), each caller given what a
parse of its own would have given it."""

from __future__ import annotations

import codecs
import functools
import gzip
import io
import os
import re
import sys
import tarfile
import threading
import types
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml

from harness.contract import boundary
from harness.executors.lease import start_pytest
from harness.executors.workers import WorkerHost
from harness.plugins import memo, yaml_cache
from harness.plugins.yaml_cache import caching
from harness.settings.spec import REPO_ROOT

SHAPES = "Add:\n  shapes:\n    - [64, 64]\n    - [1024, 1024]\nSum:\n  shapes: [[16]]\n"


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> memo.Store:
    """A store of the test's own; texts as short as the tests' are kept."""
    fresh = memo.Store()
    monkeypatch.setattr(memo, "PARSED", fresh)
    monkeypatch.setattr(yaml_cache, "SMALLEST", 0)
    return fresh


def test_a_file_that_is_not_text_fails_as_pyyamls_own_read_of_it(tmp_path, store):
    path = tmp_path / "shapes.yaml"
    path.write_bytes(b"add:\n  shapes: [[64]]\n" + bytes(range(128, 256)) * 64)
    with pytest.raises(UnicodeDecodeError) as own:
        parse(yaml.safe_load, path)
    with pytest.raises(UnicodeDecodeError) as ours:
        parse(caching(yaml), path)
    assert str(ours.value) == str(own.value) and not store.values


class Counted:
    """A loader's safe_load that counts its parses."""

    def __init__(self, loader: type = yaml.SafeLoader) -> None:
        self.loader, self.calls = loader, 0

    def __call__(self, stream: Any) -> Any:
        self.calls += 1
        return yaml.load(stream, self.loader)  # noqa: S506 - a safe loader, or a test's subclass


def module(original: Counted) -> types.SimpleNamespace:
    """PyYAML's module as caching() reads it, its safe_load and SafeLoader the test's."""
    return types.SimpleNamespace(safe_load=original, load=yaml.load, SafeLoader=original.loader,
                                 __file__=yaml.__file__, __name__="yaml")


def parse(load: Any, path: Path) -> Any:
    with open(path, encoding="utf-8") as file:
        return load(file)


def test_the_same_text_is_parsed_once_and_each_caller_gets_a_copy_of_its_own(tmp_path, store):
    original = Counted()
    load = caching(module(original))
    one, two = tmp_path / "one.yaml", tmp_path / "two.yaml"
    one.write_text(SHAPES)
    two.write_text(SHAPES)
    first = parse(load, one)
    assert first == yaml.safe_load(SHAPES) and original.calls == 1
    first["Add"]["shapes"].append([1, 1])  # a caller that changes what it got
    again, other = parse(load, one), parse(load, two)  # another file of the same text too
    assert again == other == yaml.safe_load(SHAPES) and again is not other
    assert original.calls == 1
    assert load(SHAPES) == yaml.safe_load(SHAPES) and original.calls == 1  # a str of it too
    assert load(SHAPES.encode()) == yaml.safe_load(SHAPES) and original.calls == 2  # bytes


def test_a_file_changed_between_calls_is_parsed_again(tmp_path, store):
    original = Counted()
    load = caching(module(original))
    path = tmp_path / "core_shapes.yaml"
    path.write_text(SHAPES)
    assert parse(load, path)["Sum"] == {"shapes": [[16]]}
    path.write_text(SHAPES.replace("[[16]]", "[[32]]"))
    assert parse(load, path)["Sum"] == {"shapes": [[32]]} and original.calls == 2


def test_a_stream_is_read_from_where_it_stands_and_left_at_its_end(tmp_path, store):
    load = caching(module(Counted()))
    path = tmp_path / "s.yaml"
    path.write_text("# a header the caller read first\n" + SHAPES)
    for _ in range(2):  # a miss, then a hit
        with open(path, encoding="utf-8") as file:
            file.readline()
            assert load(file) == yaml.safe_load(SHAPES)
            assert file.read() == ""


class Trickle(io.StringIO):
    """A stream of a caller's own: a few characters a read, as a file on a network may."""

    def read(self, size: int | None = -1) -> str:
        return super().read(5 if size is None or size < 0 else min(size, 5))


class OneArgSeek(io.StringIO):
    """A stream of a caller's own whose seek() takes no whence."""

    def seek(self, pos: int) -> int:  # type: ignore[override]
        return super().seek(pos)


def _gzip_over_a_pipe(text: str) -> Any:
    read, write = os.pipe()
    os.write(write, gzip.compress(text.encode()))
    os.close(write)
    return gzip.GzipFile(fileobj=open(read, "rb"))  # says it can seek, cannot rewind


def _tar_member_read_from_a_stream(text: str) -> Any:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        info = tarfile.TarInfo("shapes.yaml")
        info.size = len(text.encode())
        tar.addfile(info, io.BytesIO(text.encode()))
    data.seek(0)
    tar = tarfile.open(fileobj=data, mode="r|gz")
    return tar.extractfile(tar.next())  # type: ignore[arg-type]


@pytest.mark.parametrize("make", [Trickle, OneArgSeek, _gzip_over_a_pipe,
                                  _tar_member_read_from_a_stream])
@pytest.mark.parametrize("text", ["n: 1\n", SHAPES])
def test_a_stream_not_of_pythons_own_io_goes_to_pyyaml_untouched(store, monkeypatch, make, text):
    # Regression: a GzipFile over a pipe and a tar member read from a stream raised where
    # PyYAML parses (the one says it can seek and cannot rewind; the other has no seekable()).
    monkeypatch.setattr(yaml_cache, "SMALLEST", len(SHAPES))  # the short text is not kept
    original = Counted()
    load = caching(module(original))
    assert load(make(text)) == yaml.safe_load(text) and original.calls == 1
    assert not store.values


def test_what_fails_to_parse_fails_as_pyyamls_own_naming_the_file_and_is_not_kept(tmp_path,
                                                                                 store):
    original = Counted()
    load = caching(module(original))
    path = tmp_path / "bad shapes; x.yaml"
    path.write_text("a:\t1\n")  # a tab PyYAML's parser refuses
    with pytest.raises(yaml.YAMLError) as own:
        parse(yaml.safe_load, path)
    for calls in (1, 2):
        with pytest.raises(yaml.YAMLError) as ours:
            parse(load, path)
        assert str(ours.value) == str(own.value) and str(path) in str(ours.value)
        assert original.calls == calls
    assert not store.values


def test_a_loader_changed_since_the_parse_parses_again(store):
    class Loader(yaml.SafeLoader):
        """A loader of the test's own, changed as a session might change SafeLoader."""

    original = Counted(Loader)
    load = caching(module(original))
    assert load("n: 7\nflag: switch-on\n") == {"n": 7, "flag": "switch-on"}
    Loader.add_constructor("tag:yaml.org,2002:int", lambda loader, node: f"int {node.value}")
    # a tag's entry replaced
    assert load("n: 7\nflag: switch-on\n") == {"n": "int 7", "flag": "switch-on"}
    Loader.add_implicit_resolver("!on", re.compile("^switch-on$"), ["s"])
    Loader.add_constructor("!on", lambda loader, node: "switch")
    assert load("n: 7\nflag: switch-on\n") == {"n": "int 7", "flag": "switch"}  # a resolver
    assert original.calls == 3


def test_a_parse_that_another_librarys_code_took_part_in_is_never_kept(tmp_path, store):
    class Loader(yaml.SafeLoader):
        """A loader with a tag whose constructor reads a file, as a library may register."""

    value = tmp_path / "value.txt"
    Loader.add_constructor("!file", lambda loader, node: value.read_text())
    original = Counted(Loader)
    load = caching(module(original))
    for text in ("one", "two"):
        value.write_text(text)
        assert load("v: !file x\n") == {"v": text}
    assert original.calls == 2 and not store.values


def test_a_value_of_the_loader_replaced_again_and_again_is_never_mistaken_for_another(store):
    # Regression: the key held the ids of the loader's values alone, and a value let go gave
    # its id to a later one: a parse of another state was answered.
    class Loader(yaml.SafeLoader):
        """A loader whose `.inf` changes, as a session might change a loader's value."""

    original = Counted(Loader)
    load = caching(module(original))
    for n in range(8):
        Loader.inf_value = float(n)  # the one before is let go: a later float may take its id
        assert load("v: .inf\n") == {"v": float(n)}
    assert original.calls == 8
    # what keeps an id from being taken: each parse holds every object its key names by id
    for (_, ids), (objects, _) in store.values.items():
        assert tuple(map(id, objects)) == ids[2:]  # after the two interpreter limits


def test_pyyamls_load_or_safeloader_rebound_is_followed(store, monkeypatch):
    load = caching(yaml)
    assert load("n: 7\n") == {"n": 7}
    monkeypatch.setattr(yaml, "SafeLoader", yaml.BaseLoader)  # every scalar a string
    assert load("n: 7\n") == yaml.safe_load("n: 7\n") == {"n": "7"}
    monkeypatch.setattr(yaml, "load", lambda stream, Loader: {"said": "theirs"})
    assert load("n: 7\n") == {"said": "theirs"}


def test_a_function_of_pyyamls_own_registered_is_kept_with_it_and_a_wrapper_of_another_never(
        store):
    class Loader(yaml.SafeLoader):
        """A loader whose ints are read as strings, by PyYAML's own constructor of strings."""

    original = Counted(Loader)
    load = caching(module(original))
    Loader.add_constructor("tag:yaml.org,2002:int", yaml.constructor.SafeConstructor
                           .construct_yaml_str)
    assert load("n: 7\n") == load("n: 7\n") == {"n": "7"} and original.calls == 1
    own = yaml.constructor.SafeConstructor.construct_mapping

    @functools.wraps(own)  # its __module__ and __qualname__ are PyYAML's; its code is not
    def strict(self: Any, node: Any, deep: bool = False) -> Any:
        if os.environ.get("ZL_TEST_STRICT") == "1":
            raise yaml.constructor.ConstructorError(None, None, "strict", node.start_mark)
        return own(self, node, deep)

    Loader.construct_mapping = strict  # type: ignore[method-assign]
    assert load("n: 7\n") == {"n": "7"} and original.calls == 2
    del Loader.construct_mapping
    # PyYAML's own, but not its safe loading's: a full loader's constructor may call anything
    Loader.add_constructor("!apply", yaml.constructor.FullConstructor
                           .construct_python_object_apply)
    assert load("n: 7\n") == {"n": "7"} and original.calls == 3
    assert len(store.values) == 1  # neither of those two parses was kept


@pytest.mark.parametrize("text", ["when: 2024-01-02\n", "raw: !!binary aGk=\n",
                                  "s: !!set {a: null}\n", "deep: " + "[" * 70 + "]" * 70 + "\n",
                                  "wide: [" + "0, " * (1 << 15) + "0]\n"])
def test_a_document_that_is_not_plain_data_within_bounds_is_answered_and_never_kept(store, text):
    original = Counted()
    load = caching(module(original))
    for calls in (1, 2):
        assert load(text) == yaml.safe_load(text) and original.calls == calls
    assert not store.values


def test_a_registry_or_a_value_whose_code_is_another_librarys_is_never_kept(store, monkeypatch):
    # Regression: a dict subclass as a registry, or a Mock(spec=str) as a constructor, passed
    # for data (isinstance), and their code was answered from the first parse.
    class Loader(yaml.SafeLoader):
        """A loader whose registry reads the environment."""

    class Registry(dict):
        """Constructors by tag, an int read as a string where the environment says so."""

        def __getitem__(self, tag: str) -> Any:
            if tag.endswith(":int") and os.environ.get("ZL_TEST_INTS_AS_STR") == "1":
                return yaml.constructor.SafeConstructor.construct_yaml_str
            return super().__getitem__(tag)

    Loader.yaml_constructors = Registry(yaml.SafeLoader.yaml_constructors)
    original = Counted(Loader)
    load = caching(module(original))
    for value, want in (("0", 7), ("1", "7"), ("0", 7)):
        monkeypatch.setenv("ZL_TEST_INTS_AS_STR", value)
        assert load("n: 7\n") == {"n": want}
    del Loader.yaml_constructors
    Loader.add_constructor("!v", mock.Mock(spec=str, side_effect=["call 1", "call 2"]))
    assert [load("v: !v x\n") for _ in range(2)] == [{"v": "call 1"}, {"v": "call 2"}]
    assert not store.values


def test_a_nan_is_a_parses_own_object_and_is_never_kept(store):
    text = "v: !!float nan\n"
    load = caching(module(Counted()))
    assert (load(text) == load(text)) is (yaml.safe_load(text) == yaml.safe_load(text)) is False
    assert not store.values


def test_a_class_of_pyyamls_changed_in_place_parses_again(store, monkeypatch):
    # Regression: the nodes, events and marks PyYAML's parse makes were keyed by their classes'
    # ids alone, and a method patched in place kept them.
    load = caching(module(Counted()))
    assert load("s: hello\n") == {"s": "hello"}
    own = yaml.nodes.ScalarNode.__init__

    def shouting(self: Any, tag: str, value: str, *args: Any, **kwargs: Any) -> None:
        own(self, tag, value.upper(), *args, **kwargs)

    monkeypatch.setattr(yaml.nodes.ScalarNode, "__init__", shouting)
    assert load("s: hello\n") == yaml.safe_load("s: hello\n") == {"S": "HELLO"}


def test_shared_parts_of_a_document_are_shared_in_each_copy_as_in_a_parse(store):
    text = "a: &x [1, 2]\nb: *x\nc: &y {k: *x}\nd: *y\n"
    load = caching(module(Counted()))
    own = yaml.safe_load(text)
    for got in (load(text), load(text)):  # a miss, then a hit
        assert got == own and got["a"] is got["b"] is got["c"]["k"] and got["c"] is got["d"]
    assert load(text)["a"] is not load(text)["a"]


def test_the_interpreters_limits_are_part_of_the_key(store):
    big = "n: " + "9" * 5000 + "\n"
    load = caching(module(Counted()))
    limit = sys.get_int_max_str_digits()
    try:
        sys.set_int_max_str_digits(0)
        assert load(big) == yaml.safe_load(big)
    finally:
        sys.set_int_max_str_digits(limit)
    with pytest.raises(ValueError, match="Exceeds the limit"):
        yaml.safe_load(big)
    with pytest.raises(ValueError, match="Exceeds the limit"):
        load(big)  # the parse kept under no limit is not this one's


def test_loads_from_threads_at_once_each_get_their_own_document(store, monkeypatch):
    # Regression: the store's eviction raced ("dictionary changed size during iteration").
    monkeypatch.setattr(memo, "PARSED", memo.Store(limit=2))
    monkeypatch.setattr(sys, "getswitchinterval", sys.getswitchinterval)
    load, errors = caching(module(Counted())), []
    interval = sys.getswitchinterval()

    def loads(n: int) -> None:
        try:
            for i in range(40):
                assert load(f"k{n}_{i}: {i}\n") == {f"k{n}_{i}": i}
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(repr(exc))

    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=loads, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []


def test_what_is_not_a_plain_text_or_pythons_own_stream_goes_to_pyyaml_as_it_was(tmp_path,
                                                                                store):
    original = Counted()
    load = caching(module(original))
    path = tmp_path / "s.yaml"
    path.write_text("# header\n" + SHAPES)
    with codecs.open(str(path), encoding="utf-8") as file:  # its tell() runs ahead of its reads
        file.readline()
        assert load(file) == yaml.safe_load(SHAPES)

    class Text(str):
        """A str of a caller's own."""

    assert load(Text(SHAPES)) == yaml.safe_load(SHAPES)
    assert original.calls == 2 and not store.values


def test_a_short_text_is_parsed_each_time(store, monkeypatch):
    monkeypatch.setattr(yaml_cache, "SMALLEST", len(SHAPES) + 1)
    original = Counted()
    load = caching(module(original))
    assert load(SHAPES) == load(SHAPES) == yaml.safe_load(SHAPES) and original.calls == 2
    assert not store.values


def test_a_stream_that_cannot_be_rewound_or_is_too_long_is_parsed_each_time(tmp_path, store,
                                                                           monkeypatch):
    original = Counted()
    load = caching(module(original))
    for _ in range(2):
        read, write = os.pipe()
        os.write(write, SHAPES.encode())
        os.close(write)
        with open(read, encoding="utf-8") as pipe:
            assert load(pipe) == yaml.safe_load(SHAPES)
    monkeypatch.setattr(yaml_cache, "LARGEST", len(SHAPES) - 1)
    big = tmp_path / "big.yaml"
    big.write_text(SHAPES)
    assert parse(load, big) == yaml.safe_load(SHAPES)
    assert original.calls == 3 and not store.values


def test_the_store_keeps_its_most_recently_used_entries(store):
    small = memo.Store(limit=2)
    for key in "abca":
        small.put(key, key.upper())
    assert list(small.values) == ["c", "a"] and small.get("b", "none") == "none"
    assert small.get("c") == "C"  # read: the newest again
    small.put("d", "D")
    assert list(small.values) == ["c", "d"]


SESSION_TEST = '''import yaml

from harness.plugins import memo


def test_shapes():
    with open("core_shapes.yaml") as file:
        assert yaml.safe_load(file)["Sum"] == {"shapes": [[16]]}
    (key, kept), = memo.PARSED.values.items()
    print("kept", id(memo), id(kept), yaml.safe_load.__module__)
'''


def test_a_worker_keeps_a_parse_for_its_next_session_and_puts_pyyaml_back_after_each(
        tmp_path):
    suite = tmp_path / "suite"
    (suite / "tests").mkdir(parents=True)
    (suite / "tests" / "test_shapes.py").write_text(SESSION_TEST)
    (suite / "core_shapes.yaml").write_text(  # as long as a shapes file: it is kept
        SHAPES + "".join(f"op{i}:\n  shapes: [[{i}, 64]]\n" for i in range(80)))
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO_ROOT),
           "PYTEST_PLUGINS": "harness.plugins.yaml_cache", boundary.BACKEND_VAR: "cpu"}
    argv = [sys.executable, "-m", "pytest", "tests/test_shapes.py", "-s", "-q", "-p",
            "no:cacheprovider"]
    kept, facts = [], []
    with WorkerHost() as host:
        for _ in range(3):
            proc, fact = start_pytest(argv, suite, env, host.path)
            assert proc.stdout is not None
            out = proc.stdout.read().decode()
            assert proc.wait() == 0, out
            kept.append(next(x for x in out.splitlines() if x.startswith("kept")).split()[1:])
            facts.append(fact)
    # one worker, never retired: yaml.safe_load was PyYAML's own again after each session
    assert [(f["kind"], f["session"], f["retired"]) for f in facts] == [
        ("worker", n, None) for n in (1, 2, 3)]
    # the store is the same module's in every session, holding the first session's parse
    assert kept[0] == kept[1] == kept[2]
    assert kept[0][2] == "harness.plugins.yaml_cache"


def test_a_session_leaves_pyyaml_as_it_found_it(pytester):
    own = yaml.safe_load
    pytester.makepyfile(test_it="""
import yaml
def test_it():
    assert yaml.safe_load.__module__ == "harness.plugins.yaml_cache"
    assert yaml.safe_load("a: 1") == {"a": 1}
""")
    pytester.runpytest("-p", "harness.plugins.yaml_cache").assert_outcomes(passed=1)
    assert yaml.safe_load is own
