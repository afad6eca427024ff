#!/usr/bin/env bash
# kiln without cgo (issue 15's package boundaries): builds the kiln command
# with CGO_ENABLED=0, compiles a model for -t c with it, runs the reference
# engine, checks that running a compiled artifact says why it cannot, runs
# the tests of every package that way (tests that load compiled libraries
# skip, saying so: KILN_TEST_NOCGO=1), and vets the build without oneDNN
# (-tags kiln_nodnnl, for machines without libdnnl-dev).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_go
mkdir -p out
rm -rf out/nocgo
mkdir -p out/nocgo

echo "== CGO_ENABLED=0 go build ./cmd/kiln"
CGO_ENABLED=0 go build -o out/nocgo/kiln ./cmd/kiln
if out/nocgo/kiln targets | grep -q '^dnnl'; then
	echo "nocgo: the cgo-free kiln lists the dnnl target" >&2
	exit 1
fi
mlp=examples/models/mlp
out/nocgo/kiln compile "$mlp" -t c -o out/nocgo/mlp.kiln
out/nocgo/kiln run "$mlp" --input "$mlp/test_data_set_0/input_0.pb" --output-dir out/nocgo >/dev/null
out/nocgo/kiln test-onnx --engine ref "$mlp"
if out/nocgo/kiln run out/nocgo/mlp.kiln --input "$mlp/test_data_set_0/input_0.pb" 2>out/nocgo/run.err; then
	echo "nocgo: running a compiled artifact without cgo succeeded?" >&2
	exit 1
fi
grep -q "built without cgo" out/nocgo/run.err || {
	echo "nocgo: running an artifact failed without saying why:" >&2
	cat out/nocgo/run.err >&2
	exit 1
}

echo "== CGO_ENABLED=0 go test -short ./... (tests that load compiled libraries skip)"
CGO_ENABLED=0 KILN_TEST_NOCGO=1 go test -short ./...

echo "== go vet -tags kiln_nodnnl ./... (kiln without oneDNN)"
go vet -tags kiln_nodnnl ./...
echo "nocgo: passed"
