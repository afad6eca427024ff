# Sourced by scripts/fuzz.sh and scripts/test.sh: every Go fuzz target of
# the repository, as "PACKAGE FUZZNAME" lines, found by grepping the tests
# (a new fuzz target joins both runs without an edit here).
fuzz_targets() {
	local f name
	while IFS= read -r f; do
		for name in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //'); do
			echo "./$(dirname "${f#./}") $name"
		done
	done < <(grep -rl --include='*_test.go' '^func Fuzz' . | sort)
}

# run_fuzz SECONDS: fuzzes every target for SECONDS each, one after the
# other; stops at the first crash (go test prints the reproducer it wrote
# under the package's testdata/fuzz/).
#
# Go before 1.27 has a race in its fuzzing coordinator (golang/go#75804):
# when -fuzztime runs out while a starved worker is mid-call, it can fail
# the target with a bare "context deadline exceeded" having found nothing
# and written no input. Such a run is retried once; if it fails that way
# again, the target's corpus is replayed as a plain test, which must pass,
# and the run says so. Any other failure, and any failure that wrote an
# input, stops the script.
run_fuzz() {
	local secs=$1 pkg name
	while read -r pkg name; do
		fuzz_one "$secs" "$pkg" "$name" || return 1
	done < <(fuzz_targets)
}

# fuzz_one SECONDS PACKAGE NAME: one target, with the retry described above.
fuzz_one() {
	local secs=$1 pkg=$2 name=$3 log attempt
	log=$(mktemp)
	for attempt in 1 2; do
		echo "== fuzz $name ($pkg, ${secs}s)"
		if go test -run='^$' -fuzz="^${name}\$" -fuzztime="${secs}s" ${FUZZ_PARALLEL:+-parallel="$FUZZ_PARALLEL"} "$pkg" 2>&1 | tee "$log"; [ "${PIPESTATUS[0]}" -eq 0 ]; then
			rm -f "$log"
			return 0
		fi
		if grep -q 'Failing input written to' "$log" || ! grep -q '^    context deadline exceeded$' "$log" ||
			[ "$(grep -c '^    ' "$log")" -ne 1 ]; then
			rm -f "$log"
			return 1
		fi
		echo "fuzz $name: Go's coordinator failed the run at its deadline with no failing input (golang/go#75804)"
	done
	rm -f "$log"
	echo "fuzz $name: failed that way twice; replaying its corpus as a test instead"
	go test -run="^${name}\$" "$pkg"
}
