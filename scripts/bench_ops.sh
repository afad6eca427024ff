#!/usr/bin/env bash
# The operator micro-benchmark suite (kiln bench --ops) against ONNX
# Runtime on the same single-operator models, at the given thread counts
# (THREADS, default "1 2"), printed as a Markdown table for
# docs/performance.md. Extra arguments go to `kiln bench` (for example
# -t "c -mattr=-avx512f" for the AVX2 code of this machine).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_go
need_packages node:nodejs npm:npm

export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-active}
export OMP_PROC_BIND=${OMP_PROC_BIND:-true}
RUNS=${RUNS:-30}
THREADS=${THREADS:-"1 2"}
SHARED=../shared
build_kiln

need_ort_harness

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; $(date -u +%Y-%m-%d); OMP_WAIT_POLICY=$OMP_WAIT_POLICY OMP_PROC_BIND=$OMP_PROC_BIND; kiln bench args: $*"
echo
echo "| workload | threads | kiln median ms | ORT median ms | kiln / ORT | kiln GFLOP/s | kiln % of peak | ORT GFLOP/s |"
echo "|---|---|---|---|---|---|---|---|"
rm -rf out/ops
for th in $THREADS; do
	out/kiln bench --ops --json --threads "$th" --runs "$RUNS" --save "$PWD/out/ops" "$@" >out/ops.json
	# One line per workload: name dir median_ms gflops peak_fraction.
	node -e '
		const r = JSON.parse(require("fs").readFileSync("out/ops.json", "utf8"));
		for (const o of r.ops) console.log(o.name, o.dir, o.median_ms, o.gflops || 0, o.peak_fraction || 0);
	' | while read -r name dir km kg kp; do
		o=$(cd out/peer && node ort_bench.js "$dir" "$th" "$RUNS" | tail -n 1)
		om=$(sed -n 's/.*median_ms=\([0-9.]*\).*/\1/p' <<<"$o")
		awk -v n="$name" -v th="$th" -v km="$km" -v om="$om" -v kg="$kg" -v kp="$kp" -v dir="$dir" 'BEGIN {
			gf = "-"; pk = "-"; og = "-"
			if (kg > 0) { gf = sprintf("%.1f", kg); og = sprintf("%.1f", kg * km / om) }
			if (kp > 0) pk = sprintf("%.0f %%", 100 * kp)
			printf "| %s | %s | %.3f | %.3f | %.2f | %s | %s | %s |\n", n, th, km, om, km / om, gf, pk, og
		}'
	done
done
