#!/usr/bin/env bash
# kiln without cgo (issue 15's package boundaries): builds the kiln command
# with CGO_ENABLED=0, compiles a model for -t c with it, runs the reference
# engine, checks that running a compiled artifact says why it cannot, runs
# the tests of every package that way (tests that load compiled libraries
# skip, saying so: KILN_TEST_NOCGO=1), and vets the build without oneDNN
# (-tags kiln_nodnnl). Then kiln with cgo but without oneDNN: built as on a
# machine without libdnnl-dev (-DKILN_DNNL_STUB: the package's stand-in
# declarations instead of oneDNN's header), it compiles and runs -t c and
# says why it has no dnnl target; and a normal build run where libdnnl
# cannot be loaded (KILN_DNNL_LIBRARY naming no file) says why too.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_go
mkdir -p out
rm -rf out/nocgo
mkdir -p out/nocgo

echo "== CGO_ENABLED=0 go build ./cmd/kiln"
CGO_ENABLED=0 go build -o out/nocgo/kiln ./cmd/kiln
out/nocgo/kiln targets >out/nocgo/targets.txt
if grep -q '^dnnl' out/nocgo/targets.txt; then
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
echo "== go build ./cmd/kiln without oneDNN's header (cgo, CGO_CPPFLAGS=-DKILN_DNNL_STUB)"
CGO_CPPFLAGS=-DKILN_DNNL_STUB go build -o out/nocgo/kiln-nodnnl ./cmd/kiln
ldd out/nocgo/kiln-nodnnl >out/nocgo/ldd.txt
if grep -q libdnnl out/nocgo/ldd.txt; then
	echo "nocgo: kiln links libdnnl; it must load it at run time" >&2
	exit 1
fi
out/nocgo/kiln-nodnnl compile "$mlp" -t c -o out/nocgo/mlp-nodnnl.kiln
out/nocgo/kiln-nodnnl test-onnx --engine compiled -t c "$mlp"
# (Output to a file first: with pipefail, grep -q closing the pipe early
# could fail the pipeline.)
out/nocgo/kiln-nodnnl version >out/nocgo/version.txt
grep -q "oneDNN: unavailable, so no dnnl target (dnnl: this kiln was built without oneDNN's header" out/nocgo/version.txt || {
	echo "nocgo: kiln version does not say why dnnl is unavailable" >&2
	exit 1
}
if out/nocgo/kiln-nodnnl compile "$mlp" -t "dnnl, c" -o out/nocgo/mlp-dnnl.kiln 2>out/nocgo/dnnl.err; then
	echo "nocgo: -t dnnl compiled without oneDNN?" >&2
	exit 1
fi
grep -q "this kiln has no dnnl target: this kiln was built without oneDNN's header" out/nocgo/dnnl.err || {
	echo "nocgo: -t dnnl failed without saying why:" >&2
	cat out/nocgo/dnnl.err >&2
	exit 1
}
build_kiln
KILN_DNNL_LIBRARY=/nonexistent/libdnnl.so.2 out/kiln version >out/nocgo/version-nolib.txt
grep -q "oneDNN: unavailable, so no dnnl target (dnnl: cannot load /nonexistent/libdnnl.so.2" out/nocgo/version-nolib.txt || {
	echo "nocgo: kiln run without libdnnl does not say why dnnl is unavailable" >&2
	exit 1
}
echo "nocgo: passed"
