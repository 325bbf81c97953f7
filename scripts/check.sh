#!/usr/bin/env bash
# The static checks `make test` runs before the suite (configured in pyproject.toml):
# ruff (lint and import order) and mypy (types) on the core and the Airflow glue.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "==> ruff check include plugins"
.venv/bin/ruff check include plugins
echo "==> mypy include plugins"
.venv/bin/mypy
