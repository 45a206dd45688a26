# The two commands of the README: `make demo` (the main job) and `make test` (the suite).
# Both create or refresh .venv, install codnn with its toolchain from PyPI, and install
# Icarus Verilog from Debian when it is missing and we are root. Nothing is reinstalled on
# a second run unless pyproject.toml changed.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.codnn-installed
PYTEST_WORKERS ?= 2

.PHONY: demo test test-long setup icarus clean

demo: setup
	$(BIN)/codnn demo

# `make test` leaves out the tests marked `long` (larger configurations of what it runs,
# place and route, training runs); `make test-long` runs only those. CI runs both.
test: setup
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist worksteal --durations=5 -m "not long"

test-long: setup
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist worksteal --durations=5 -m long

setup: $(STAMP) icarus

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "codnn needs Python 3.11 or newer; $(PYTHON) is older (set PYTHON=...)"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,train]'
	@touch $(STAMP)

icarus:
	@if command -v iverilog >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "Installing Icarus Verilog (Debian package iverilog)"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iverilog >/dev/null; } || \
	  echo "warning: could not install iverilog: Icarus runs will be skipped"; \
	else \
	  echo "note: Icarus Verilog is missing and cannot be installed here (needs root and apt-get):" \
	       "Icarus runs will be skipped; install the Debian package iverilog to enable them"; \
	fi

clean:
	rm -rf build .pytest_cache
