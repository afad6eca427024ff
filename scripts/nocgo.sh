#!/usr/bin/env bash
# kiln without cgo (issue 15's package boundaries): builds the kiln command
# with CGO_ENABLED=0, compiles a model for -t c with it, runs the reference
# engine, checks that running a compiled artifact says why it cannot, vets
# every package and its tests that way and runs the tests of the packages
# whose build differs without cgo (nocgo_packages; tests that load compiled
# libraries skip, saying so: KILN_TEST_NOCGO=1), and vets the build without oneDNN
# (-tags kiln_nodnnl). Then kiln with cgo but without oneDNN: built as on a
# machine without libdnnl-dev (-DKILN_DNNL_STUB: the package's stand-in
# declarations instead of oneDNN's header), it compiles and runs -t c and
# says why it has no dnnl target; and a normal build run where libdnnl
# cannot be loaded (KILN_DNNL_LIBRARY naming no file) says why too.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# nocgo_packages prints the packages whose tests build differently
# without cgo: those whose tests depend on a package with cgo-only or
# cgo-free files (found by comparing go list's file lists with and without
# cgo; internal/testenv aside), and those whose tests ask testenv about
# cgo (testenv.Cgo, testenv.HaveCgo).
nocgo_packages() {
	local mod cgo re
	mod=$(go list -m)
	cgo=$(diff <(CGO_ENABLED=1 go list -f '{{.ImportPath}} {{.GoFiles}} {{.CgoFiles}}' ./...) \
		<(CGO_ENABLED=0 go list -f '{{.ImportPath}} {{.GoFiles}} {{.CgoFiles}}' ./...) |
		sed -n 's/^[<>] \([^ ]*\) .*/\1/p' | grep -v '/internal/testenv$' | sort -u || true)
	re="^($(echo "$cgo" | sed 's/[.]/[.]/g' | paste -sd'|'))\$"
	{
		CGO_ENABLED=0 go list -test -f '{{.ImportPath}} {{join .Deps " "}}' ./... |
			awk -v re="$re" '{for (i = 1; i <= NF; i++) if ($i ~ re) { print $1; break }}' |
			sed 's/[.]test$//; s/_test$//'
		grep -rlE --include='*_test.go' 'testenv[.](Cgo|HaveCgo)[(]' . | xargs -r -n1 dirname |
			sed "s#^[.]\$#$mod#; s#^[.]/#$mod/#"
	} | sort -u
}

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

# The other packages build the same with and without cgo, and their
# tests ran in the main pass (topi's, which compile and run C kernels,
# took 200 s again here).
echo "== CGO_ENABLED=0 go vet ./... (every package and its tests build without cgo)"
CGO_ENABLED=0 go vet ./...
mapfile -t nocgo_pkgs < <(nocgo_packages)
if ! printf '%s\n' "${nocgo_pkgs[@]}" | grep -qx "$(go list -m)/runtime"; then
	echo "nocgo: the packages to test without cgo do not include the runtime: ${nocgo_pkgs[*]}" >&2
	exit 1
fi
echo "== CGO_ENABLED=0 go test -short on the ${#nocgo_pkgs[@]} packages whose tests build differently without cgo (tests that load compiled libraries skip)"
CGO_ENABLED=0 KILN_TEST_NOCGO=1 go test -short "${nocgo_pkgs[@]}"

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
