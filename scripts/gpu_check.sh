#!/usr/bin/env bash
# The GPU figures in one command, for a session that is lent a GPU:
#
#   bash scripts/gpu_check.sh [OUT_DIR]        # default $OUT, else out/gpu_check
#   GPU_CHECK_DEVICE=cpu bash scripts/gpu_check.sh out/cpu_check   # the same on the CPU
#
# 1. what the machine has (torch, CUDA, the card);
# 2. the engine against its baselines on the device, at 1, 8 and 32 concurrent requests
#    (scripts/bench_engine.py: the diffusion engine, the plain masked-diffusion loop and
#    the AR twin, one run, ratios inside it);
# 3. calls per worker on the device: the load ramp at 1, 4 and 8 calls with the engine
#    and Whisper on it ([models] device), what "Sizing a fleet" in the README needs;
# 4. the open-dLLM adapters on the device in bfloat16: their tests (a call grammar,
#    deadlines, effort, batched equals unbatched, tests/unit/test_adapters_core.py) and
#    one request at a time against step-level batching (scripts/bench_adapters.py).
# Each step's JSON goes to OUT_DIR; a step that fails is reported and the next still runs.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-out/gpu_check}}
device=${GPU_CHECK_DEVICE:-cuda}
mkdir -p "$out"
py=.venv/bin/python
[ -x "$py" ] || { echo "gpu_check: run scripts/setup.sh first" >&2; exit 2; }
failed=0

step() {  # step NAME COMMAND...: run it, log to OUT/NAME.log, remember a failure
    local name=$1; shift
    echo "== $name"
    if "$@" >"$out/$name.log" 2>&1; then
        echo "   ok ($out/$name.log)"
    else
        echo "   FAILED ($out/$name.log):" && tail -5 "$out/$name.log"
        failed=1
    fi
}

step machine "$py" - "$device" <<'EOF'
import json, sys, torch
device = sys.argv[1]
facts = {"torch": torch.__version__, "device": device, "cuda": torch.cuda.is_available()}
if torch.cuda.is_available():
    facts["card"] = torch.cuda.get_device_name(0)
    facts["memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
print(json.dumps(facts))
if device == "cuda" and not torch.cuda.is_available():
    sys.exit("no CUDA device: set GPU_CHECK_DEVICE=cpu to run the same steps on the CPU")
EOF
[ "$failed" = 0 ] || exit 1
cat "$out/machine.log"

step bench_engine "$py" scripts/bench_engine.py --device "$device" --concurrency 1 8 32 \
    --json "$out/bench_engine.json"
step load_ramp env VOICE_AGENT_MODELS__DEVICE="$device" "$py" scripts/load_test.py \
    --calls 1 4 8 --soak-minutes 0 --warmup-minutes 0 --out-dir "$out/load_test" \
    --json "$out/load_ramp.json"
step adapters_tests env ADAPTER_TEST_DEVICE="$device" "$py" -m pytest -q -p no:cacheprovider \
    tests/unit/test_adapters_core.py
step bench_adapters "$py" scripts/bench_adapters.py --device "$device" --concurrency 1 8 \
    --hidden 512 --layers 8 --json "$out/bench_adapters.json"

"$py" - "$out" <<'EOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
summary = {}
engine = out / "bench_engine.json"
if engine.exists():
    decoders = json.loads(engine.read_text())["decoders"]
    summary["engine_tokens_per_s"] = {
        name: {n: c["tokens_per_s"] for n, c in d.get("concurrent", {}).items()}
        for name, d in decoders.items() if d.get("concurrent")
    }
adapters = out / "bench_adapters.json"
if adapters.exists():
    summary["adapter_tokens_per_s"] = json.loads(adapters.read_text())["concurrency"]
ramp = out / "load_ramp.json"
if ramp.exists():
    data = json.loads(ramp.read_text())
    summary["voice_to_voice_p95_ms"] = {
        n: r["voice_to_voice_ms"]["p95"] for n, r in data["by_calls"].items()
    }
    summary["max_calls_within_budget"] = data["max_calls_within_budget"]
print(json.dumps(summary, indent=2))
(out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
EOF
exit "$failed"
