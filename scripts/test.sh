#!/usr/bin/env bash
# The test command: install what is missing, lint, type-check, then run every test tier.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
echo "== ruff"
ruff check voice_agent engine tools tests scripts
ruff format --check voice_agent engine tools tests scripts
echo "== mypy"
mypy voice_agent engine tools
echo "== import contracts"
lint-imports --no-cache
echo "== pytest"
pytest -q -p no:cacheprovider "$@"
