# Scalar: two commands. `make run` starts the product, `make test` passes every test.
# Both set everything up from nothing (a .venv built from pyproject.toml and requirements.lock).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# Wheels of the base install's dependencies (pinned by requirements.lock) and of the build backend, for the
# test that installs `scalar-compute` into a fresh venv with no index (tests/agent/test_wheel_install.py).
WHEELHOUSE := $(VENV)/wheelhouse
# Parallel test workers (pytest-xdist); override with `make test JOBS=1`.
JOBS   ?= auto

.PHONY: run test test-fast lint typecheck contracts unit bench clean lock sysdeps wheelhouse

$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c requirements.lock -e '.[dev]'
	touch $(STAMP)

# Downloads once (the only step of the tests that does); rebuilt when pyproject.toml or the lock changes.
$(WHEELHOUSE)/.stamp: pyproject.toml requirements.lock | $(STAMP)
	rm -rf $(WHEELHOUSE) && mkdir -p $(WHEELHOUSE)
	$(BIN)/python -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb")); \
	  print(*p["project"]["dependencies"], *p["build-system"]["requires"], sep="\n")' > $(WHEELHOUSE)/requirements.txt
	$(BIN)/python -m pip wheel --quiet -c requirements.lock -r $(WHEELHOUSE)/requirements.txt -w $(WHEELHOUSE)
	touch $@

wheelhouse: $(WHEELHOUSE)/.stamp

run: $(STAMP)
	$(BIN)/scalar up --demo --time-scale 60

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

contracts: $(STAMP)
	$(BIN)/lint-imports

# System packages the tests drive for real: Debian's Chromium (the dashboard's browser tests, through
# Playwright with executable_path=/usr/bin/chromium), OpenSSH's server (`scalar node add` over SSH) and
# Prometheus (`promtool check metrics` over GET /metrics).
sysdeps:
	@missing=""; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	test -x /usr/sbin/sshd || missing="$$missing openssh-server"; \
	command -v bwrap >/dev/null 2>&1 || missing="$$missing bubblewrap"; \
	test -x /usr/bin/promtool || missing="$$missing prometheus"; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing (Debian packages)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

unit: $(STAMP) wheelhouse sysdeps
	$(BIN)/python -m pytest -n $(JOBS) -q

test: lint typecheck contracts unit

# The fast lane while editing: lint, then every test not marked `slow` (browsers, full simulator runs,
# benchmark smoke runs, agents and sandboxes end to end, crash and fail-over processes, PostgreSQL
# restarts). `make test` (and CI) still runs everything.
test-fast: lint sysdeps
	$(BIN)/python -m pytest -n $(JOBS) -q -m "not slow"

bench: $(STAMP)
	$(BIN)/python -m bench.run_all

# Re-pin every transitive dependency after changing pyproject.toml.
lock:
	rm -rf /tmp/scalar-lock-venv && $(PYTHON) -m venv /tmp/scalar-lock-venv
	/tmp/scalar-lock-venv/bin/python -m pip install --quiet --upgrade pip
	/tmp/scalar-lock-venv/bin/python -m pip install --quiet -e '.[dev]'
	/tmp/scalar-lock-venv/bin/python -m pip freeze --exclude-editable | grep -v '^-e' > requirements.lock

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
