#!/usr/bin/env bash
# Benchmarks kiln against ONNX Runtime in the same run, on the real models
# in ../shared/models (MODELS), at 1 and 2 threads (THREADS), and prints a
# Markdown table for docs/performance.md. Extra arguments are passed to
# `kiln compile` (for example --partition greedy; use TARGETS="c
# -mcpu=x86-64" for a portable build, TARGETS="dnnl, c" for oneDNN, whose
# ISA ONEDNN_MAX_CPU_ISA=AVX2 limits). With an external target the compile
# measures its partition at 1 thread (compile's --partition-threads).
# ORT_ISA=AVX2 runs ONNX Runtime with its AVX2 kernels on an AVX-512
# machine (need_ort_avx2_harness in lib.sh), to pair with
# TARGETS="c -mattr=-avx512f".
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
# ROUNDS > 1 repeats each kiln/ORT pair and prints the range of the
# medians and of their ratios (a shared VM's neighbours move a single
# round by 20 % and more).
ROUNDS=${ROUNDS:-1}
THREADS=${THREADS:-"1 2"}
TARGETS=${TARGETS:-c}
SHARED=../shared
build_kiln

PEER=out/peer
if [ "${ORT_ISA:-}" = AVX2 ]; then
	need_ort_avx2_harness
	PEER=out/peer-avx2
elif [ -n "${ORT_ISA:-}" ]; then
	echo "bench.sh: ORT_ISA must be AVX2 or empty" >&2
	exit 2
else
	need_ort_harness
fi

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; $(date -u +%Y-%m-%d); OMP_WAIT_POLICY=$OMP_WAIT_POLICY OMP_PROC_BIND=$OMP_PROC_BIND; targets: $TARGETS; ORT: ${ORT_ISA:-best ISA}"
echo
if [ "$ROUNDS" -gt 1 ]; then
	# The last ratio is of the fastest single runs over all rounds, kiln's
	# against ORT's: on a VM whose cores slow down for seconds at a time
	# (a busy neighbour), it compares the two at the same, undisturbed
	# speed.
	echo "| model | threads | kiln medians ms | ORT medians ms | kiln / ORT | kiln / ORT, minima | compile s (cold) | compile s (cached) |"
	echo "|---|---|---|---|---|---|---|---|"
else
	echo "| model | threads | kiln median ms | kiln min ms | ORT median ms | ORT min ms | kiln / ORT | compile s (cold) | compile s (cached) |"
	echo "|---|---|---|---|---|---|---|---|---|"
fi
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
		if [ "$ROUNDS" -gt 1 ]; then
			# Rounds of one kiln and one ORT median each: the range of
			# each and of the round's ratio.
			rows=""
			for _ in $(seq "$ROUNDS"); do
				k=$(out/kiln bench "out/bench/$m" --json --threads "$th" --runs "$RUNS")
				o=$(cd "$PEER" && node ort_bench.js "$OLDPWD/$dir" "$th" "$RUNS" | tail -n 1)
				km=$(sed -n 's/.*"median_ms":\([0-9.]*\).*/\1/p' <<<"$k")
				kn=$(sed -n 's/.*"min_ms":\([0-9.]*\).*/\1/p' <<<"$k")
				om=$(sed -n 's/.*median_ms=\([0-9.]*\).*/\1/p' <<<"$o")
				on=$(sed -n 's/.*min_ms=\([0-9.]*\).*/\1/p' <<<"$o")
				rows="$rows$km $om $kn $on"$'\n'
			done
			awk -v m="$m" -v th="$th" -v cold="$cold" -v cached="$cached" 'NF == 4 {
				r = $1 / $2
				if (NR == 1 || $1 < k0) k0 = $1; if (NR == 1 || $1 > k1) k1 = $1
				if (NR == 1 || $2 < o0) o0 = $2; if (NR == 1 || $2 > o1) o1 = $2
				if (NR == 1 || r < r0) r0 = r; if (NR == 1 || r > r1) r1 = r
				if (NR == 1 || $3 < kn) kn = $3; if (NR == 1 || $4 < on) on = $4
			} END { printf "| %s | %s | %.2f–%.2f | %.2f–%.2f | %.2f–%.2f | %.2f | %s | %s |\n", m, th, k0, k1, o0, o1, r0, r1, kn / on, cold, cached }' <<<"$rows"
			continue
		fi
		k=$(out/kiln bench "out/bench/$m" --json --threads "$th" --runs "$RUNS")
		km=$(sed -n 's/.*"median_ms":\([0-9.]*\).*/\1/p' <<<"$k")
		kn=$(sed -n 's/.*"min_ms":\([0-9.]*\).*/\1/p' <<<"$k")
		o=$(cd "$PEER" && node ort_bench.js "$OLDPWD/$dir" "$th" "$RUNS" | tail -n 1)
		om=$(sed -n 's/.*median_ms=\([0-9.]*\).*/\1/p' <<<"$o")
		on=$(sed -n 's/.*min_ms=\([0-9.]*\).*/\1/p' <<<"$o")
		ratio=$(awk -v a="$km" -v b="$om" 'BEGIN { printf "%.2f", a / b }')
		printf '| %s | %s | %.2f | %.2f | %.2f | %.2f | %s | %s | %s |\n' "$m" "$th" "$km" "$kn" "$om" "$on" "$ratio" "$cold" "$cached"
	done
done
