# The two set-up commands of README.md are `make demo` and `make test`.
.PHONY: demo stop test setup

setup:
	@bash scripts/bootstrap.sh

demo: setup
	@.venv/bin/python scripts/demo.py start

stop:
	@.venv/bin/python scripts/demo.py stop

test: setup
	@.venv/bin/python -m pytest
