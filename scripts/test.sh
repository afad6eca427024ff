#!/usr/bin/env bash
# All of kiln's checks: go vet, gofmt, go test, the race detector on the
# concurrent packages, a short run of every fuzz target, the ONNX
# conformance suites on the reference engine and on the compiled engine
# (`-t c`, graph and AOT executors), and the real models on every backend.
# Fails on any vet, gofmt or test failure, when a conformance run passes
# fewer than its floor (MIN_REF_PASS, MIN_COMPILED_PASS, MIN_AOT_PASS), or
# when a real model fails.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# Conformance floor for `kiln test-onnx --engine ref` over the four suites
# (raised by the lead as operators land).
MIN_REF_PASS=${MIN_REF_PASS:-990}
# The same for `kiln test-onnx --engine compiled -t c` (every test is
# compiled with the C compiler, so this run takes a few minutes).
MIN_COMPILED_PASS=${MIN_COMPILED_PASS:-990}
# The same for the AOT executor (`--executor aot -t c`).
MIN_AOT_PASS=${MIN_AOT_PASS:-990}

need_go
need_backends # gcc (cgo, race detector, compiled engine), libdnnl-dev, libopenblas-dev
need_cross    # make, gcc-arm-none-eabi: AOT C projects built for a Cortex-M4

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
go test ./...

race_pkgs=(./ref/...)
# the runtime is concurrent too, once it has Go packages
[ -n "$(go list ./runtime/... 2>/dev/null)" ] && race_pkgs+=(./runtime/...)
echo "== go test -race ${race_pkgs[*]}"
go test -race "${race_pkgs[@]}"

# Every fuzz target for a few seconds on its corpus (scripts/fuzz.sh runs
# them for minutes; not in CI).
source "$(dirname "$0")/fuzz_targets.sh"
run_fuzz "${FUZZ_SECONDS:-4}"

echo "== ONNX conformance (reference engine)"
build_kiln
SHARED=../shared/onnx
if [ ! -d "$SHARED" ]; then
	echo "conformance: $SHARED not found; skipped"
	exit 0
fi
mkdir -p out/conformance

# conformance NAME FLOOR [test-onnx flags...]: runs the four suites with the
# flags, prints the pass count of each and fails when the total is below
# FLOOR. NAME labels the run and its logs. Failures do not fail the script
# (operators are still being written).
conformance() {
	local name=$1 floor=$2 total=0 suite log summary passed start=$SECONDS prefix=""
	shift 2
	[ "$name" = ref ] || prefix="$name-"
	for suite in node pytorch-converted pytorch-operator simple; do
		log=out/conformance/$prefix$suite.txt
		out/kiln test-onnx "$@" "$SHARED/$suite" >"$log" 2>/dev/null || true
		summary=$(tail -n 1 "$log")
		printf '  %-18s %s   (log: %s)\n' "$suite" "$summary" "$log"
		passed=$(sed -n 's/^\([0-9][0-9]*\) passed.*/\1/p' <<<"$summary")
		total=$((total + ${passed:-0}))
	done
	echo "conformance ($name): $total passed in total (minimum $floor) in $((SECONDS - start)) s"
	if [ "$total" -lt "$floor" ]; then
		echo "conformance ($name): fewer than $floor tests pass" >&2
		exit 1
	fi
}
conformance ref "$MIN_REF_PASS" --engine ref

echo "== ONNX conformance (compiled engine, -t c)"
conformance compiled "$MIN_COMPILED_PASS" --engine compiled -t c

echo "== ONNX conformance (compiled engine, AOT executor, -t c: every test a C project built with cc)"
conformance compiled-aot "$MIN_AOT_PASS" --engine compiled --executor aot -t c

models=../shared/models
if [ -d "$models" ]; then
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
fi
echo "== all checks passed"
