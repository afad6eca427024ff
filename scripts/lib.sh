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
