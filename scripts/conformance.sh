#!/usr/bin/env bash
# ONNX conformance against committed expected-pass lists. For each engine
# configuration NAME (ref, compiled, compiled-aot), kiln test-onnx runs the
# four suites of ../shared/onnx with that configuration's flags; the tests
# that pass are compared with scripts/conformance/NAME.txt (one
# "suite/test" per line, sorted). A test in the list that no longer passes
# fails the run by name; a test that passes and is not in the list fails it
# too, asking for the list to be updated, so the lists stay exact.
#
#   scripts/conformance.sh [--update] [NAME...]    (default: all three)
#
# --update rewrites the lists from this run. scripts/test.sh sources this
# file and calls conformance_check for each configuration.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CONFORMANCE_SUITES=(node pytorch-converted pytorch-operator simple)

# conformance_flags NAME prints the test-onnx flags of a configuration.
conformance_flags() {
	case $1 in
	ref) echo "--engine ref" ;;
	compiled) echo "--engine compiled -t c" ;;
	compiled-aot) echo "--engine compiled --executor aot -t c" ;;
	*)
		echo "conformance: unknown configuration $1 (want ref, compiled or compiled-aot)" >&2
		return 2
		;;
	esac
}

# conformance_check NAME [update]: runs the suites for NAME, prints a line
# per suite, then compares the passing tests with the list (or rewrites it).
conformance_check() {
	local name=$1 update=${2:-} flags suite log prefix="" start=$SECONDS
	flags=$(conformance_flags "$name")
	[ "$name" = ref ] || prefix="$name-"
	mkdir -p out/conformance
	local passed="out/conformance/$name.passed" list="scripts/conformance/$name.txt"
	: >"$passed"
	# A fresh object cache for the run: every C translation unit is
	# compiled at least once, and the ones every test shares (the thread
	# pool's) only once.
	local cache
	cache=$(mktemp -d)
	for suite in "${CONFORMANCE_SUITES[@]}"; do
		log=out/conformance/$prefix$suite.txt
		# shellcheck disable=SC2086 # flags are words
		XDG_CACHE_HOME=$cache out/kiln test-onnx $flags "../shared/onnx/$suite" >"$log" 2>/dev/null || true
		printf '  %-18s %s   (log: %s)\n' "$suite" "$(tail -n 1 "$log")" "$log"
		sed -n "s|^PASS \([^ ]*\).*|$suite/\1|p" "$log" >>"$passed"
	done
	rm -rf "$cache"
	LC_ALL=C sort -o "$passed" "$passed"
	if [ "$update" = update ]; then
		cp "$passed" "$list"
		echo "conformance ($name): $(wc -l <"$list") passing tests written to $list"
		return 0
	fi
	if [ ! -f "$list" ]; then
		echo "conformance ($name): $list is missing (scripts/conformance.sh --update $name writes it)" >&2
		return 1
	fi
	local lost gained
	lost=$(LC_ALL=C comm -23 "$list" "$passed")
	gained=$(LC_ALL=C comm -13 "$list" "$passed")
	echo "conformance ($name): $(wc -l <"$passed") passed, $(wc -l <"$list") expected, in $((SECONDS - start)) s"
	if [ -n "$lost" ]; then
		echo "conformance ($name): these tests are in $list but no longer pass (see the logs for why):" >&2
		sed 's/^/    /' <<<"$lost" >&2
	fi
	if [ -n "$gained" ]; then
		echo "conformance ($name): these tests now pass but are not in $list; add them (scripts/conformance.sh --update $name):" >&2
		sed 's/^/    /' <<<"$gained" >&2
	fi
	[ -z "$lost" ] && [ -z "$gained" ]
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	update=""
	if [ "${1:-}" = --update ]; then
		update=update
		shift
	fi
	need_go
	need_shared
	build_kiln
	names=("$@")
	[ ${#names[@]} -gt 0 ] || names=(ref compiled compiled-aot)
	status=0
	for n in "${names[@]}"; do
		conformance_check "$n" "$update" || status=1
	done
	exit $status
fi
