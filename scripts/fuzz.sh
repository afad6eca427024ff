#!/usr/bin/env bash
# Fuzzes every Go fuzz target of kiln (ONNX parsing and shape inference,
# .pb and .npy tensors, params.bin, graph.json, artifact metadata, target
# strings, placement rules) for SECONDS each (default 300), one after the
# other. Not part of CI (scripts/test.sh runs each for a few seconds).
# A crash stops the run; its input is saved under the package's
# testdata/fuzz/FuzzNAME/ and reruns as a test case with `go test`.
#
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/fuzz_targets.sh"
need_go
need_backends # cgo: the runtime and build targets load compiled libraries
cd "$(dirname "$0")/.."
secs=${1:-300}
start=$(date +%s)
run_fuzz "$secs"
echo "fuzz: every target ran ${secs}s without a crash ($(( $(date +%s) - start ))s in total)"
