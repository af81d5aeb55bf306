# The front door. Every target calls one harness subcommand (or nox); the logic is in Python.
# Variables (see `make help` and DESIGN.md) become flags of the subcommand; each is also read
# from its environment variable by the harness itself.

.DEFAULT_GOAL := help
SHELL := /bin/bash

VENV := .venv
# The interpreter that runs the harness and, through it, pytest: the local venv that `make demo`
# builds when it exists, else python3 on PATH (on a GPU host: the one with the vendor's torch).
PYTHON ?= $(if $(wildcard $(VENV)/bin/python),$(VENV)/bin/python,python3)
# One word for the shell, whatever it holds: single quotes, each ' written as '\''.
quote = '$(subst ','\'',$(1))'
HARNESS = PYTHONPATH=$(call quote,$(CURDIR))$${PYTHONPATH:+:$$PYTHONPATH} $(call quote,$(PYTHON)) \
	-m harness.cli

# Only the variables given on the make command line reach the harness (it reads the environment
# itself, under the names of DESIGN.md), and they never pass through a shell: make hands them
# over unexpanded ($(value)) in one environment variable, NAME=value items quoted for shlex, and
# the harness turns each into one argument of its subcommand (harness/settings/makevars.py). make would
# otherwise export them itself, expanding any $(...) in them first.
GIVEN := $(foreach v,$(.VARIABLES),$(if $(filter command line,$(origin $(v))),$(v)))
unexport $(GIVEN)
override export ZL_MAKE_ARGS := $(foreach v,$(GIVEN),$(call quote,$(v)=$(value $(v))))
# The directory make was typed in: the invoking shell's PWD, which `make -C` leaves as it was
# (a recipe's shell resets it to the checkout); the harness resolves a relative path the user
# gave against it.
override export ZL_MAKE_CWD := $(or $(value PWD),$(CURDIR))

.PHONY: help demo test lint preflight run backends venv ab

help: ## list the targets and variables
	@echo "usage: make <target> [VARIABLE=value ...]"
	@echo
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'
	@echo
	@$(HARNESS) vars

# --no-compile: pip would otherwise compile every module of torch's wheel, most of which the
# cpu path never imports (77.7 s of CPU for the install, 25.5 s without; the first demo after it
# took 3 s longer, compiling what it imports).
$(VENV)/.installed: requirements/cpu.txt pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --no-compile -r requirements/cpu.txt
	$(VENV)/bin/python -m pip install -q --no-compile --no-deps -e .
	touch $@

venv: $(VENV)/.installed ## create .venv with the cpu stack (torch CPU build, pinned)

# The demo's switch really changes CPU timings: BLAS threads for mm, 1 against 2.
DEMO_AB = --backend=cpu --op=mm --axis=OMP_NUM_THREADS --a=1 --b=2 --rounds=3

demo: PYTHON = $(VENV)/bin/python
demo: $(VENV)/.installed ## the embedded default: an A/B on the cpu backend, with its report
	$(HARNESS) ab $(DEMO_AB)

# nox and the tests it runs must not inherit a make command line meant for the harness.
test test-fast test-slurm lint: override export ZL_MAKE_ARGS :=

.PHONY: nox
nox: ## install nox where it is missing (each test target does it first)
	@python3 -m nox --version >/dev/null 2>&1 || python3 -m pip install -q nox

# A test session installs again only when what it installs from changed: nox keeps its venv,
# and --no-install skips pip's calls (`make test-fast` took 62.1 s against 69.9 s, the medians
# of 3 runs on two cores).
# The stamp lives in the venv, so a venv that nox makes afresh is installed again.
.nox/%/.installed: requirements/cpu.txt pyproject.toml noxfile.py | nox
	python3 -m nox -s $* --install-only
	@touch $@

test: nox .nox/tests/.installed ## every host-independent test (nox -s tests; installs nox where missing)
	python3 -m nox -s tests --no-install

.PHONY: test-fast
test-fast: nox .nox/fast/.installed ## unit and plugin tests only, the loop for every edit (nox -s fast)
	python3 -m nox -s fast --no-install

.PHONY: test-slurm
test-slurm: nox .nox/slurm/.installed ## the tests marked slurm, on a single-node Slurm they bring up (root; nox -s slurm)
	python3 -m nox -s slurm --no-install

lint: nox ## ruff, mypy and hadolint (nox -s lint)
	python3 -m nox -s lint

backends: ## print the backend registry
	$(HARNESS) backends

preflight: ## run the preflight checks of a run (exit 3 on a broken environment)
	$(HARNESS) preflight

run: ## run one benchmark node: make run BACKEND=cuda OP=mm RUNNER=host
	$(HARNESS) run

.PHONY: batch
batch: ## many operators over DEVICES, one process each: make batch OPS=tanh,mm | OPS_FILE=f
	$(HARNESS) batch

.PHONY: summary
summary: ## tables of a run, batch or log: make summary RUN=<dir|log> [SUMMARY_ARGS="--ab A B"]
	$(HARNESS) summary

.PHONY: history
history: ## the store of every run and campaign (HISTORY): make history [HISTORY_ARGS="trend OP --format csv"] (default: list; verbs list|show|trend|compare|changes|import|upgrade)
	$(HARNESS) history

.PHONY: report receipt
report: ## ab.md and ab.png of a campaign from its ab.json: make report RUN=runs/ab/<axis>-<op>/<ts>
	$(HARNESS) report

.PHONY: status
status: ## a campaign while it runs or after, writing nothing: make status RUN=runs/ab/<axis>-<op>/<ts>
	$(HARNESS) status

receipt: ## check a receipt against this checkout: make receipt RUN=<campaign dir|receipt.json>
	$(HARNESS) receipt verify

.PHONY: image pin shell
image: ## build BACKEND's pinned image (containers/pins.yaml); ALLOW_UNPINNED=1 for a tag
	$(HARNESS) image

pin: ## resolve the base tags of containers/pins.yaml to digests and rewrite it [BACKEND=]
	$(HARNESS) pin

shell: ## an interactive shell in BACKEND's image, DEVICES and runs/ as for make run
	$(HARNESS) shell

ab: ## an A/B campaign: make ab AXIS=RLC_ENHANCE OP=mm | OPS=a,b | OPS=all [A= B= ROUNDS=]; RESUME=dir
	$(HARNESS) ab

.PHONY: bisect
bisect: ## the first bad FlagGems commit of GOOD..BAD (or stack of STACKS) for OP [DTYPES= SHAPE=]; RESUME=dir
	$(HARNESS) bisect
