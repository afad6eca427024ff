#!/usr/bin/env bash
# Benchmarks kiln against ONNX Runtime in the same run, on the real models
# in ../shared/models (MODELS), at 1 and 2 threads (THREADS), and prints a
# Markdown table for docs/performance.md. Extra arguments are passed to
# `kiln compile` (for example --partition greedy; use TARGETS="c
# -mcpu=x86-64" for a portable build, TARGETS="dnnl, c" for oneDNN, whose
# ISA ONEDNN_MAX_CPU_ISA=AVX2 limits). With an external target the compile
# measures its partition at 1 thread (compile's --partition-threads).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_go
need_packages node:nodejs npm:npm
need_backends

# ONNX Runtime's thread pool spins between parallel sections by default;
# libgomp's default lets its workers sleep after a short spin, and waking
# them between kernels makes kiln's 2-thread medians swing by up to 30 %
# from one process to the next. Spin like ORT unless told otherwise
# (OMP_WAIT_POLICY=passive measures libgomp's default).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-active}
# One OpenMP thread per core. (Some kiln processes at 2 threads once ran
# resnet18 at 45 ms instead of 21 ms without binding: runs on different
# OS threads left a spinning OpenMP team on each. The graph executor now
# runs multi-threaded runs on one thread of its own, and binding gains a
# few per cent: docs/performance.md, 2026-11-26.)
export OMP_PROC_BIND=${OMP_PROC_BIND:-true}

MODELS=${MODELS:-"resnet18 mobilenet_v2 squeezenet1_1 tiny_bert"}
RUNS=${RUNS:-30}
THREADS=${THREADS:-"1 2"}
TARGETS=${TARGETS:-c}
SHARED=../shared
build_kiln

need_ort_harness

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; $(date -u +%Y-%m-%d); OMP_WAIT_POLICY=$OMP_WAIT_POLICY OMP_PROC_BIND=$OMP_PROC_BIND; targets: $TARGETS"
echo
echo "| model | threads | kiln median ms | kiln min ms | ORT median ms | ORT min ms | kiln / ORT | compile s (cold) | compile s (cached) |"
echo "|---|---|---|---|---|---|---|---|---|"
for m in $MODELS; do
	dir=$SHARED/models/$m
	mkdir -p out/bench
	# Compile without kiln's cache (cold), fill the cache, compile again
	# from it (cached: kiln compile restores the whole artifact); then
	# bench the artifact at each thread count.
	t0=$(date +%s.%N)
	out/kiln compile "$dir/model.onnx" -t "$TARGETS" -o "out/bench/$m" --force --no-cache "$@" >/dev/null
	t1=$(date +%s.%N)
	out/kiln compile "$dir/model.onnx" -t "$TARGETS" -o "out/bench/$m" "$@" >/dev/null
	t2=$(date +%s.%N)
	out/kiln compile "$dir/model.onnx" -t "$TARGETS" -o "out/bench/$m" "$@" >/dev/null
	t3=$(date +%s.%N)
	cold=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
	cached=$(awk -v a="$t2" -v b="$t3" 'BEGIN { printf "%.2f", b - a }')
	for th in $THREADS; do
		k=$(out/kiln bench "out/bench/$m" --json --threads "$th" --runs "$RUNS")
		km=$(sed -n 's/.*"median_ms":\([0-9.]*\).*/\1/p' <<<"$k")
		kn=$(sed -n 's/.*"min_ms":\([0-9.]*\).*/\1/p' <<<"$k")
		o=$(cd out/peer && node ort_bench.js "$OLDPWD/$dir" "$th" "$RUNS" | tail -n 1)
		om=$(sed -n 's/.*median_ms=\([0-9.]*\).*/\1/p' <<<"$o")
		on=$(sed -n 's/.*min_ms=\([0-9.]*\).*/\1/p' <<<"$o")
		ratio=$(awk -v a="$km" -v b="$om" 'BEGIN { printf "%.2f", a / b }')
		printf '| %s | %s | %.2f | %.2f | %.2f | %.2f | %s | %s | %s |\n' "$m" "$th" "$km" "$kn" "$om" "$on" "$ratio" "$cold" "$cached"
	done
done
