# The two set-up commands of README.md are `make demo` and `make test`.
.PHONY: demo stop test check setup bench

setup:
	@bash scripts/bootstrap.sh

demo: setup
	@.venv/bin/python scripts/demo.py start

stop:
	@.venv/bin/python scripts/demo.py stop

# The static checks first (ruff, mypy: scripts/check.sh), then the whole suite.
test: setup
	@bash scripts/check.sh
	@.venv/bin/python -m pytest

check: setup
	@bash scripts/check.sh


# Not part of the tests: every benchmark on local clusters, results in benchmarks/results/
# and docs/benchmarks.md (about an hour, half of it latency; BENCH_ARGS=--quick for a smoke run).
bench: setup
	@.venv/bin/python -m pip install --quiet -r requirements-bench.txt -c constraints.txt
	@.venv/bin/python -m benchmarks.run $(BENCH_ARGS)
