"""The one table of user variables, from which flags, make help and environment names derive."""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from types import MappingProxyType

from harness.errors import UsageError
from harness.settings import kinds, paths
from harness.settings.kinds import DEFAULT_CAP, Kind

LEVELS = ("core", "comprehensive")
SHAPE_MODES = ("upstream", "file", "smoke")
MODES = ("auto", "graph", "direct")
GRAPH_TIMERS = ("adaptive", "upstream", "steady")  # boundary.GRAPH_TIMERS, which the plugin reads
BASELINES = ("auto", "every", "once", "off")
WORKER_CHOICES = ("0", "1", "A", "B")
CLUSTER_RUNNERS = ("pyxis", "apptainer")  # run a Slurm task in the image; EXECUTOR=slurm only
RUNNERS = ("host", "docker", "podman", *CLUSTER_RUNNERS)
EXECUTORS = ("local", "slurm")
SLURM_UNITS = ("gpu", "node")  # a Slurm task takes one device, or a whole node
MAX_ROUNDS = 100  # an A/B of more rounds is a typo, not a campaign (each round runs both sides)
# ROUNDS=auto: 2 rounds give a first t interval; past 6 an undecided row is noise, not signal.
AUTO_MIN_ROUNDS, AUTO_MAX_ROUNDS = 2, 6
# A unit's time limit by default: an hour. FlagGems' slowest core operator tunes cold in about
# 4 minutes on an H200 (mm: 237 s), so an A/B unit's two sides take under 10; an hour leaves
# room for slower devices and the comprehensive level, yet a hung operator costs its device
# an hour of an unattended suite rather than the rest of the night. 0 lifts the limit.
UNIT_TIMEOUT_S = 3600
WALL_MULTIPLE = 5  # a unit of a known wall may take this many times it before it is stopped

# The subcommands that take variables. A run's settings go to every command that runs one
# node (ONE_NODE) and to batch, which takes OPS instead of OP.
ONE_NODE = ("preflight", "run", "ab", "ab-unit", "shell", "bisect")
RUNS = (*ONE_NODE, "batch")
UNITS = ("ab", "batch")  # many units, on this host's devices or a Slurm array
COMMANDS = (*RUNS, "image", "pin", "summary", "report", "receipt verify", "status")

# Argument groups of a subcommand's help, by title.
SETTINGS = "settings (each also read from its environment variable)"
OPERATORS = "operators and suite campaigns"
BISECT = "what bisect searches"
AB_BISECT = ("ab", "bisect")  # a campaign's settings: bisect's campaigns take them too
EXECUTOR = "where units run (EXECUTOR)"
MAKE = "make's own"  # no flag: make hands them over another way (a path, words, the env)


def environ() -> MutableMapping[str, str]:
    """This process's environment: the one place the harness reads it (the pytest plugins
    read the host's hand-over through boundary)."""
    return os.environ


@dataclass(frozen=True)
class Var:
    """One user variable: its Make name, environment name, flag, and who takes it.

    `env` None: read from the flag only; `flag` None: make hands it over itself (RUN as a
    path, SUMMARY_ARGS as words, ALLOW_UNPINNED in the environment). `commands` are the
    subcommands that take its flag (or, flagless, read it). `field` and `kind` make it a
    run's setting: a new one is this row and its Settings field, nothing else.
    """

    make: str
    env: str | None
    flag: str | None
    help: str
    default: str | None = None
    choices: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()  # further flags, e.g. --gpus for --devices
    default_doc: str | None = None  # the default in words, where it is decided at run time
    commands: tuple[str, ...] = RUNS
    group: str = SETTINGS
    metavar: str | None = None  # default: the Make name
    bare: str | None = None  # the value of the flag given alone (--dry-run: 1)
    switch: bool = False  # a flag that takes no value (--detach); make's 1 gives it
    meanings: tuple[tuple[str, str], ...] = ()  # (subcommand, help) where one reads it otherwise
    make_help: str | None = None  # what `make help` says, where the flag's help does not fit
    refuse_empty: bool = False  # an empty value is refused, not read as "not given" (A=, B=)
    # A run's setting: its Settings field (None: read where it is used) and how it is read
    field: str | None = None
    kind: Kind = kinds.TEXT

    @property
    def env_name(self) -> str:
        """Its environment variable, for a caller that only handles variables that have one."""
        if self.env is None:
            raise ValueError(f"{self.make} has no environment variable: it is read from "
                             f"its flag {self.flag} only")
        return self.env

    @property
    def flag_name(self) -> str:
        """Its flag, for a caller that only handles variables that have one."""
        if self.flag is None:
            raise ValueError(f"{self.make} has no flag: make hands it over itself")
        return self.flag

    @property
    def dest(self) -> str:
        return (self.flag or self.make).lstrip("-").replace("-", "_").lower()

    def lookup(self, flags: Mapping[str, object], env: Mapping[str, str]
               ) -> tuple[str | None, str]:
        """(value, source): the flag's ("flag") where given, else the environment's ("env"),
        else (the default, "default"). An empty value counts as not given; a value with a
        control character is refused (UsageError)."""
        value = flags.get(self.dest) if self.flag else None
        if value is True:  # a switch given
            return "1", "flag"
        self._not_empty(value, "flag")
        if value not in (None, "", False):
            return self._fits(str(value), "flag"), "flag"
        value = env.get(self.env) if self.env else None
        self._not_empty(value, "env")
        if value not in (None, ""):
            return self._fits(str(value), "env"), "env"
        return self.default, "default"

    def _fits(self, value: str, source: str) -> str:
        """`value`, refused where it holds a control character (kinds.one_line) or names a
        path no file system opens (paths.fits)."""
        label = self.label(source)
        return paths.fits(self.make, label, kinds.one_line(label, value))

    def _not_empty(self, value: object, source: str) -> None:
        """UsageError for an empty value of a variable that refuses one: `A=` silently ran
        side A with the default 0."""
        if value == "" and self.refuse_empty:
            raise UsageError(f"{self.label(source)}='' is not accepted; expected a value (leave "
                             f"{self.make} out for its default, {self.default})")

    def given(self, flags: Mapping[str, object], env: Mapping[str, str]) -> str | None:
        """Its value where one was given: the flag's, else its environment variable's."""
        value, source = self.lookup(flags, env)
        return None if source == "default" else value

    def label(self, source: str) -> str:
        """How an error names the variable: by the spelling the user actually wrote."""
        if source == "flag" and self.flag:
            return f"{self.make} ({self.flag})"
        return self.env if source == "env" and self.env else self.make

    def help_text(self, command: str | None = None) -> str:
        """The flag's help on `command`: a setting's gives its meaning, choices, default and
        environment name, as the README does; any other its meaning and [its name]."""
        meaning = dict(self.meanings).get(command or "", self.help)
        if self.group != SETTINGS:
            return f"{meaning} [{self.env or self.make}]"
        facts = [f"one of: {', '.join(self.choices)}"] if self.choices else []
        if self.default is not None or self.default_doc:
            facts.append(f"default: {self.default_doc or self.default}")
        facts.append(f"env: {self.env}")
        return f"{meaning} ({'; '.join(facts)})"

    def make_text(self) -> str:
        """What `make help` says of it."""
        if self.make_help or self.group == MAKE:
            return self.make_help or self.help
        default = f"; default {self.default}" if self.default is not None else ""
        return f"{self.help} [{self.env}{default}]"


def _unit_var(make: str, env: str | None, help: str, default: str | None = None,
              choices: tuple[str, ...] = (), switch: bool = False,
              commands: tuple[str, ...] = UNITS) -> Var:
    """A variable of where ab's and batch's units run."""
    flag = "--" + make.lower().replace("_", "-")
    said = f"; default {default}" if default is not None else ""
    return Var(make, env, flag, help, default, choices, commands=commands, group=EXECUTOR,
               switch=switch, make_help=f"ab, batch: {help} [{env or make}{said}]")


_UNIT_TIMEOUT_HELP = (
    "seconds a unit (a batch's operator, a campaign's unit) may run before its process group is "
    f"stopped and it is recorded timeout: a whole number, 0 for no limit; default "
    f"{UNIT_TIMEOUT_S}; with WALLS_FROM, at least {WALL_MULTIPLE} times the operator's wall there")
_WARMUP_SHARE_HELP = (
    "I/N: this run is share I of a parallel warmup's N: it tunes its share of each tuner's "
    "configs (those it claims first, else I, I+N, ...) and times nothing (set by the warmup "
    "for its shards; 0/1 times a whole sweep)")

TABLE: tuple[Var, ...] = (
    # A run's settings (DESIGN.md's Variables), in the order of its flags.
    Var("BACKEND", "ZL_BACKEND", "--backend", "a backend of `harness backends`, or an alias",
        default_doc="detected; cpu when no accelerator", commands=(*RUNS, "image", "pin"),
        field="backend", kind=kinds.BACKEND),
    Var("OP", "OP", "--op", "operator to run, resolved to a FlagGems benchmark node",
        commands=ONE_NODE, field="op", kind=kinds.OPERATOR),
    Var("OP_FILE", "OP_FILE", "--op-file", "benchmark file that holds OP", commands=ONE_NODE,
        field="op_file"),
    Var("TEST_NODE", "TEST_NODE", "--node", "pytest node, e.g. benchmark/test_mm.py::test_mm",
        commands=ONE_NODE, field="test_node"),
    Var("LEVEL", "BENCH_LEVEL", "--level", "benchmark level", "core", LEVELS,
        field="level"),
    Var("SHAPE_MODE", "SHAPE_MODE", "--shape-mode", "shape source (smoke: FlagGems' own, "
        "first input of the first dtype only, to see what runs)", "upstream", SHAPE_MODES,
        field="shape_mode"),
    Var("SHAPE_FILE", "SHAPE_FILE", "--shape-file", "shape YAML for SHAPE_MODE=file",
        field="shape_file", kind=kinds.PATH),
    Var("DTYPES", "ZL_DTYPES", "--dtypes", "dtypes to measure, comma-separated torch names "
        "(FlagGems' --dtypes)", default_doc="the benchmark's own", field="dtypes",
        kind=kinds.DTYPES),
    Var("MODE", "ZL_TIMER", "--mode", "timer (auto: graph where the backend can capture)",
        "auto", MODES, field="mode"),
    Var("GRAPH_TIMER", "ZL_GRAPH_TIMER", "--graph-timer", "the graph timer's algorithm: "
        "adaptive, Triton's do_bench_cudagraph at a tenth of its replays where a call takes "
        "5 us or more, its whole budget elsewhere; upstream, "
        "do_bench_cudagraph as FlagGems' own runs use it; steady, replays queued back to back "
        "on a busy device (microsecond rows steadier, and lower than FlagGems' own numbers)",
        "adaptive", GRAPH_TIMERS, field="graph_timer"),
    *(Var(f"{k}_MS", f"ZL_{k}_MS", f"--{k.lower()}-ms", f"ms {what} (FlagGems' {option}), 1 to "
          f"{kinds.MAX_BUDGET_MS}", default_doc=f"the benchmark's own: {n} in FlagGems",
          field=f"{k.lower()}_ms", kind=kinds.MILLIS) for k, what, option, n in (
        ("WARMUP", "each measurement warms up for", "--warmup", 1000),
        ("ITER", "of timed calls in each measurement", "--iter; the graph timer's rep", 100))),
    Var("REPEAT", "ZL_DIRECT_REPEAT", "--repeat", "timing repeats per shape, 1 to 1000", "1",
        field="repeat", kind=kinds.REPEAT),
    Var("BASELINE", "ZL_BASELINE", "--baseline", "when torch's reference (FlagGems' "
        "latency_base) is timed: every run, once (an A/B campaign's round 0, both sides), off; "
        "auto: once in a campaign whose axis cannot change torch's kernels (none, or a compiler "
        "switch), every otherwise", "auto", BASELINES, field="baseline"),
    Var("ISOLATE_TUNER_CACHE", "ZL_ISOLATE_TUNER_CACHE", "--isolate-tuner-cache",
        "1: private FlagGems and Triton caches for this run", "0", ("0", "1"),
        field="isolate_tuner_cache", kind=kinds.SWITCH),
    Var("RECORD", "ZL_RECORD", "--record", "1: record the autotune winners this run used",
        "0", ("0", "1"), field="record", kind=kinds.SWITCH),
    Var("REPLAY_FROM", "REPLAY_FROM", "--replay-from", "run whose autotune winners are pinned",
        field="replay_from", kind=kinds.PATH),
    Var("REPLAY_STRICT", "REPLAY_STRICT", "--replay-strict",
        "1: a key missing from the replayed records fails the operator", "0", ("0", "1"),
        field="replay_strict", kind=kinds.SWITCH),
    Var("USE_FLAGTUNE", "USE_FLAGTUNE", "--use-flagtune", "1: FlagGems' exhaustive search",
        "0", ("0", "1"), field="use_flagtune", kind=kinds.SWITCH),
    Var("PARALLEL_WARMUP_GPUS", "PARALLEL_WARMUP_GPUS", "--parallel-warmup-gpus",
        "shard the autotune sweep over N devices", field="parallel_warmup_gpus", kind=kinds.COUNT),
    Var("WARMUP_SHARE", "ZL_WARMUP_SHARE", "--warmup-share", _WARMUP_SHARE_HELP,
        field="warmup_share", kind=kinds.SHARE),
    Var("DEVICES", "ZL_DEVICES", "--devices", "device ids to use, comma-separated indices "
        "or UUIDs", aliases=("--gpus",), default_doc="all visible", field="devices",
        kind=kinds.DEVICES),
    Var("FLAGGEMS_DIR", "FLAGGEMS_DIR", "--flaggems-dir", "FlagGems checkout holding benchmark/",
        default_doc="the image's; examples/cpu_suite on cpu", field="flaggems_dir",
        kind=kinds.PATH),
    Var("COMPILE_WORKERS", "ZL_COMPILE_WORKERS", "--compile-workers",
        "threads that compile a key's autotune candidates together before they are timed "
        f"one by one; 0: off (default: the host's cores, at most {DEFAULT_CAP})",
        field="compile_workers", kind=kinds.WORKERS),
    Var("TUNE_SCREEN", "ZL_TUNE_SCREEN", "--tune-screen", "1: a sweep's candidates are timed "
        "briefly first, and the tuner times those within 1.3x of the fastest; 0: all of them",
        "0", ("0", "1"), field="tune_screen", kind=kinds.SWITCH),
    Var("AXIS", "ZL_AXIS", "--axis", "ab: a switch the backend knows (a short name such as "
        "RLC_ENHANCE, or its variable: `harness backends --json` lists axis_switches), "
        "env:NAME for any other environment variable, none (an A/A), python (two "
        "interpreters: A_PYTHON, B_PYTHON), flaggems (two FlagGems commits: A_REF, B_REF) or "
        "image (two images: A_IMAGE, B_IMAGE)", commands=AB_BISECT, meanings=(("bisect", (
            "flaggems (commits GOOD..BAD, the default), python or image (STACKS)")),)),
    Var("A", "ZL_A", "--a", "ab: the switch's value on side A (off)", "0", commands=("ab",),
        refuse_empty=True),
    Var("B", "ZL_B", "--b", "ab: the switch's value on side B (on)", "1", commands=("ab",),
        refuse_empty=True),
    Var("A_PYTHON", "ZL_A_PYTHON", "--a-python", "ab, AXIS=python: side A's interpreter (its "
        "torch, Triton or FlagTree, flag_gems)", commands=("ab",)),
    Var("B_PYTHON", "ZL_B_PYTHON", "--b-python", "ab, AXIS=python: side B's interpreter",
        commands=("ab",)),
    Var("TUNE", "ZL_TUNE", "--tune", "ab: replay (side B pins A/r0's autotune winners) or each "
        "(each side tunes in round 0 and replays its own after)", choices=("replay", "each"),
        default_doc="each for AXIS=python, replay otherwise", commands=AB_BISECT),
    Var("A_IMAGE", "ZL_A_IMAGE", "--a-image", "ab, AXIS=image: side A's image, "
        "name@sha256:<digest> (RUNNER docker or podman)", commands=("ab",)),
    Var("B_IMAGE", "ZL_B_IMAGE", "--b-image", "ab, AXIS=image: side B's image", commands=("ab",)),
    Var("A_REF", "ZL_A_REF", "--a-ref", "ab, AXIS=flaggems: side A's FlagGems commit (of "
        "FLAGGEMS_DIR's git)", commands=("ab",)),
    Var("B_REF", "ZL_B_REF", "--b-ref", "ab, AXIS=flaggems: side B's FlagGems commit",
        commands=("ab",)),
    Var("BENCH_REF", "ZL_BENCH_REF", "--bench-ref", "ab, AXIS=flaggems: the commit whose "
        "benchmark files both sides run", default_doc="A_REF (bisect: GOOD)",
        commands=AB_BISECT),
    *(Var(f"{k}_ROUNDS", f"ZL_{k}_ROUNDS", f"--{k.lower()}-rounds", f"ab, ROUNDS=auto: {what}",
          str(n), commands=AB_BISECT) for k, what, n in (
        ("MIN", "rounds every operator runs before its first look, at least 2", AUTO_MIN_ROUNDS),
        ("MAX", "rounds an operator with a row undecided runs at most", AUTO_MAX_ROUNDS))),
    Var("ROUNDS", "ZL_ROUNDS", "--rounds", f"ab: interleaved rounds, 2 to {MAX_ROUNDS} (1 with "
        "AXIS=none), or auto (MIN_ROUNDS, then one more round at a time for operators with a "
        "row undecided, up to MAX_ROUNDS)", "3",
        commands=AB_BISECT, meanings=(("bisect", "each A/B's: auto (default) or 2 to 100"),)),
    Var("NOISE_FROM", "ZL_NOISE_FROM", "--noise-from",
        "ab: an A/A campaign (AXIS=none) whose rows give each row its noise floor, by its "
        "A latency; refused where a floor is above 25%", commands=AB_BISECT),
    Var("NOISE_FLOOR", "ZL_NOISE_FLOOR", "--noise-floor", "ab: every row's noise floor, 1 to 25 "
        "(%), not with NOISE_FROM", default_doc="1; bisect: half the ends' step",
        commands=AB_BISECT),
    Var("RUNNER", "ZL_RUNNER", "--runner", "where the run happens (pyxis or apptainer: "
        "EXECUTOR=slurm only)", None, RUNNERS,
        default_doc="host inside an image and for cpu, else docker or podman",
        commands=(*RUNS, "image"), field="runner"),
    Var("OUT", "ZL_OUT", "--out", "root of run outputs", "runs", field="out", kind=kinds.OUT),
    Var("HISTORY", "ZL_HISTORY", "--history", "the store each run is recorded in: off, an SQLite "
        "file, sqlite:///PATH or postgresql://...", default_doc="OUT/history.sqlite"),
    Var("DRY_RUN", "ZL_DRY_RUN", "--dry-run", "print what would run, run nothing", "0",
        ("0", "1"), commands=(*RUNS, "image", "pin"), metavar="0|1", bare="1", field="dry_run",
        kind=kinds.SWITCH),
    # What ab and batch run: many operators.
    Var("OPS", "OPS", "--ops", "comma-separated operators, e.g. tanh,add,mm", commands=UNITS,
        group=OPERATORS,
        meanings=(("ab", "comma-separated operators, or all (every node of the tree)"),),
        make_help="batch, ab: comma-separated operators, e.g. tanh,add,mm (ab: all for every "
        "node of the tree)"),
    Var("OPS_FILE", "OPS_FILE", "--ops-file", "file with one operator per line, # comments",
        commands=UNITS, group=OPERATORS,
        make_help="batch, ab: a file of operators, one a line, # comments"),
    Var("WALLS_FROM", "WALLS_FROM", "--walls-from", "EXECUTOR=slurm DRY_RUN: an earlier batch "
        "or campaign whose walls estimate the makespan", commands=UNITS, group=OPERATORS,
        metavar="DIR", meanings=(("ab", "an earlier campaign or batch: its walls order units "
                                        "longest first"),),
        make_help="ab: an earlier campaign or batch whose walls order the units longest first "
        "(batch: EXECUTOR=slurm DRY_RUN's estimate)"),
    Var("RESUME", None, "--resume", "complete the campaign in DIR; with --rounds N extend it "
        "to N rounds", commands=AB_BISECT, group=OPERATORS, metavar="DIR",
        meanings=(("bisect", "go on with the bisection in DIR from the A/Bs that ended"),),
        make_help="ab: complete the campaign in this directory (with ROUNDS: extend it to "
        "that many rounds)"),
    Var("ONLY", None, "--only", "with --resume: add rounds only to operators with this "
        "verdict, e.g. inconclusive", commands=("ab",), group=OPERATORS, metavar="VERDICT",
        make_help="ab with RESUME: add rounds only to operators with this verdict, e.g. "
        "inconclusive"),
    Var("EXCLUDE", None, "--exclude", "with --resume: finish the campaign without these "
        "operators (comma-separated; kept by later resumes; none: every operator again)",
        commands=("ab",), group=OPERATORS, metavar="OPS",
        make_help="ab with RESUME: finish the campaign without these operators, e.g. one that "
        "hangs (later resumes keep them out; EXCLUDE=none takes them back)"),
    Var("FAIL_ON", "ZL_FAIL_ON", "--fail-on", "ab, report: verdicts that make the command exit "
        "7, comma-separated: slower, faster, any-called, changed, failed (docs/ci.md)",
        commands=("ab", "report"), group=OPERATORS, metavar="VERDICTS"),
    # What bisect searches.
    *(Var(make, f"ZL_{make}", f"--{make.lower()}", what, commands=("bisect",), group=BISECT,
          metavar=meta) for make, what, meta in (
        ("GOOD", "the good end: a commit of FLAGGEMS_DIR, or an entry of STACKS (its first)",
         "REF"),
        ("BAD", "the bad end: a later commit (GOOD on its first parents), or a later entry of "
         "STACKS (its last)", "REF"),
        ("STACKS", "AXIS=python or image: a file of stacks in order, one a line", "FILE"),
        ("SHAPE", "with DTYPES, the row that regressed, as ab.md writes its shape (default: "
         "every row)", "SHAPE"))),
    # make's own: no flag.
    Var("RUN", None, None, "summary, report, receipt, status: the run, batch, campaign or log "
        "to read (one path)", commands=("summary", "report", "receipt verify", "status"),
        group=MAKE, make_help="summary, report, receipt, status: the run, batch, campaign or "
        "log to read (one path)"),
    Var("SUMMARY_ARGS", None, None, "summary: further arguments, e.g. \"--ab A B --format "
        "csv\"; split into words as a POSIX shell would (quotes group), but no shell runs",
        commands=("summary",), group=MAKE),
    Var("HISTORY_ARGS", None, None, "history: the verb and its arguments, e.g. \"trend mm "
        "torch.float16 '[1024, 1024]' --format csv\" (default: list); split into words as a "
        "POSIX shell would (quotes group), but no shell runs", commands=(), group=MAKE),
    Var("ALLOW_UNPINNED", "ALLOW_UNPINNED", None, "image: 1 builds from a base tag that has "
        "no digest yet", commands=("image",), group=MAKE),
    Var("PYTHON", None, None, "the interpreter that runs the harness and pytest (make's own; "
        "default: .venv's when it exists, else python3)", commands=(), group=MAKE),
    # Where ab's and batch's units run.
    _unit_var("EXECUTOR", "ZL_EXECUTOR", "local (this host's DEVICES) or slurm (a job array)",
              "local", EXECUTORS),
    _unit_var("WORKERS", "ZL_WORKERS", "1: each device's runs get their pytest from a process "
              "that stays up (one per side of a campaign), paying imports and the device "
              "context once; 0: a fresh pytest process per run; A or B (ab only): that side's "
              "runs in workers and the other's fresh, to check that both measure alike", "1",
              WORKER_CHOICES, commands=(*UNITS, "bisect")),
    Var("UNIT_TIMEOUT", "ZL_UNIT_TIMEOUT", "--unit-timeout", _UNIT_TIMEOUT_HELP,
        str(UNIT_TIMEOUT_S), commands=(*UNITS, "bisect"), group=EXECUTOR, metavar="SECONDS",
        make_help=f"ab, batch: {_UNIT_TIMEOUT_HELP} [ZL_UNIT_TIMEOUT]"),
    _unit_var("SLURM_PARTITION", "SLURM_PARTITION", "slurm: partition"),
    _unit_var("SLURM_ACCOUNT", "SLURM_ACCOUNT", "slurm: account"),
    _unit_var("SLURM_TIME", "SLURM_TIME", "slurm: time limit of one task"),
    _unit_var("SLURM_PARALLEL", "SLURM_PARALLEL",
              "slurm: array tasks at once (%P); in node mode, nodes"),
    _unit_var("SLURM_ARGS", "SLURM_ARGS", "slurm: further sbatch options, --option[=value] each"),
    _unit_var("SLURM_UNIT", "SLURM_UNIT", "slurm: gpu (one device a task) or node (a whole node "
              "a task); default: the backend's", None, SLURM_UNITS),
    _unit_var("SLURM_IMAGE", "SLURM_IMAGE", "slurm: the harness image by digest "
              "(name@sha256:...) that RUNNER=pyxis or apptainer runs"),
    _unit_var("DETACH", None, "slurm: Ctrl-C leaves the array running (resume re-attaches)",
              switch=True),
)
BY_MAKE: Mapping[str, Var] = MappingProxyType({var.make: var for var in TABLE})


def named(make: str) -> Var:
    """The variable named `make`; a name outside the table lists the names in it."""
    try:
        return BY_MAKE[make]
    except KeyError:
        raise KeyError(f"{make!r} is not a variable; expected one of: "
                       f"{', '.join(sorted(BY_MAKE))}") from None


def group(title: str) -> tuple[Var, ...]:
    """The variables of one argument group (SETTINGS, OPERATORS, EXECUTOR, MAKE), in order."""
    return tuple(var for var in TABLE if var.group == title)
