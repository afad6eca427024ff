//go:build cgo && !kiln_nodnnl

/* The oneDNN loader: see kd_funcs.h. Each trampoline is a jump through
 * its function pointer, so it passes any arguments and return value
 * through unchanged, whatever the function's prototype. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include "kd_dnnl.h"
#include "kd_funcs.h"

#define KD_STR2(x) #x
#define KD_STR(x) KD_STR2(x)

#define KD_PTR(f) __attribute__((used)) static void* kd_ptr_##f;
KD_FUNCS(KD_PTR)

#if defined(__x86_64__)
#define KD_TRAMPOLINE(f) \
	__asm__(".text\n.globl " #f "\n.type " #f ",@function\n" #f ":\n\tjmp *kd_ptr_" #f "(%rip)\n.size " #f ",.-" #f "\n");
#elif defined(__aarch64__)
#define KD_TRAMPOLINE(f) \
	__asm__(".text\n.globl " #f "\n.type " #f ",%function\n" #f ":\n\tadrp x16, kd_ptr_" #f "\n\tldr x16, [x16, :lo12:kd_ptr_" #f "]\n\tbr x16\n.size " #f ",.-" #f "\n");
#else
#error "kiln's dnnl backend loads oneDNN on x86-64 and aarch64 only; build with -tags kiln_nodnnl"
#endif
KD_FUNCS(KD_TRAMPOLINE)

int kd_load(char* err, int n) {
#if !KD_HEADER
	snprintf(err, n, "this kiln was built without oneDNN's header (install libdnnl-dev and rebuild)");
	return -1;
#else
	/* The library of the header's major version (its ABI), unless
	 * KILN_DNNL_LIBRARY names another file of that version. */
	const char* lib = getenv("KILN_DNNL_LIBRARY");
	if (lib == NULL || lib[0] == '\0') lib = "libdnnl.so." KD_STR(DNNL_VERSION_MAJOR);
	void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		snprintf(err, n, "cannot load %s (install libdnnl%s): %s", lib, KD_STR(DNNL_VERSION_MAJOR), dlerror());
		return -1;
	}
#define KD_RESOLVE(f) \
	if ((kd_ptr_##f = dlsym(h, #f)) == NULL) { \
		snprintf(err, n, "%s has no %s (oneDNN %s.x expected)", lib, #f, KD_STR(DNNL_VERSION_MAJOR)); \
		return -1; \
	}
	KD_FUNCS(KD_RESOLVE)
	return 0;
#endif
}
