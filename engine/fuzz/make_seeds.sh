#!/usr/bin/env bash
# Writes engine/fuzz/corpus/ again from the real programs: the tiny GGUFs the engine tests
# generate (residency.inputs.gguf_synth through tests/adapters/llama/make_test_models.py, in the
# Release build's test-models), `residctl generate` on them (objects.json, --graph-plan-out),
# `residctl inventory` (--content-digests). GGUF seeds are each model's header and tensor
# table (the bytes before its data offset): the targets make the data section virtual.
# Usage: engine/fuzz/make_seeds.sh [BUILD]   (BUILD: a Release engine build, default .build/engine-test)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-.build/engine-test}
residctl=$build/residctl
models=$build/test-models
py=.venv/bin/python
corpus=engine/fuzz/corpus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -f "$models/tiny-dense.gguf" ] || (cd "$build" && ctest -R llama_test_models >/dev/null)
for m in tiny-dense tiny-moe; do
  "$residctl" generate --model "$models/$m.gguf" --out "$tmp/run-$m" --arm pager-lru --budget-bytes 100000000 \
    --chunk-size 65536 --tokens 3 --ctx 32 --prompt "hello world" --consumption tensor \
    --graph-plan-out "$tmp/plan-$m.json" >/dev/null
  "$residctl" inventory --file "$models/$m.gguf" --chunk-size 65536 --out "$corpus/content_digests/$m.json"
  cp "$tmp/run-$m/objects.json" "$corpus/objects_json/$m-objects.json"
done
# The tiny dense model is graph_plan's model: its plans, with and without tensor signals.
cp "$tmp/plan-tiny-dense.json" "$corpus/graph_plan/tiny-dense-tensor.json"
"$residctl" generate --model "$models/tiny-dense.gguf" --out "$tmp/run-object" --arm pager-lru \
  --budget-bytes 100000000 --chunk-size 65536 --tokens 3 --ctx 32 --prompt "hello world" \
  --graph-plan-out "$corpus/graph_plan/tiny-dense-object.json" >/dev/null
# objects.json in the stream's own shape ({"offset", "length"} extents, step_order, file_bytes).
"$py" - "$tmp/run-tiny-dense/objects.json" "$corpus/objects_json/tiny-dense-stream.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
objs = [{"name": o["name"], "extents": [{"offset": a, "length": n} for a, n in o["extents"]], "bytes": o["bytes"]}
        for o in doc["objects"]]
order = [o["name"] for o in objs] + [objs[1]["name"]]
json.dump({"objects": objs, "step_order": order, "file_bytes": doc["file_bytes"]}, open(sys.argv[2], "w"), indent=1)
PY
for m in tiny-dense tiny-moe gemma2-dense-tied-q8_0 qwen2moe-moe-untied-f16 phi3-dense-untied-q8_0 qwen3moe-moe-tied-f16; do
  off=$("$py" -c "import gguf, sys; print(gguf.GGUFReader(sys.argv[1]).data_offset)" "$models/$m.gguf")
  head -c "$off" "$models/$m.gguf" > "$corpus/gguf/$m.gguf"
done
printf 'none' > "$corpus/fault_spec/none"
printf 'short-read@3' > "$corpus/fault_spec/short-read"
printf 'held-consumer@12' > "$corpus/fault_spec/held-consumer"
printf 'recycle-live' > "$corpus/fault_spec/recycle-live"
