# The two commands of the README: `make demo` (the main job) and `make test` (the suite).
# Both create or refresh .venv, install codnn with its toolchain from PyPI, and install
# Icarus Verilog from Debian when it is missing and we are root. Nothing is reinstalled on
# a second run unless pyproject.toml changed or a package file was added or removed.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.codnn-installed
# The files the package installs, listed: a file added or removed reinstalls, since the
# editable install is a tree of links to each file (one that static tools and IDEs follow,
# as they do not run the import hook of a default editable install).
PACKAGE_FILES := $(VENV)/.codnn-files
PYTEST_WORKERS ?= 2

.PHONY: demo test test-long setup icarus clean FORCE

demo: setup
	$(BIN)/codnn demo

# `make test` leaves out the tests marked `long` (larger configurations of what it runs,
# place and route, training runs); `make test-long` runs only those. CI runs both.
test: setup
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist worksteal --durations=5 -m "not long"

test-long: setup
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist worksteal --durations=5 -m long

setup: $(STAMP) icarus

$(STAMP): pyproject.toml $(PACKAGE_FILES)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "codnn needs Python 3.11 or newer; $(PYTHON) is older (set PYTHON=...)"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check \
	  --config-settings editable_mode=strict -e '.[dev,train]'
	@touch $(STAMP)

$(PACKAGE_FILES): FORCE
	@mkdir -p $(VENV)
	@find app golden hw sim synth -name __pycache__ -prune -o -type f -print | sort > $@.new
	@if cmp -s $@.new $@; then rm $@.new; else mv $@.new $@; fi

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

# The editable install's links live in build/: the next make target installs them again.
clean:
	rm -rf build .pytest_cache $(STAMP)
