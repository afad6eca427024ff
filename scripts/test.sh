#!/usr/bin/env bash
# All of kiln's checks: go vet, gofmt, go test, the race detector on the
# concurrent packages, a short run of every fuzz target, kiln built and
# tested without cgo (scripts/nocgo.sh), the ONNX conformance suites on the
# reference engine and on the compiled engine (`-t c`, graph and AOT
# executors) against the committed expected-pass lists
# (scripts/conformance.sh), and the real models on every backend. Fails on
# any vet, gofmt or test failure, any change of the conformance lists, or
# any real model failing. A test whose requirement (../shared, a C
# compiler, a tool) is missing fails here instead of skipping
# (KILN_TEST_STRICT=1).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/conformance.sh"
export KILN_TEST_STRICT=1

need_go
need_backends # gcc (cgo, race detector, compiled engine), libdnnl-dev, libopenblas-dev
need_cross    # make, gcc-arm-none-eabi: AOT C projects built for a Cortex-M4
need_shared   # ../shared: the ONNX suites and the models
need_packages chromium:chromium # headless Chromium: the HTML view's browser tests

echo "== go vet"
go vet ./...

echo "== gofmt"
unformatted=$(gofmt -l $(go list -f '{{.Dir}}' ./...) | sort -u)
if [ -n "$unformatted" ]; then
	echo "gofmt: these files need formatting (run gofmt -w):" >&2
	echo "$unformatted" >&2
	exit 1
fi

echo "== go test"
# The driver package compiles and runs every shared model and the
# conformance suite's operators: about 9.5 minutes on 2 cores, close to
# go test's default 10-minute limit per package binary.
go test -timeout 30m ./...

race_pkgs=(./ref/...)
# the runtime is concurrent too, once it has Go packages
[ -n "$(go list ./runtime/... 2>/dev/null)" ] && race_pkgs+=(./runtime/...)
echo "== go test -race ${race_pkgs[*]}"
go test -race "${race_pkgs[@]}"

# Every fuzz target for a few seconds on its corpus (scripts/fuzz.sh runs
# them for minutes; not in CI).
source "$(dirname "$0")/fuzz_targets.sh"
run_fuzz "${FUZZ_SECONDS:-4}"

"$(dirname "$0")/nocgo.sh"

build_kiln
echo "== ONNX conformance (reference engine)"
conformance_check ref
echo "== ONNX conformance (compiled engine, -t c)"
conformance_check compiled
echo "== ONNX conformance (compiled engine, AOT executor, -t c: every test a C project built with cc)"
conformance_check compiled-aot

models=../shared/models
# Every model must match PyTorch's outputs: any failure fails the script.
echo "== real models (reference engine, rtol 1e-3, atol 1e-4)"
out/kiln test-onnx --engine ref --rtol 1e-3 --atol 1e-4 "$models" | tee out/conformance/models.txt
echo "== real models (compiled engine -t c, rtol 1e-3, atol 1e-4)"
out/kiln test-onnx --engine compiled -t c --rtol 1e-3 --atol 1e-4 "$models" | tee out/conformance/models-compiled.txt
echo "== real models (compiled engine -t \"ccompiler, c\": add/subtract/multiply offloaded as generated C)"
out/kiln test-onnx --engine compiled -t "ccompiler, c" --rtol 1e-3 --atol 1e-4 "$models" | tee out/conformance/models-ccompiler.txt
echo "== real models (compiled engine -t \"dnnl, c\": oneDNN through the JSON runtime)"
out/kiln test-onnx --engine compiled -t "dnnl, c" --rtol 1e-3 --atol 1e-4 "$models" | tee out/conformance/models-dnnl.txt
echo "== real models (compiled engine -t \"cblas, c\": dense/matmul as cblas_sgemm in host TIR)"
out/kiln test-onnx --engine compiled -t "cblas, c" --rtol 1e-3 --atol 1e-4 "$models" | tee out/conformance/models-cblas.txt
echo "== real models (compiled engine -t \"vanilla_accelerator, c\": UMA example, stride-1 conv2d as a C kernel call)"
out/kiln test-onnx --engine compiled -t "vanilla_accelerator, c" --rtol 1e-3 --atol 1e-4 "$models" | tee out/conformance/models-vanilla.txt
echo "== real models (AOT executor -t c: the C project's program, built with cc)"
out/kiln test-onnx --engine compiled --executor aot -t c --rtol 1e-3 --atol 1e-4 "$models" | tee out/conformance/models-aot.txt
echo "== real models (AOT executor -t \"vanilla_accelerator, c\")"
out/kiln test-onnx --engine compiled --executor aot -t "vanilla_accelerator, c" --rtol 1e-3 --atol 1e-4 "$models" | tee out/conformance/models-aot-vanilla.txt
echo "== real models (compiled engine -t \"ultra_trail, c\": UMA example, conv1d+bias+relu on the simulated array)"
out/kiln test-onnx --engine compiled -t "ultra_trail, c" --rtol 1e-3 --atol 1e-4 "$models" | tee out/conformance/models-ultra_trail.txt
echo "== the README's main command (scripts/demo.sh)"
"$(dirname "$0")/demo.sh" >out/demo.log 2>&1 || {
	echo "scripts/demo.sh failed; its output:" >&2
	cat out/demo.log >&2
	exit 1
}
echo "demo: passed (log: out/demo.log)"
echo "== all checks passed"
