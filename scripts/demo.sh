#!/usr/bin/env bash
# The main job on the embedded defaults: one end-to-end demo call on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/voice-agent demo --out-dir out "$@"
