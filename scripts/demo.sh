#!/usr/bin/env bash
# kiln's main demo: build kiln, compile the example MLP (an ONNX model
# exported from PyTorch, shipped in examples/models/mlp) for the host CPU,
# run and benchmark the compiled artifact, and compare its outputs with
# PyTorch's; then the same with oneDNN as an external backend (-t "dnnl,
# c", measured partitioning, printing the partition report) and on the
# reference interpreter.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_go
need_backends # gcc (the compiled engine builds C, cgo), libdnnl-dev, libopenblas-dev

MODEL=examples/models/mlp
ART=out/demo/mlp.kiln
echo "== building kiln"
build_kiln
rm -rf out/demo # the demo's own outputs of an earlier run
mkdir -p out/demo

echo
echo "== kiln inspect $MODEL (the imported graph IR)"
out/kiln inspect "$MODEL/model.onnx"

echo
echo "== kiln compile $MODEL -t c"
out/kiln compile "$MODEL/model.onnx" -t c -o "$ART" -v
echo "artifact files:"
ls -l "$ART"

echo
echo "== kiln run $ART (compiled)"
out/kiln run "$ART" --input "input=$MODEL/test_data_set_0/input_0.pb" --output-dir out/demo/compiled

echo
echo "== kiln bench $ART --runs 20"
out/kiln bench "$ART" --runs 20

echo
echo "== comparing the compiled model with PyTorch's outputs (rtol 1e-3, atol 1e-5)"
out/kiln test-onnx --engine compiled -t c -v "$MODEL"

echo
echo "== kiln compile $MODEL -t \"dnnl, c\" (BYOC with measured partitioning: candidates are run on this machine and the fastest kept; the partition report says where each ONNX node went and what each cost)"
out/kiln compile "$MODEL/model.onnx" -t "dnnl, c" -o "$ART-dnnl" -v | sed -n '/^partition:/,$p'

echo
echo "== kiln run $ART-dnnl"
out/kiln run "$ART-dnnl" --input "input=$MODEL/test_data_set_0/input_0.pb" --output-dir out/demo/dnnl

echo
echo "== kiln bench $ART-dnnl --runs 20"
out/kiln bench "$ART-dnnl" --runs 20

echo
echo "== comparing -t \"dnnl, c\" and -t \"cblas, c\" with PyTorch's outputs (rtol 1e-3, atol 1e-5)"
out/kiln test-onnx --engine compiled -t "dnnl, c" "$MODEL"
out/kiln test-onnx --engine compiled -t "cblas, c" "$MODEL"

echo
echo "== kiln compile $MODEL -t c --executor aot (a C project: one run function, static memory, no malloc)"
rm -rf "$ART-aot" "$ART-aot-project"
out/kiln compile "$MODEL/model.onnx" -t c --executor aot -o "$ART-aot"
out/kiln run "$ART-aot" --input "input=$MODEL/test_data_set_0/input_0.pb" --output-dir out/demo/aot
out/kiln test-onnx --engine compiled --executor aot -t c "$MODEL"
out/kiln export "$ART-aot" --format c-project -o "$ART-aot-project"

echo
echo "== kiln run $MODEL (reference engine)"
out/kiln run "$MODEL/model.onnx" --input "input=$MODEL/test_data_set_0/input_0.pb" --output-dir out/demo/ref

echo
echo "== comparing the reference engine with PyTorch's outputs (rtol 1e-3, atol 1e-5)"
out/kiln test-onnx -v "$MODEL"
