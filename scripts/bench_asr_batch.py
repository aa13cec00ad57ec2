"""Benchmark batched ASR: N calls' decodes waiting at once, one by one against one batch.

    .venv/bin/python scripts/bench_asr_batch.py --json out/bench_asr_batch.json

N caller lines (`speech_data.UTTERANCES`, espeak-ng, through 8 kHz μ-law) wait on the
shared recognizer together, as finals do when several calls end a turn at once. For
each N in `--batch` and each encoder window (30 s: a final; 10 s: a partial) it times
decoding them one by one (`decode`, what `[hearing] max_batch = 1` does) against one
`decode_batch` (what the worker does with `max_batch` >= N), `--repeats` times, in the
same run, and reports the medians, the batch's ratio to one by one, and when the last
caller's text is ready in each case (the wait the last caller sees). The words are
compared too (word error rate of each path against the script). The machine's load is
recorded: timings on a shared 2-core CPU are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from speech_data import UTTERANCES, phone, synthesize, word_errors

from voice_agent.audio import pcm16_to_float32, resample
from voice_agent.hearing.asr import ASR_RATE_HZ, AsrConfig, decode, decode_batch, load_whisper


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", type=Path, required=True)
    p.add_argument("--batch", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--cpu-threads", type=int, default=2)
    args = p.parse_args()
    if min(args.batch) < 1 or args.repeats < 1 or max(args.batch) > len(UTTERANCES):
        p.error(f"--batch between 1 and {len(UTTERANCES)}; --repeats at least 1")
    texts = UTTERANCES[: max(args.batch)]
    audios = []
    for text in texts:
        speech, rate = synthesize(text, "espeak:en-us")
        audios.append(pcm16_to_float32(resample(phone(speech, rate), 8000, ASR_RATE_HZ)))
    config = AsrConfig(cpu_threads=args.cpu_threads)
    model = load_whisper(config)
    decode(model, audios[0], config)  # warm-up
    result: dict[str, Any] = {"load_before": os.getloadavg(), "cpu_threads": args.cpu_threads}
    for window_s, name in ((30.0, "final_30s"), (10.0, "partial_10s")):
        cfg = AsrConfig(cpu_threads=args.cpu_threads, partial_context_s=window_s)
        partial = window_s < 30
        rows = {}
        for n in args.batch:
            one_by_one, batched, errors = [], [], {"one_by_one": [0, 0], "batched": [0, 0]}
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                alone = [decode(model, a, cfg, partial=partial).text for a in audios[:n]]
                one_by_one.append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                together = [d.text for d in decode_batch(model, audios[:n], cfg, window_s)]
                batched.append((time.perf_counter() - t0) * 1000)
            for key, got in (("one_by_one", alone), ("batched", together)):
                for ref, hyp in zip(texts[:n], got, strict=True):
                    wrong, total = word_errors(ref, hyp)
                    errors[key][0] += wrong
                    errors[key][1] += total
            sequential_ms, batch_ms = statistics.median(one_by_one), statistics.median(batched)
            rows[str(n)] = {
                "one_by_one_ms": round(sequential_ms, 1),
                "batched_ms": round(batch_ms, 1),
                "ratio": round(batch_ms / sequential_ms, 3),
                "wer_one_by_one": round(errors["one_by_one"][0] / errors["one_by_one"][1], 3),
                "wer_batched": round(errors["batched"][0] / errors["batched"][1], 3),
            }
        result[name] = rows
    result["load_after"] = os.getloadavg()
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
