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
run_fuzz() {
	local secs=$1 pkg name
	while read -r pkg name; do
		echo "== fuzz $name ($pkg, ${secs}s)"
		go test -run='^$' -fuzz="^${name}\$" -fuzztime="${secs}s" ${FUZZ_PARALLEL:+-parallel="$FUZZ_PARALLEL"} "$pkg"
	done < <(fuzz_targets)
}
