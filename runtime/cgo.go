//go:build cgo

package runtime

// All cgo of the package lives in this file: C memory, dlopen/dlsym and the
// call trampoline. The rest of the package is plain Go over these helpers.

/*
#cgo CFLAGS: -I${SRCDIR}/include
#cgo linux LDFLAGS: -ldl
#ifdef __linux__
#define _GNU_SOURCE
#include <dirent.h>
#include <sched.h>
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "kiln/c_runtime_api.h"

typedef const char* (*kiln_rt_get_error_fn)(void);
typedef void (*kiln_rt_set_error_fn)(const char*);
typedef void (*kiln_rt_set_threads_fn)(int32_t);

// kiln_rt_alloc returns nbytes (at least align) of zeroed memory aligned to
// align, or NULL.
static void* kiln_rt_alloc(size_t nbytes, size_t align) {
	void* p = NULL;
	if (nbytes < align) nbytes = align;
	nbytes = (nbytes + align - 1) / align * align;
	if (posix_memalign(&p, align, nbytes) != 0) return NULL;
	memset(p, 0, nbytes);
	return p;
}

typedef struct {
	void* handle;
	char* err;  // malloc'd; NULL on success
} kiln_rt_open_result;

// dlopen and dlerror run in one C call so that the error text comes from the
// same OS thread that failed.
//
// A library that brings in the OpenMP runtime (every generated library
// links libgomp) may bind the loading thread to a core as libgomp
// starts (OMP_PROC_BIND, OMP_PLACES): the thread's affinity before the
// load is put back, so that the Go threads it later starts are not
// confined to that core.
static kiln_rt_open_result kiln_rt_dlopen(const char* path) {
	kiln_rt_open_result r;
	r.err = NULL;
#ifdef __linux__
	cpu_set_t before, after;
	int have = sched_getaffinity(0, sizeof before, &before) == 0;
#endif
	r.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (r.handle == NULL) {
		const char* e = dlerror();
		r.err = strdup(e ? e : "dlopen failed");
	}
#ifdef __linux__
	if (have && sched_getaffinity(0, sizeof after, &after) == 0 && !CPU_EQUAL(&before, &after)) {
		sched_setaffinity(0, sizeof before, &before);
	}
#endif
	return r;
}

typedef int (*kiln_rt_omp_int_fn)(void);
typedef int (*kiln_rt_omp_place_procs_fn)(int);
typedef void (*kiln_rt_omp_place_ids_fn)(int, int*);

// kiln_rt_unbind_openmp undoes libgomp's binding of the process's first
// thread. With OMP_PROC_BIND or OMP_PLACES set, libgomp, when it starts
// with the process (the dnnl backend links it), binds the first thread
// to its first place before the Go runtime starts: every Go thread then
// inherits that one core and the Go runtime sizes itself for one
// processor. The places are built from the process's affinity before
// that binding, so their union is that affinity. When the calling
// thread's affinity is a strict subset of the union (it was bound), every
// thread of the process gets the union back and the number of its CPUs
// is returned; otherwise (no libgomp, no places, a mask the user chose
// with taskset) nothing changes and 0 is returned. OpenMP's own worker
// threads, started later, are still bound to their places.
static int kiln_rt_unbind_openmp(void) {
#ifdef __linux__
	kiln_rt_omp_int_fn num_places = (kiln_rt_omp_int_fn)dlsym(RTLD_DEFAULT, "omp_get_num_places");
	kiln_rt_omp_place_procs_fn place_procs = (kiln_rt_omp_place_procs_fn)dlsym(RTLD_DEFAULT, "omp_get_place_num_procs");
	kiln_rt_omp_place_ids_fn place_ids = (kiln_rt_omp_place_ids_fn)dlsym(RTLD_DEFAULT, "omp_get_place_proc_ids");
	if (num_places == NULL || place_procs == NULL || place_ids == NULL) return 0;
	int np = num_places();
	if (np <= 1) return 0;
	cpu_set_t all, cur, both;
	CPU_ZERO(&all);
	for (int p = 0; p < np; p++) {
		int n = place_procs(p);
		if (n <= 0 || n > CPU_SETSIZE) continue;
		int* ids = malloc(sizeof(int) * (size_t)n);
		if (ids == NULL) return 0;
		place_ids(p, ids);
		for (int i = 0; i < n; i++) {
			if (ids[i] >= 0 && ids[i] < CPU_SETSIZE) CPU_SET(ids[i], &all);
		}
		free(ids);
	}
	if (sched_getaffinity(0, sizeof cur, &cur) != 0) return 0;
	CPU_AND(&both, &cur, &all);
	if (CPU_EQUAL(&cur, &all) || !CPU_EQUAL(&both, &cur)) return 0;
	DIR* d = opendir("/proc/self/task");
	if (d == NULL) return 0;
	struct dirent* e;
	while ((e = readdir(d)) != NULL) {
		char* end;
		long tid = strtol(e->d_name, &end, 10);
		if (*end == 0 && tid > 0) sched_setaffinity((pid_t)tid, sizeof all, &all);
	}
	closedir(d);
	return CPU_COUNT(&all);
#else
	return 0;
#endif
}

static void* kiln_rt_dlsym(void* handle, const char* name) {
	return dlsym(handle, name);
}

typedef struct {
	int32_t rc;
	char* msg;  // malloc'd copy of kiln_get_last_error(); NULL when none
} kiln_rt_call_result;

// kiln_rt_call clears the library's last error, calls the packed function
// and, on failure, copies the library's thread-local error text. All of it
// happens in one C call, hence on one OS thread, which the thread-local
// error slot of the ABI requires.
static kiln_rt_call_result kiln_rt_call(void* f, kiln_tensor* args, int32_t n,
                                        void* set_err, void* get_err) {
	kiln_rt_call_result r;
	r.msg = NULL;
	if (set_err != NULL) ((kiln_rt_set_error_fn)set_err)("");
	r.rc = ((kiln_packed_func)f)(args, n);
	if (r.rc != 0 && get_err != NULL) {
		const char* m = ((kiln_rt_get_error_fn)get_err)();
		if (m != NULL && m[0] != 0) r.msg = strdup(m);
	}
	return r;
}

// kiln_rt_item is one packed-function call of a batch (kiln_rt_call_all).
typedef struct {
	void* f;
	kiln_tensor* args;
	int32_t n;
	void* set_err;
	void* get_err;
} kiln_rt_item;

static void kiln_rt_set_item(kiln_rt_item* items, int32_t i, void* f, void* args, int32_t n, void* set_err, void* get_err) {
	items[i].f = f;
	items[i].args = (kiln_tensor*)args;
	items[i].n = n;
	items[i].set_err = set_err;
	items[i].get_err = get_err;
}

// kiln_rt_call_all makes the calls [from, to) of items in order, each as
// kiln_rt_call, in one C call: it stops at the first failure and returns
// its index, with its result in *r, or -1.
static int32_t kiln_rt_call_all(const kiln_rt_item* items, int32_t from, int32_t to, kiln_rt_call_result* r) {
	for (int32_t i = from; i < to; ++i) {
		*r = kiln_rt_call(items[i].f, items[i].args, items[i].n, items[i].set_err, items[i].get_err);
		if (r->rc != 0) return i;
	}
	return -1;
}

// kiln_rt_registry_entry reads entry i of a kiln_func_registry table.
static void kiln_rt_registry_entry(void* table, int32_t i, const char** name, void** func) {
	const kiln_func_entry* e = (const kiln_func_entry*)table + i;
	*name = e->name;
	*func = (void*)e->func;
}

static void kiln_rt_set_threads(void* f, int32_t n) {
	((kiln_rt_set_threads_fn)f)(n);
}
// kiln_rt_pin pins the calling thread to the n cores of cores; it
// returns 0 or an errno value (ENOSYS where there is no affinity call).
static int kiln_rt_pin(const int* cores, int n) {
#ifdef __linux__
	cpu_set_t set;
	CPU_ZERO(&set);
	for (int i = 0; i < n; i++) CPU_SET(cores[i], &set);
	return sched_setaffinity(0, sizeof set, &set) == 0 ? 0 : errno;
#else
	(void)cores; (void)n;
	return ENOSYS;
#endif
}

// kiln_rt_allowed writes the cores the calling thread may run on into
// out (up to max) and returns how many, or -1.
static int kiln_rt_allowed(int* out, int max) {
#ifdef __linux__
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
	int n = 0;
	for (int c = 0; c < CPU_SETSIZE && n < max; c++) {
		if (CPU_ISSET(c, &set)) out[n++] = c;
	}
	return n;
#else
	(void)out; (void)max;
	return -1;
#endif
}
*/
import "C"

import (
	"errors"
	"fmt"
	goruntime "runtime"
	"syscall"
	"unsafe"
)

// The Go runtime must not stay on the one core libgomp bound the first
// thread to (kiln_rt_unbind_openmp); having widened the threads, it sizes
// itself again for the cores they now have.
func init() {
	if C.kiln_rt_unbind_openmp() > 0 {
		goruntime.SetDefaultGOMAXPROCS()
	}
}

// CanRun reports whether this kiln can load and run compiled artifacts
// (it was built with cgo).
const CanRun = true

// cAlloc returns zeroed, Alignment-aligned C memory of at least nbytes
// bytes (a zero request still returns a valid, non-nil block).
func cAlloc(nbytes int64) (unsafe.Pointer, error) {
	if nbytes < 0 {
		return nil, fmt.Errorf("negative allocation size %d", nbytes)
	}
	if uint64(nbytes) > uint64(^C.size_t(0))-Alignment {
		return nil, fmt.Errorf("allocation of %d bytes is too large", nbytes)
	}
	p := C.kiln_rt_alloc(C.size_t(nbytes), Alignment)
	if p == nil {
		return nil, fmt.Errorf("out of memory allocating %d bytes", nbytes)
	}
	return p, nil
}

// cFree releases memory from cAlloc (nil is ignored).
func cFree(p unsafe.Pointer) {
	if p != nil {
		C.free(p)
	}
}

// dlOpen loads a shared library with RTLD_NOW|RTLD_LOCAL.
func dlOpen(path string) (unsafe.Pointer, error) {
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	r := C.kiln_rt_dlopen(cp)
	if r.handle == nil {
		msg := C.GoString(r.err)
		C.free(unsafe.Pointer(r.err))
		return nil, errors.New(msg)
	}
	return r.handle, nil
}

// dlSym looks a symbol up in a library handle (nil when absent).
func dlSym(handle unsafe.Pointer, name string) unsafe.Pointer {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	return C.kiln_rt_dlsym(handle, cn)
}

// readRegistry reads a kiln_func_registry table: name → function pointer.
// Duplicate or empty names and a missing terminator are errors.
func readRegistry(table unsafe.Pointer) (map[string]unsafe.Pointer, error) {
	out := map[string]unsafe.Pointer{}
	for i := 0; i < maxRegistry; i++ {
		var name *C.char
		var fn unsafe.Pointer
		C.kiln_rt_registry_entry(table, C.int32_t(i), &name, &fn)
		if name == nil && fn == nil {
			return out, nil
		}
		if name == nil || fn == nil {
			return nil, fmt.Errorf("entry %d of %s has a null name or function", i, RegistrySymbol)
		}
		n := C.GoStringN(name, C.int(C.strnlen(name, 4096)))
		if n == "" {
			return nil, fmt.Errorf("entry %d of %s has an empty name", i, RegistrySymbol)
		}
		if _, dup := out[n]; dup {
			return nil, fmt.Errorf("%s names %q twice", RegistrySymbol, n)
		}
		out[n] = fn
	}
	return nil, fmt.Errorf("%s has more than %d entries (no terminator?)", RegistrySymbol, maxRegistry)
}

// callSetNumThreads calls a library's kiln_set_num_threads.
func callSetNumThreads(f unsafe.Pointer, n int32) {
	C.kiln_rt_set_threads(f, C.int32_t(n))
}

// callPacked calls a packed function on a C kiln_tensor array. On a non-zero
// return it reports the library's error text (or the code when the library
// recorded none).
func callPacked(f unsafe.Pointer, args unsafe.Pointer, n int32, setErr, getErr unsafe.Pointer) error {
	return callError(C.kiln_rt_call(f, (*C.kiln_tensor)(args), C.int32_t(n), setErr, getErr))
}

// packCalls builds a C array of the calls for callAll; the caller frees
// it with cFree.
func packCalls(items []callItem) (unsafe.Pointer, error) {
	p, err := cAlloc(int64(len(items)) * int64(C.sizeof_kiln_rt_item))
	if err != nil {
		return nil, err
	}
	for i, it := range items {
		C.kiln_rt_set_item((*C.kiln_rt_item)(p), C.int32_t(i), it.fn, it.args, C.int32_t(it.n), it.setErr, it.getErr)
	}
	return p, nil
}

// callAll makes the calls [from, to) of a packCalls array in order, in
// one cgo call, and stops at the first failure: it returns that call's
// index and error (as callPacked's), or -1.
func callAll(items unsafe.Pointer, from, to int) (int, error) {
	var r C.kiln_rt_call_result
	i := C.kiln_rt_call_all((*C.kiln_rt_item)(items), C.int32_t(from), C.int32_t(to), &r)
	if i < 0 {
		return -1, nil
	}
	return int(i), callError(r)
}

// callError is the error of a call's result: nil for code 0, else the
// library's error text (or the code when the library recorded none).
func callError(r C.kiln_rt_call_result) error {
	if r.rc == 0 {
		return nil
	}
	if r.msg != nil {
		msg := C.GoString(r.msg)
		C.free(unsafe.Pointer(r.msg))
		return fmt.Errorf("%s (code %d)", msg, int32(r.rc))
	}
	return fmt.Errorf("returned code %d without an error message", int32(r.rc))
}

// kilnTensorSize is sizeof(kiln_tensor).
const kilnTensorSize = int64(C.sizeof_kiln_tensor)

// packArgs builds one C block holding a kiln_tensor array for args followed
// by their shape arrays, so that the block is self-contained and can be
// handed to C as is. The caller frees it with cFree. The data pointers it
// holds are only valid while the arrays' buffers are alive.
func packArgs(args []*NDArray) (unsafe.Pointer, error) {
	dims := 0
	for _, a := range args {
		dims += len(a.shape)
	}
	block, err := cAlloc(int64(len(args))*kilnTensorSize + int64(dims)*8)
	if err != nil {
		return nil, err
	}
	if len(args) == 0 {
		return block, nil
	}
	ts := unsafe.Slice((*C.kiln_tensor)(block), len(args))
	var shapes []C.int64_t
	if dims > 0 {
		shapes = unsafe.Slice((*C.int64_t)(unsafe.Add(block, int64(len(args))*kilnTensorSize)), dims)
	}
	off := 0
	for i, a := range args {
		p, err := a.dataPtr()
		if err != nil {
			cFree(block)
			return nil, fmt.Errorf("argument %d: %w", i, err)
		}
		code, bits, _ := dtypeCode(a.dtype)
		t := &ts[i]
		t.data = p
		t.ndim = C.int32_t(len(a.shape))
		if len(a.shape) > 0 {
			for k, d := range a.shape {
				shapes[off+k] = C.int64_t(d)
			}
			t.shape = &shapes[off]
			off += len(a.shape)
		} else {
			t.shape = nil
		}
		t.dtype_code = C.uint8_t(code)
		t.dtype_bits = C.uint8_t(bits)
		t.dtype_lanes = 1
		t.device_type = C.int32_t(a.dev.Type)
		t.device_id = C.int32_t(a.dev.ID)
	}
	return block, nil
}

// headerDTypeCodes returns the header's kiln_dtype_code values in the
// order int, uint, float, bfloat, bool (for TestABIConstants).
func headerDTypeCodes() [5]uint8 {
	return [5]uint8{uint8(C.KILN_INT), uint8(C.KILN_UINT), uint8(C.KILN_FLOAT), uint8(C.KILN_BFLOAT), uint8(C.KILN_BOOL)}
}

// pinThread pins the calling OS thread (locked by the caller) to cores.
func pinThread(cores CoreSet) error {
	cs := make([]C.int, len(cores))
	for i, c := range cores {
		cs[i] = C.int(c)
	}
	if rc := C.kiln_rt_pin(&cs[0], C.int(len(cs))); rc != 0 {
		if rc == C.ENOSYS {
			return ErrNoAffinity
		}
		return fmt.Errorf("pinning a thread to cores %s: %w", cores, syscall.Errno(rc))
	}
	return nil
}

// allowedCores lists the cores this process may run on.
func allowedCores() (CoreSet, error) {
	buf := make([]C.int, maxCore)
	n := C.kiln_rt_allowed(&buf[0], C.int(len(buf)))
	if n < 0 {
		return nil, ErrNoAffinity
	}
	out := make(CoreSet, n)
	for i := range out {
		out[i] = int(buf[i])
	}
	return out, nil
}
