# The front door. Every target calls one harness subcommand (or nox); the logic is in Python.
# Variables (see `make help` and DESIGN.md) become flags of the subcommand; each is also read
# from its environment variable by the harness itself.

.DEFAULT_GOAL := help
SHELL := /bin/bash

VENV := .venv
# The interpreter that runs the harness and, through it, pytest: the local venv that `make demo`
# builds when it exists, else python3 on PATH (on a GPU host: the one with the vendor's torch).
PYTHON ?= $(if $(wildcard $(VENV)/bin/python),$(VENV)/bin/python,python3)
HARNESS = PYTHONPATH=$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH} $(PYTHON) -m harness.cli

# Make variable = subcommand flag. Only variables given on the make command line become flags:
# make would otherwise turn any environment variable (OUT, MODE, ...) into one, and the harness
# reads the environment itself under the names of DESIGN.md.
FLAG_MAP := BACKEND=backend OP=op OP_FILE=op-file TEST_NODE=node LEVEL=level \
	SHAPE_MODE=shape-mode SHAPE_FILE=shape-file DTYPES=dtypes MODE=mode REPEAT=repeat \
	ISOLATE_TUNER_CACHE=isolate-tuner-cache RECORD=record REPLAY_FROM=replay-from \
	REPLAY_STRICT=replay-strict USE_FLAGTUNE=use-flagtune \
	PARALLEL_WARMUP_GPUS=parallel-warmup-gpus WARMUP_SHARE=warmup-share DEVICES=devices \
	FLAGGEMS_DIR=flaggems-dir \
	RUNNER=runner OUT=out DRY_RUN=dry-run
AB_FLAG_MAP := AXIS=axis A=a B=b ROUNDS=rounds NOISE_FROM=noise-from OPS=ops OPS_FILE=ops-file \
	WALLS_FROM=walls-from RESUME=resume ONLY=only
SLURM_FLAG_MAP := EXECUTOR=executor SLURM_PARTITION=slurm-partition SLURM_ACCOUNT=slurm-account \
	SLURM_TIME=slurm-time SLURM_PARALLEL=slurm-parallel SLURM_ARGS=slurm-args \
	SLURM_UNIT=slurm-unit SLURM_IMAGE=slurm-image
flag = $(if $(filter command line,$(origin $(1))),$(if $($(1)),--$(2)=$($(1))))
flags = $(foreach p,$(1),$(call flag,$(firstword $(subst =, ,$(p))),$(lastword $(subst =, ,$(p)))))
ARGS = $(call flags,$(FLAG_MAP))

.PHONY: help demo test lint preflight run backends venv ab

help: ## list the targets and variables
	@echo "usage: make <target> [VARIABLE=value ...]"
	@echo
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'
	@echo
	@echo "variables: BACKEND OP OP_FILE TEST_NODE LEVEL SHAPE_MODE SHAPE_FILE DTYPES MODE REPEAT"
	@echo "  ISOLATE_TUNER_CACHE REPLAY_FROM USE_FLAGTUNE PARALLEL_WARMUP_GPUS DEVICES"
	@echo "  FLAGGEMS_DIR RUNNER OUT DRY_RUN PYTHON   (harness run --help describes each)"

$(VENV)/.installed: requirements/cpu.txt pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q -r requirements/cpu.txt
	$(VENV)/bin/python -m pip install -q --no-deps -e .
	touch $@

venv: $(VENV)/.installed ## create .venv with the cpu stack (torch CPU build, pinned)

# The demo's switch really changes CPU timings: BLAS threads for mm, 1 against 2.
DEMO_AB = --backend=cpu --op=mm --axis=OMP_NUM_THREADS --a=1 --b=2 --rounds=3

demo: PYTHON = $(VENV)/bin/python
demo: $(VENV)/.installed ## the embedded default: an A/B on the cpu backend, with its report
	$(HARNESS) ab $(DEMO_AB) $(ARGS)

test: ## every host-independent test (nox -s tests; installs nox where missing)
	@python3 -m nox --version >/dev/null 2>&1 || python3 -m pip install -q nox
	python3 -m nox -s tests

lint: ## ruff
	@python3 -m nox --version >/dev/null 2>&1 || python3 -m pip install -q nox
	python3 -m nox -s lint

backends: ## print the backend registry
	$(HARNESS) backends

preflight: ## run the preflight checks of a run (exit 3 on a broken environment)
	$(HARNESS) preflight $(ARGS)

run: ## run one benchmark node: make run BACKEND=cuda OP=mm RUNNER=host
	$(HARNESS) run $(ARGS)

.PHONY: batch
batch: ## many operators over DEVICES, one process each: make batch OPS=tanh,mm | OPS_FILE=f
	$(HARNESS) batch $(ARGS) $(call flag,OPS,ops) $(call flag,OPS_FILE,ops-file) \
		$(call flags,$(SLURM_FLAG_MAP))

.PHONY: summary
summary: ## tables of a run, batch or log: make summary RUN=<dir|log> [SUMMARY_ARGS="--ab A B"]
	$(HARNESS) summary $(RUN) $(SUMMARY_ARGS)

.PHONY: report receipt
report: ## ab.md and ab.png of a campaign from its ab.json: make report RUN=runs/ab/<axis>-<op>/<ts>
	$(HARNESS) report $(RUN)

receipt: ## check a receipt against this checkout: make receipt RUN=<campaign dir|receipt.json>
	$(HARNESS) receipt verify $(RUN)

.PHONY: image pin shell
image: ## build BACKEND's pinned image (containers/pins.yaml); ALLOW_UNPINNED=1 for a tag
	$(HARNESS) image $(call flag,BACKEND,backend) $(call flag,RUNNER,runner) $(call flag,DRY_RUN,dry-run)

pin: ## resolve the base tags of containers/pins.yaml to digests and rewrite it [BACKEND=]
	$(HARNESS) pin $(call flag,BACKEND,backend) $(call flag,DRY_RUN,dry-run)

shell: ## an interactive shell in BACKEND's image, DEVICES and runs/ as for make run
	$(HARNESS) shell $(ARGS)

ab: ## an A/B campaign: make ab AXIS=RLC_ENHANCE OP=mm | OPS=a,b | OPS=all [A= B= ROUNDS=]; RESUME=dir
	$(HARNESS) ab $(ARGS) $(call flags,$(AB_FLAG_MAP)) $(call flags,$(SLURM_FLAG_MAP))
