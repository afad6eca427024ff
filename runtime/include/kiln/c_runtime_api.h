/*
 * kiln C runtime ABI: the contract between generated C code (codegen/c),
 * the Go runtime (runtime/) and the AOT C runtime. Generated code includes
 * this header; nothing in it allocates memory.
 */
#ifndef KILN_C_RUNTIME_API_H_
#define KILN_C_RUNTIME_API_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element type codes (DLPack's codes). */
enum kiln_dtype_code {
  KILN_INT = 0U,
  KILN_UINT = 1U,
  KILN_FLOAT = 2U,
  KILN_BFLOAT = 4U,
  KILN_BOOL = 6U
};

/* Device types (DLPack's numbering for CPU; others are kiln's own). */
enum kiln_device_type {
  KILN_DEVICE_CPU = 1,
  KILN_DEVICE_EXT_DEV = 12
};

/* kiln_tensor is a DLPack-style view of one dense row-major tensor. */
typedef struct kiln_tensor {
  void* data;             /* first element, 64-byte aligned when kiln allocated it */
  const int64_t* shape;   /* ndim extents */
  int32_t ndim;
  uint8_t dtype_code;     /* enum kiln_dtype_code */
  uint8_t dtype_bits;     /* 8, 16, 32, 64 */
  uint16_t dtype_lanes;   /* always 1 */
  int32_t device_type;    /* enum kiln_device_type */
  int32_t device_id;
} kiln_tensor;

/*
 * The packed calling convention of every exported operator function:
 *   int32_t NAME(kiln_tensor* args, int32_t num_args);
 * args holds the inputs then the outputs, in the order of the function's
 * parameters. The function checks num_args, ranks, shapes and dtypes and
 * returns 0 on success or non-zero after calling kiln_set_last_error.
 * For each packed function NAME, codegen also emits the unpacked form
 *   int32_t NAME_unpacked(T0* arg0, T1* arg1, ...);
 * taking raw data pointers, which the AOT executor calls directly.
 */
typedef int32_t (*kiln_packed_func)(kiln_tensor* args, int32_t num_args);

/*
 * The function table every kiln library exports: the packed functions the
 * graph executor may call, by name, terminated by {NULL, NULL}:
 *   const kiln_func_entry kiln_func_registry[] = {{"f", f}, {NULL, NULL}};
 * The runtime looks functions up in this table only (never by dlsym of a
 * name from graph.json), so a program can call nothing else the process
 * holds. kiln generates it (kiln_registry.c); hand-written libraries
 * define it themselves.
 */
typedef struct kiln_func_entry {
  const char* name;
  kiln_packed_func func;
} kiln_func_entry;

/* Records an error message for the caller (thread-local; defined once per library). */
void kiln_set_last_error(const char* msg);
/* Returns the last error message recorded on this thread ("" when none). */
const char* kiln_get_last_error(void);
/* Sets the number of threads parallel loops use (<= 0: library default). */
void kiln_set_num_threads(int32_t n);
/* Sets the calling OS thread's count, which comes before
 * kiln_set_num_threads' on that thread (<= 0: none). Optional: the graph
 * executor uses it when a library exports it (GraphExecutor.SetThreads). */
void kiln_set_num_threads_here(int32_t n);

#ifdef __cplusplus
}
#endif

#endif /* KILN_C_RUNTIME_API_H_ */
