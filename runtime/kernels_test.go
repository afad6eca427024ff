package runtime

import (
	"fmt"
	"github.com/kiln-dev/kiln/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Hand-written C kernels that follow the ABI of
// include/kiln/c_runtime_api.h, compiled into shared libraries by the tests.

// abiPrelude defines the per-library ABI functions and helpers.
const abiPrelude = `
#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include "kiln/c_runtime_api.h"

static __thread char err_buf[512];
static int32_t num_threads = -1;
void kiln_set_last_error(const char* msg) { snprintf(err_buf, sizeof err_buf, "%s", msg); }
const char* kiln_get_last_error(void) { return err_buf; }
void kiln_set_num_threads(int32_t n) { num_threads = n; }

static int64_t numel(const kiln_tensor* t) {
	int64_t n = 1;
	for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
	return n;
}

static int check_f32(const char* fn, kiln_tensor* args, int32_t num_args, int32_t want) {
	char msg[256];
	if (num_args != want) {
		snprintf(msg, sizeof msg, "%s: expected %d arguments, got %d", fn, want, num_args);
		kiln_set_last_error(msg);
		return -1;
	}
	for (int i = 0; i < num_args; i++) {
		if (args[i].dtype_code != KILN_FLOAT || args[i].dtype_bits != 32 || args[i].dtype_lanes != 1) {
			snprintf(msg, sizeof msg, "%s: argument %d is not float32", fn, i);
			kiln_set_last_error(msg);
			return -2;
		}
		if (numel(&args[i]) != numel(&args[0])) {
			snprintf(msg, sizeof msg, "%s: argument %d has %lld elements, argument 0 has %lld",
			         fn, i, (long long)numel(&args[i]), (long long)numel(&args[0]));
			kiln_set_last_error(msg);
			return -3;
		}
	}
	return 0;
}
`

// libMainSource is the "host" library of the tests.
const libMainSource = abiPrelude + `
int32_t add_f32(kiln_tensor* args, int32_t n) {
	int rc = check_f32("add_f32", args, n, 3);
	if (rc) return rc;
	const float* a = args[0].data; const float* b = args[1].data; float* o = args[2].data;
	for (int64_t i = 0; i < numel(&args[0]); i++) o[i] = a[i] + b[i];
	return 0;
}

int32_t relu_f32(kiln_tensor* args, int32_t n) {
	int rc = check_f32("relu_f32", args, n, 2);
	if (rc) return rc;
	const float* a = args[0].data; float* o = args[1].data;
	for (int64_t i = 0; i < numel(&args[0]); i++) o[i] = a[i] > 0 ? a[i] : 0;
	return 0;
}

// add_sub_f32(a, b) -> (a + b, a - b): a two-output operator.
int32_t add_sub_f32(kiln_tensor* args, int32_t n) {
	int rc = check_f32("add_sub_f32", args, n, 4);
	if (rc) return rc;
	const float* a = args[0].data; const float* b = args[1].data;
	float* s = args[2].data; float* d = args[3].data;
	for (int64_t i = 0; i < numel(&args[0]); i++) { s[i] = a[i] + b[i]; d[i] = a[i] - b[i]; }
	return 0;
}

// row_sum_f32(a[r, c]) -> o[r]
int32_t row_sum_f32(kiln_tensor* args, int32_t n) {
	if (n != 2 || args[0].ndim != 2 || args[1].ndim != 1 || args[1].shape[0] != args[0].shape[0]) {
		kiln_set_last_error("row_sum_f32: want a[r, c] and o[r]");
		return -1;
	}
	const float* a = args[0].data; float* o = args[1].data;
	int64_t r = args[0].shape[0], c = args[0].shape[1];
	for (int64_t i = 0; i < r; i++) {
		float s = 0;
		for (int64_t j = 0; j < c; j++) s += a[i * c + j];
		o[i] = s;
	}
	return 0;
}

int32_t always_fail(kiln_tensor* args, int32_t n) {
	kiln_set_last_error("always_fail: the kernel refused");
	return 7;
}

int32_t fail_silently(kiln_tensor* args, int32_t n) { return 3; }

// describe(x, o int64[16]) records how the runtime packed x.
int32_t describe(kiln_tensor* args, int32_t n) {
	if (n != 2 || args[1].dtype_code != KILN_INT || args[1].dtype_bits != 64 || numel(&args[1]) != 16) {
		kiln_set_last_error("describe: want (x, int64[16])");
		return -1;
	}
	int64_t* o = args[1].data;
	memset(o, 0, 16 * sizeof(int64_t));
	o[0] = args[0].ndim;
	o[1] = args[0].dtype_code;
	o[2] = args[0].dtype_bits;
	o[3] = args[0].dtype_lanes;
	o[4] = args[0].device_type;
	o[5] = args[0].device_id;
	o[6] = (int64_t)((uintptr_t)args[0].data % 64);
	o[7] = n;
	for (int i = 0; i < args[0].ndim && i < 8; i++) o[8 + i] = args[0].shape[i];
	return 0;
}

// query_threads(o int32[1]) reports the last kiln_set_num_threads value.
int32_t query_threads(kiln_tensor* args, int32_t n) {
	if (n != 1 || args[0].dtype_code != KILN_INT || args[0].dtype_bits != 32) {
		kiln_set_last_error("query_threads: want (int32[1])");
		return -1;
	}
	((int32_t*)args[0].data)[0] = num_threads;
	return 0;
}

// The function table: hidden_f32 is exported by the ELF library but not
// listed, so the runtime must not find it.
int32_t hidden_f32(kiln_tensor* args, int32_t n) { (void)args; (void)n; return 0; }
const kiln_func_entry kiln_func_registry[] = {
	{"add_f32", add_f32}, {"relu_f32", relu_f32}, {"add_sub_f32", add_sub_f32}, {"row_sum_f32", row_sum_f32},
	{"always_fail", always_fail}, {"fail_silently", fail_silently}, {"describe", describe},
	{"query_threads", query_threads}, {NULL, NULL},
};
`

// libExtraSource is a second library, imported by the main one in tests.
// It deliberately has no kiln_set_num_threads.
const libExtraSource = `
#include <stdio.h>
#include <stdint.h>
#include "kiln/c_runtime_api.h"
static __thread char err_buf[512];
void kiln_set_last_error(const char* msg) { snprintf(err_buf, sizeof err_buf, "%s", msg); }
const char* kiln_get_last_error(void) { return err_buf; }

int32_t mul_f32(kiln_tensor* args, int32_t n) {
	if (n != 3) { kiln_set_last_error("mul_f32: expected 3 arguments"); return -1; }
	int64_t m = 1;
	for (int i = 0; i < args[0].ndim; i++) m *= args[0].shape[i];
	const float* a = args[0].data; const float* b = args[1].data; float* o = args[2].data;
	for (int64_t i = 0; i < m; i++) o[i] = a[i] * b[i];
	return 0;
}

// relu_f32 here returns -relu so that tests can tell which library won.
int32_t relu_f32(kiln_tensor* args, int32_t n) {
	int64_t m = 1;
	for (int i = 0; i < args[0].ndim; i++) m *= args[0].shape[i];
	const float* a = args[0].data; float* o = args[1].data;
	for (int64_t i = 0; i < m; i++) o[i] = a[i] > 0 ? -a[i] : 0;
	return 0;
}

const kiln_func_entry kiln_func_registry[] = {{"mul_f32", mul_f32}, {"relu_f32", relu_f32}, {NULL, NULL}};
`

var (
	libDir   string
	libMu    sync.Mutex
	libPaths = map[string]string{}
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kiln-runtime-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	libDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildLib compiles C source into lib<name>.so once per test binary.
func buildLib(t testing.TB, name, src string) string {
	t.Helper()
	libMu.Lock()
	defer libMu.Unlock()
	if p, ok := libPaths[name]; ok {
		return p
	}
	cc := testenv.CC(t)
	cfile := filepath.Join(libDir, name+".c")
	if err := os.WriteFile(cfile, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	so := filepath.Join(libDir, "lib"+name+".so")
	inc, err := filepath.Abs("include")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-I", inc, "-o", so, cfile).CombinedOutput()
	if err != nil {
		t.Fatalf("compiling %s: %v\n%s", name, err, out)
	}
	libPaths[name] = so
	return so
}

// loadMain loads the main test library (a new Module each call).
func loadMain(t testing.TB) Module {
	t.Helper()
	m, err := LoadLibrary(buildLib(t, "kiln_rt_main", libMainSource))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// loadExtra loads the second test library.
func loadExtra(t testing.TB) Module {
	t.Helper()
	m, err := LoadLibrary(buildLib(t, "kiln_rt_extra", libExtraSource))
	if err != nil {
		t.Fatal(err)
	}
	return m
}
