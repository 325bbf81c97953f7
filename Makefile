# The two set-up commands of README.md are `make demo` and `make test`.
.PHONY: demo stop test check setup bench platform platform-stop install-check

setup:
	@bash scripts/bootstrap.sh

demo: setup
	@.venv/bin/python scripts/demo.py start

stop:
	@.venv/bin/python scripts/demo.py stop

# Platform mode (docs/platform.md): PostgreSQL, Redis, Celery workers, Spark standalone, the
# scheduler alone starting runs; state and logs in .run/platform/.
platform: setup
	@.venv/bin/python scripts/platform_mode.py start

platform-stop:
	@.venv/bin/python scripts/platform_mode.py stop

# The static checks first (ruff, mypy: scripts/check.sh), then the whole suite.
test: setup
	@bash scripts/check.sh
	@.venv/bin/python -m pytest

check: setup
	@bash scripts/check.sh

# Not part of the tests: docs/install.md followed by hand, the built wheel under a plain `airflow standalone`,
# on the oldest and the newest supported Airflow (a few minutes each; scripts/install_check.py says what it does).
install-check: setup
	@.venv/bin/python scripts/install_check.py --airflow 3.3.0
	@.venv/bin/python scripts/install_check.py --airflow 3.3.2


# Not part of the tests: every benchmark on local clusters, results in benchmarks/results/
# and docs/benchmarks.md (about an hour, half of it latency; BENCH_ARGS=--quick for a smoke run).
bench: setup
	@.venv/bin/python -m pip install --quiet -r requirements-bench.txt -c constraints.txt
	@.venv/bin/python -m benchmarks.run $(BENCH_ARGS)
