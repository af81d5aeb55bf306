"""makevars: make's command-line variables into arguments, without a shell in between."""

from __future__ import annotations

import shlex

import pytest

from harness.cli import build_parser
from harness.errors import UsageError
from harness.settings import makevars, spec

PARSER = build_parser()


def quoted(**pairs: str) -> str:
    """ZL_MAKE_ARGS as the Makefile writes it."""
    return " ".join(shlex.quote(f"{k}={v}") for k, v in pairs.items())


def convert(argv: list[str], **pairs: str) -> tuple[list[str], dict[str, str]]:
    environ = {makevars.MAKE_ARGS_VAR: quoted(**pairs)}
    out = makevars.to_argv(PARSER, argv, makevars.given(environ), environ)
    return out, environ


def test_given_pops_the_variable_so_children_never_reapply_it():
    environ = {makevars.MAKE_ARGS_VAR: quoted(OP="a b", OUT="x=y"), "PATH": "/bin"}
    assert makevars.given(environ) == [("OP", "a b"), ("OUT", "x=y")]
    assert environ == {"PATH": "/bin"}
    assert makevars.given({}) == []


@pytest.mark.parametrize("text", ["'OP=a", "OP", "OP=a 'ZL_MAKE_ARGS=OUT=b'"])
def test_given_refuses_what_the_makefile_never_writes(text):
    with pytest.raises(UsageError, match=makevars.MAKE_ARGS_VAR):
        makevars.given({makevars.MAKE_ARGS_VAR: text})


def test_each_setting_becomes_one_flag_whatever_it_holds():
    argv, environ = convert(["run"], OP="add;echo x", OUT="/tmp/x y", DRY_RUN="1",
                            DTYPES="$(shell id)\n`id`")
    assert argv == ["run", "--op=add;echo x", "--out=/tmp/x y", "--dry-run=1",
                    "--dtypes=$(shell id)\n`id`"]
    args = PARSER.parse_args(argv)
    assert (args.op, args.out, args.dry_run) == ("add;echo x", "/tmp/x y", "1")
    assert environ == {}


def test_a_later_make_flag_beats_the_targets_own():
    argv, _ = convert(["ab", "--backend=cpu", "--op=mm", "--axis=OMP_NUM_THREADS"], OP="tanh")
    assert PARSER.parse_args(argv).op == "tanh"


def test_run_is_one_path_after_the_options_and_summary_args_are_split():
    argv, _ = convert(["summary"], RUN="-a b.log", SUMMARY_ARGS="--format csv --noise-floor '7'")
    assert argv == ["summary", "--format", "csv", "--noise-floor", "7", "--", "-a b.log"]
    args = PARSER.parse_args(argv)
    assert (args.runs, args.format, args.noise_floor) == (["-a b.log"], "csv", 7.0)


def test_receipt_verify_and_batch_get_their_own_arguments():
    argv, _ = convert(["receipt", "verify"], RUN="c d/receipt.json")
    assert PARSER.parse_args(argv).path == "c d/receipt.json"
    argv, _ = convert(["batch"], OPS="add,tanh", OPS_FILE="f g")
    assert argv == ["batch", "--ops=add,tanh", "--ops-file=f g"]


def test_a_variable_the_subcommand_has_no_flag_for_goes_to_the_environment():
    argv, environ = convert(["image"], BACKEND="cuda", OP="mm", ALLOW_UNPINNED="1",
                            SUMMARY_ARGS="--x", DRY_RUN="")
    assert argv == ["image", "--backend=cuda"]
    assert environ == {"OP": "mm", "ALLOW_UNPINNED": "1", "SUMMARY_ARGS": "--x"}


def test_help_lines_name_every_variable_once():
    text = "\n".join(makevars.help_lines())
    names = [v.make for v in spec.VARS] + [name for name, _, _ in makevars.MAKE_ONLY]
    assert len(names) == len(set(names))
    for name in names:
        assert f"\n  {name} " in text
    assert all(len(line) <= 100 for line in makevars.help_lines())


@pytest.mark.parametrize("name, closest", [("DTYPE", "DTYPES"), ("ROUND", "ROUNDS"),
                                           ("BAKCEND", "BACKEND"), ("SLURM_ARG", "SLURM_ARGS"),
                                           ("ZL_ROUND", "ZL_ROUNDS")])
def test_a_variable_the_harness_does_not_know_is_refused_naming_the_closest(name, closest):
    # Regression: DTYPE=float32 measured every dtype and ROUND=5 ran 3 rounds, silently.
    with pytest.raises(UsageError) as exc:
        convert(["ab"], BACKEND="cpu", **{name: "5"})
    message = str(exc.value)
    assert message.startswith(f"{name}='5' is not a variable") and "\n" not in message
    assert f"did you mean {closest}?" in message


def test_known_names_pass_through_to_the_environment():
    names = {"ZL_ENABLE_CUDAGRAPH": "0", "ALLOW_UNPINNED": "1", "ZL_ROUNDS": "3",
             "CUDA_VISIBLE_DEVICES": "1", "FLAGTREE_CUDA_RLC_ENHANCE": "1",
             "TRITON_CACHE_DIR": "/c"}
    argv, environ = convert(["run"], OP="mm", **names)
    assert argv == ["run", "--op=mm"]
    assert environ == names


def test_a_relative_path_is_resolved_against_the_directory_make_was_typed_in(tmp_path,
                                                                             monkeypatch):
    elsewhere = tmp_path / "work"
    elsewhere.mkdir()
    monkeypatch.chdir(tmp_path)  # where make -C ran the harness
    assert makevars.typed_path("FLAGGEMS_DIR", "../FlagGems", str(elsewhere)) == str(
        elsewhere / "../FlagGems")
    assert makevars.typed_path("OUT", "runs", str(tmp_path)) == "runs"  # typed in here: as is
    assert makevars.typed_path("OUT", "/abs/runs", str(elsewhere)) == "/abs/runs"
    assert makevars.typed_path("OP", "add", str(elsewhere)) == "add"  # names no path
    assert makevars.typed_path("OUT", "runs", None) == "runs"  # not run by make
    assert makevars.typed_path("OUT", "runs", "relative/dir") == "runs"


def test_history_args_give_the_verb_and_its_arguments_each_one_word():
    argv, _ = convert(["history"], HISTORY_ARGS="trend mm torch.float16 '[1024, 1024]'",
                      OUT="a b", HISTORY="x y.sqlite")
    assert argv == ["history", "trend", "mm", "torch.float16", "[1024, 1024]", "--out=a b",
                    "--history=x y.sqlite"]
    args = PARSER.parse_args(argv)
    assert (args.op, args.shape, args.out, args.history) == ("mm", "[1024, 1024]", "a b",
                                                             "x y.sqlite")


def test_make_history_without_history_args_lists():
    argv, _ = convert(["history"], OUT="runs")
    assert argv == ["history", "list", "--out=runs"]


def test_unbalanced_history_args_is_refused_naming_it():
    with pytest.raises(UsageError, match=r"HISTORY_ARGS=\"trend 'mm\" is not accepted"):
        convert(["history"], HISTORY_ARGS="trend 'mm")
