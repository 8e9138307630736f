# Two commands for a fresh machine (see README):
#   make demo   install, migrate, seed the demo and run web + Celery worker and beat
#   make test   install with the test tools and run ruff and the whole suite
# and one for the loop while working:
#   make quick  ruff, then every test that starts no browser, Slurm or server, on SQLite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The suite runs on PostgreSQL (the production database) and again on SQLite (the embedded one).
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/gpuloans
# Test processes a pass runs on (pytest-xdist): this machine's two cores. The tests give each
# worker its own Redis databases for two (tests/helpers.py: redis_url).
WORKERS ?= 2

CHROMIUM := /usr/bin/chromium
# Python writes its bytecode caches (and pytest its rewritten test modules) here: with
# PYTHONDONTWRITEBYTECODE set, as some machines set it, every test process compiled Django and
# every test module again, a fifth of `make quick`.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test quick install install-dev ldap-headers pdf-libs lint debian focus-validator oidc-provider bench-accounting bench-ingest bench-agent bench-dashboard \
	bench-backtest bench-jobs bench-soak bench-pages bench-trigger bench-refusal bench-forecast bench-pdf

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# pip runs again only when what it installs from has changed (a stamp in the venv): `make quick`
# and `make test` start at once in a checkout already installed.
install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

$(VENV)/.installed: pyproject.toml | $(BIN)/python pdf-libs
	$(BIN)/pip install --quiet -e .
	touch $@

# WeasyPrint (the statements' PDF) renders through Debian's Pango, Chinese in its Noto CJK fonts.
PDF_LIBS := libpango-1.0-0 libpangoft2-1.0-0 fonts-noto-cjk
pdf-libs:
	@dpkg -s $(PDF_LIBS) >/dev/null 2>&1 || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(PDF_LIBS); }

# python-ldap (the LDAP tests' and LDAP logins') builds against Debian's LDAP and SASL headers.
ldap-headers:
	@dpkg -s libldap2-dev libsasl2-dev >/dev/null 2>&1 || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libldap2-dev libsasl2-dev; }

$(VENV)/.installed-dev: pyproject.toml agent/pyproject.toml | $(BIN)/python ldap-headers pdf-libs
	$(BIN)/pip install --quiet -e '.[dev]' -e './agent[kubelet]'
	touch $@ $(VENV)/.installed

demo: install
	./scripts/demo

lint: install-dev
	$(BIN)/ruff check .

# What the tests need from Debian: chromium for the browser tests (Playwright's own browser
# download cannot work offline), nginx for the reverse proxy's test (deploy/nginx) and Slurm
# (slurmctld, slurmd, munge and slurmdbd on the machine's MariaDB) for the agent's Slurm source,
# the accounting import and the limits (tests/slurm.py).
NGINX := /usr/sbin/nginx
# The FinOps Foundation's FOCUS validator, in a virtual environment of its own (.venv-focus):
# a test checks the FOCUS export with it.
focus-validator:
	./scripts/focus-validate --install

# The OpenID Connect provider the single sign-on tests sign in with (tests/oidc, on Node).
oidc-provider: tests/oidc/node_modules/.installed
tests/oidc/node_modules/.installed: tests/oidc/package.json tests/oidc/package-lock.json
	cd tests/oidc && npm ci --no-audit --no-fund --silent
	touch $@

debian:
	@missing=""; test -x $(CHROMIUM) || missing="chromium"; \
	test -x $(NGINX) || missing="$$missing nginx"; \
	test -x /usr/sbin/slurmctld || missing="$$missing slurm-wlm"; \
	test -x /usr/sbin/slurmdbd || missing="$$missing slurmdbd"; \
	command -v node >/dev/null || missing="$$missing nodejs npm"; \
	test -x /usr/sbin/slapd || missing="$$missing slapd"; \
	command -v ldapadd >/dev/null || missing="$$missing ldap-utils"; \
	command -v pdftotext >/dev/null || missing="$$missing poppler-utils"; \
	if [ -n "$$missing" ]; then apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi

# Everything on PostgreSQL; then, on SQLite, what can differ by database: tests that touch
# one, leaving out those that need PostgreSQL and the browser, Slurm and server tests, which
# serve the same code whatever the database (tests/tiers.py sets the markers). The hypothesis
# tests run their full examples on PostgreSQL and a tenth of them on SQLite, where what they
# look for is a difference of database, not another history.
# Each pass runs on WORKERS processes (pytest-xdist; one a core here), a module's tests on one
# worker (its Slurm or server starts once); the few tests that must have the machine to
# themselves (the `serial` tier) run alone after the PostgreSQL pass.
test: lint debian focus-validator oidc-provider
	DEBUG=1 DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/pytest --hypothesis-profile=ci \
	  -n $(WORKERS) --dist loadfile -m "not serial"
	DEBUG=1 DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/pytest --hypothesis-profile=ci -m serial
	DEBUG=1 DATABASE_URL=sqlite:///:memory: $(BIN)/pytest --hypothesis-profile=dev \
	  -n $(WORKERS) --dist loadfile \
	  -m "not postgresql and not nodb and not browser and not slurm and not server"

# The quick tier: no browser, Slurm, server, Celery process or fuzz, and a tenth of the
# hypothesis examples (the dev profile), on SQLite.
quick: install-dev
	$(BIN)/ruff check .
	DEBUG=1 DATABASE_URL=sqlite:///:memory: $(BIN)/pytest -q --hypothesis-profile=dev \
	  -n $(WORKERS) -m "not postgresql and not slow"

# Ingestion throughput against raw COPY and a DRF baseline (PostgreSQL; see bench/ingest.py).
bench-ingest: install-dev
	$(BIN)/python bench/ingest.py

# The agent's CPU and memory with 8 simulated GPUs at the default poll and interval, for each
# allocation source (processes, kubelet, slurm).
bench-agent: install-dev
	$(BIN)/python bench/agent.py

# The tenant page and burn-down API on a 1,000-GPU tenant with a year of rollups (PostgreSQL).
bench-dashboard: install-dev
	$(BIN)/python bench/dashboard.py

# What a refused batch of 5,000 made-up devices costs the endpoint (PostgreSQL).
bench-refusal: install-dev
	$(BIN)/python bench/refusal.py

# The rollup trigger's PostgreSQL CPU a batch, before and after migration metering 0014.
bench-trigger: install-dev
	$(BIN)/python bench/trigger.py

# The commitment recommender replayed on synthetic histories against two baselines (no database).
bench-backtest: install-dev
	$(BIN)/python bench/backtest.py

# The burn-down forecast's band, replayed on young synthetic fleets, public GPU usage traces and
# laws, new and seasoned, beside the band it replaced (no database; about 3 minutes).
bench-forecast: install-dev
	$(BIN)/python bench/forecast.py

# A statement's PDF, rendered on the server in English and Chinese (PostgreSQL; bench/pdf.py).
bench-pdf: install-dev
	$(BIN)/python bench/pdf.py

# The recommendation job over 1,000 contracts with a year of hourly rollups (PostgreSQL).
bench-jobs: install-dev
	$(BIN)/python bench/jobs.py

# Slurm's accounting pass with the floor's waits, 10,000 and 100,000 jobs (PostgreSQL).
bench-accounting: install-dev
	$(BIN)/python bench/accounting.py

# An hour of simulated fleet traffic under random faults; prints sent, stored, retried, lost.
bench-soak: install-dev
	$(BIN)/python bench/soak.py

# Bytes and time to the load event of four pages in chromium, cold and warm, production
# settings against development static files (PostgreSQL and chromium; see bench/pages.py).
bench-pages: install-dev debian
	$(BIN)/python bench/pages.py
