# Shared set-up for kiln's scripts; source it from a script in scripts/.
# It moves to the repository root and checks the tools the scripts need.

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# need_go fails with a clear message when the Go toolchain is missing.
need_go() {
	if ! command -v go >/dev/null 2>&1; then
		echo "error: the Go toolchain (go) is not on PATH; install Go $(sed -n 's/^go //p' go.mod) or newer from https://go.dev/dl/" >&2
		exit 1
	fi
}

# apt_install PACKAGE... installs Debian packages (with sudo when not root).
apt_install() {
	[ $# -eq 0 ] && return 0
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "error: missing $* and no apt-get to install them" >&2
		exit 1
	fi
	local sudo=""
	[ "$(id -u)" -ne 0 ] && sudo="sudo"
	echo "== installing $*"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@"
}

# need_packages CMD:PACKAGE... installs the Debian PACKAGE for each CMD that
# is missing (only then, and only with apt-get available).
need_packages() {
	local missing=() spec
	for spec in "$@"; do
		command -v "${spec%%:*}" >/dev/null 2>&1 || missing+=("${spec#*:}")
	done
	apt_install "${missing[@]}"
}

# need_debs PACKAGE... installs the Debian packages that are not installed
# (libraries, which need_packages cannot find on PATH).
need_debs() {
	local missing=() pkg
	for pkg in "$@"; do
		dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
	done
	apt_install "${missing[@]}"
}

# need_backends installs what kiln's built-in external backends link
# against: oneDNN (dnnl), OpenBLAS (cblas) and a C compiler for cgo.
need_backends() {
	need_packages gcc:gcc
	need_debs libdnnl-dev libopenblas-dev
}

# need_cross installs the cross toolchains the tests build with: Cortex-M
# (gcc-arm-none-eabi, newlib, QEMU's system emulator) for the exported AOT
# projects, 64-bit Arm Linux (gcc-aarch64-linux-gnu, QEMU's user-mode
# emulator) for the NEON kernels and models compiled for Cortex-A cores,
# and make.
need_cross() {
	need_packages make:make arm-none-eabi-gcc:gcc-arm-none-eabi qemu-system-arm:qemu-system-arm \
		aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu qemu-aarch64:qemu-user
	need_debs libnewlib-arm-none-eabi libc6-dev-arm64-cross
}

# need_shared fails with a clear message when ../shared (the ONNX suites,
# the models, the seeds) is not beside the repository.
need_shared() {
	if [ ! -d ../shared/onnx ] || [ ! -d ../shared/models ]; then
		echo "error: ../shared (with onnx/ and models/) must be beside the repository root $(pwd); the tests and conformance runs need it" >&2
		exit 1
	fi
}

# build_kiln builds the CLI into out/kiln.
build_kiln() {
	mkdir -p out
	go build -o out/kiln ./cmd/kiln
}

# need_ort_harness installs ONNX Runtime's benchmark harness from
# ../shared/peer into out/peer once (the same-run comparisons of bench.sh
# and bench_ops.sh).
need_ort_harness() {
	if [ ! -d out/peer/node_modules/onnxruntime-node ]; then
		rm -rf out/peer && cp -r "${SHARED:-../shared}/peer" out/peer
		(cd out/peer && npm init -y >/dev/null && npm install --ignore-scripts --silent onnxruntime-node@1.30.0 onnx-proto >/dev/null)
	fi
}

# need_ort_avx2_harness makes out/peer-avx2, a copy of the ONNX Runtime
# harness whose library believes the OS saves no AVX-512 state: the three
# XGETBV instructions in onnxruntime-node 1.30.0's linux-x64 library
# (MLAS's platform probe, ORT's CPUIDInfo and one more probe) are replaced
# by moves of 7 (x87, SSE and AVX state), so MLAS takes its AVX2 kernels
# as it does on a CPU without AVX-512. This measures kiln's AVX2 code
# against ORT's AVX2 code on an AVX-512 machine. The library's hash and
# the bytes at each site are checked first; any other build is refused.
need_ort_avx2_harness() {
	need_ort_harness
	local lib=node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1
	[ -f out/peer-avx2/$lib.avx2 ] && return 0
	if [ "$(sha256sum "out/peer/$lib" | cut -d' ' -f1)" != ffb75a925ba05e47b235bb66e3e3911714a80b328a9c9425539feb204aa32a23 ]; then
		echo "need_ort_avx2_harness: out/peer/$lib is not onnxruntime-node 1.30.0's linux-x64 build; cannot limit it to AVX2" >&2
		return 1
	fi
	rm -rf out/peer-avx2 && cp -r out/peer out/peer-avx2
	# offset (decimal), old bytes, new bytes (hex)
	local site
	for site in "23771692 0f01d089c0 b807000000" \
		"30177165 0f01d089c0 b807000000" \
		"25080919 0f01d089fa4489c74189c6 89fa4489c741be07000000"; do
		set -- $site
		local have
		have=$(od -An -tx1 -v -j "$1" -N $((${#2} / 2)) "out/peer-avx2/$lib" | tr -d ' \n')
		if [ "$have" != "$2" ]; then
			echo "need_ort_avx2_harness: unexpected bytes $have at $1" >&2
			rm -rf out/peer-avx2
			return 1
		fi
		printf "$(sed 's/../\\x&/g' <<<"$3")" | dd of="out/peer-avx2/$lib" bs=1 seek="$1" conv=notrunc status=none
	done
	touch out/peer-avx2/$lib.avx2
}
