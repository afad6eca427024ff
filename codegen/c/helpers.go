package c

// This file holds the C text the code generator emits around the
// functions: the fixed preamble (macros for pragmas and alignment), the
// runtime definitions (kiln_set_last_error ...), the argument checker of
// the packed wrappers and the static inline helpers that expressions use.
// Helpers are emitted only when used, in the order of helperTable, so the
// output is deterministic and contains no unused static functions.

// preambleMacros wraps every pragma in a macro so that the same source
// compiles warning-free with or without OpenMP and with GCC, Clang or a
// compiler that knows none of the pragmas (the AOT build for a
// microcontroller compiles without -fopenmp; the macros are then empty).
const preambleMacros = `#define KILN_PRAGMA(x) _Pragma(#x)
/* KILN_HIDDEN: a kernel defined in one translation unit of the library
 * and called from others, not exported from it. */
#if defined(__GNUC__)
#define KILN_HIDDEN __attribute__((visibility("hidden")))
#else
#define KILN_HIDDEN
#endif
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(_OPENMP) || defined(KILN_THREAD_POOL)
/* The thread count is library-wide (the Go runtime calls kernels from
 * whichever OS thread runs the goroutine, and OpenMP's own setting is per
 * thread), unless the calling OS thread has a count of its own, which the
 * graph executor sets on the thread that runs its kernels (SetThreads). */
int32_t kiln_thread_count(void);
#endif
#ifdef _OPENMP
#define KILN_PARALLEL_FOR KILN_PRAGMA(omp parallel for schedule(static) num_threads(kiln_thread_count()))
#define KILN_ATOMIC_WRITE KILN_PRAGMA(omp atomic write)
#else
#define KILN_PARALLEL_FOR
#define KILN_ATOMIC_WRITE
#endif
/* KILN_VECTORIZE asserts that a loop's iterations are independent: omp
 * simd under OpenMP (or -fopenmp-simd, which a pool library is built
 * with, saying so with KILN_OPENMP_SIMD), else the compiler's ivdep (GCC
 * rejects both on one loop). */
#if defined(_OPENMP) || defined(KILN_OPENMP_SIMD)
#define KILN_VECTORIZE KILN_PRAGMA(omp simd)
#elif defined(__clang__)
#define KILN_VECTORIZE KILN_PRAGMA(clang loop vectorize(assume_safety))
#elif defined(__GNUC__)
#define KILN_VECTORIZE KILN_PRAGMA(GCC ivdep)
#else
#define KILN_VECTORIZE
#endif
#if defined(__clang__)
#define KILN_UNROLL(n) KILN_PRAGMA(unroll n)
#elif defined(__GNUC__)
#define KILN_UNROLL(n) KILN_PRAGMA(GCC unroll n)
#else
#define KILN_UNROLL(n)
#endif
/* KILN_ASSUME(c) tells the compiler that c holds. */
#if defined(__GNUC__)
#define KILN_ASSUME(c) do { if (!(c)) __builtin_unreachable(); } while (0)
#else
#define KILN_ASSUME(c) ((void)0)
#endif
#if defined(__GNUC__)
#define KILN_ALIGN64 __attribute__((aligned(64)))
#else
#define KILN_ALIGN64
#endif
/* KILN_NOINLINE keeps a function out of its callers (an outlined loop
 * body out of its thunk: register allocation of the body alone). */
#if defined(__GNUC__)
#define KILN_NOINLINE __attribute__((noinline))
#else
#define KILN_NOINLINE
#endif
`

// threadLocalMacro defines KILN_THREAD_LOCAL: C11 _Thread_local, or
// GCC's __thread in C99 mode, or nothing with -DKILN_NO_THREADS
// (bare-metal targets without thread-local storage).
const threadLocalMacro = `#if defined(KILN_NO_THREADS)
#define KILN_THREAD_LOCAL
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define KILN_THREAD_LOCAL _Thread_local
#elif defined(__GNUC__)
#define KILN_THREAD_LOCAL __thread
#else
#define KILN_THREAD_LOCAL
#endif

`

// runtimeDefs defines the error functions the ABI header declares; the
// thread-count functions are in threadDefs (threaded libraries) or
// threadStubs. The error buffer is thread-local (threadLocalMacro).
const runtimeDefs = threadLocalMacro + `
static KILN_THREAD_LOCAL char kiln_last_error[512];

void kiln_set_last_error(const char* msg) {
  size_t n = 0;
  if (msg != NULL) {
    n = strlen(msg);
    if (n >= sizeof(kiln_last_error)) n = sizeof(kiln_last_error) - 1;
    memcpy(kiln_last_error, msg, n);
  }
  kiln_last_error[n] = '\0';
}

const char* kiln_get_last_error(void) { return kiln_last_error; }

`

// threadStubs are the thread-count functions of a library without
// threads (kiln_set_num_threads does nothing).
const threadStubs = `#ifdef _OPENMP
/* Compiled with -fopenmp anyway: KILN_PARALLEL_FOR's loops take OpenMP's
   thread count. */
int32_t kiln_thread_count(void) { return omp_get_max_threads(); }
#endif

void kiln_set_num_threads(int32_t n) { (void)n; }

void kiln_set_num_threads_here(int32_t n) { (void)n; }
`

// argCheck is the argument checker every packed wrapper calls.
const argCheck = `static const char* kiln_dtype_name(uint8_t code, uint8_t bits) {
  switch (code) {
    case KILN_INT:
      switch (bits) { case 8: return "int8"; case 16: return "int16"; case 32: return "int32"; case 64: return "int64"; }
      break;
    case KILN_UINT:
      switch (bits) { case 8: return "uint8"; case 16: return "uint16"; case 32: return "uint32"; case 64: return "uint64"; }
      break;
    case KILN_FLOAT:
      switch (bits) { case 16: return "float16"; case 32: return "float32"; case 64: return "float64"; }
      break;
    case KILN_BFLOAT:
      if (bits == 16) return "bfloat16";
      break;
    case KILN_BOOL:
      if (bits == 8) return "bool";
      break;
  }
  return "unknown dtype";
}

/* kiln_check_arg checks one argument of a packed call against the
 * parameter's dtype and shape; on a mismatch it records an error naming
 * the function, the argument and the mismatch and returns -1. */
static int32_t kiln_check_arg(const kiln_tensor* t, const char* fn, int32_t index, const char* name,
                              int32_t ndim, const int64_t* shape, uint8_t code, uint8_t bits) {
  char msg[320];
  int32_t i;
  int64_t n = 1;
  if (t->dtype_code != code || t->dtype_bits != bits || t->dtype_lanes != 1) {
    snprintf(msg, sizeof(msg), "%s: argument %d (%s): expected dtype %s, got %s (code %d, bits %d, lanes %d)",
             fn, (int)index, name, kiln_dtype_name(code, bits), kiln_dtype_name(t->dtype_code, t->dtype_bits),
             (int)t->dtype_code, (int)t->dtype_bits, (int)t->dtype_lanes);
    kiln_set_last_error(msg);
    return -1;
  }
  if (t->ndim != ndim) {
    snprintf(msg, sizeof(msg), "%s: argument %d (%s): expected ndim %d, got %d", fn, (int)index, name, (int)ndim,
             (int)t->ndim);
    kiln_set_last_error(msg);
    return -1;
  }
  if (ndim > 0 && t->shape == NULL) {
    snprintf(msg, sizeof(msg), "%s: argument %d (%s): shape is NULL", fn, (int)index, name);
    kiln_set_last_error(msg);
    return -1;
  }
  for (i = 0; i < ndim; ++i) {
    if (t->shape[i] != shape[i]) {
      snprintf(msg, sizeof(msg), "%s: argument %d (%s): dimension %d has extent %lld, expected %lld", fn, (int)index,
               name, (int)i, (long long)t->shape[i], (long long)shape[i]);
      kiln_set_last_error(msg);
      return -1;
    }
    n *= shape[i];
  }
  if (n > 0 && t->data == NULL) {
    snprintf(msg, sizeof(msg), "%s: argument %d (%s): data is NULL", fn, (int)index, name);
    kiln_set_last_error(msg);
    return -1;
  }
  return 0;
}

static int32_t kiln_check_num_args(const kiln_tensor* args, int32_t num_args, const char* fn, int32_t want) {
  char msg[320];
  if (num_args != want) {
    snprintf(msg, sizeof(msg), "%s: expected %d arguments, got %d", fn, (int)want, (int)num_args);
    kiln_set_last_error(msg);
    return -1;
  }
  if (want > 0 && args == NULL) {
    snprintf(msg, sizeof(msg), "%s: args is NULL", fn);
    kiln_set_last_error(msg);
    return -1;
  }
  return 0;
}
`

// helper is one static inline C function the expressions may call.
type helper struct {
	name string
	deps []string
	code string
}

// helperTable lists the helpers in emission order (dependencies first).
var helperTable = []helper{
	{name: "kiln_floordiv_i32", code: `static inline int32_t kiln_floordiv_i32(int32_t a, int32_t b) {
  int32_t q;
  if (b == -1) return (int32_t)(0u - (uint32_t)a);
  q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) q -= 1;
  return q;
}`},
	{name: "kiln_floormod_i32", code: `static inline int32_t kiln_floormod_i32(int32_t a, int32_t b) {
  int32_t r;
  if (b == -1) return 0;
  r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}`},
	{name: "kiln_floordiv_i64", code: `static inline int64_t kiln_floordiv_i64(int64_t a, int64_t b) {
  int64_t q;
  if (b == -1) return (int64_t)(0u - (uint64_t)a);
  q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) q -= 1;
  return q;
}`},
	{name: "kiln_floormod_i64", code: `static inline int64_t kiln_floormod_i64(int64_t a, int64_t b) {
  int64_t r;
  if (b == -1) return 0;
  r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}`},
	// check_index: the first out-of-range index (of any thread) is kept
	// for the error message; the load then reads element 0.
	{name: "kiln_check_index", code: `typedef struct { int32_t failed; int64_t index, n; } kiln_index_error;
static inline int64_t kiln_check_index(int64_t i, int64_t n, kiln_index_error* e) {
  int32_t expected = 0;
  if (i >= -n && i < n) return i < 0 ? i + n : i;
  if (__atomic_compare_exchange_n(&e->failed, &expected, 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    e->index = i;
    e->n = n;
  }
  return 0;
}`},
	// A float Select whose arms load memory (expr.go selectHelper): both
	// arms are arguments, so both are evaluated, as TIR defines.
	{name: "kiln_sel_f32", code: `static inline float kiln_sel_f32(int c, float a, float b) { return c ? a : b; }`},
	{name: "kiln_sel_f64", code: `static inline double kiln_sel_f64(int c, double a, double b) { return c ? a : b; }`},
	{name: "kiln_min_i32", code: `static inline int32_t kiln_min_i32(int32_t a, int32_t b) { return a < b ? a : b; }`},
	{name: "kiln_max_i32", code: `static inline int32_t kiln_max_i32(int32_t a, int32_t b) { return a > b ? a : b; }`},
	{name: "kiln_min_i64", code: `static inline int64_t kiln_min_i64(int64_t a, int64_t b) { return a < b ? a : b; }`},
	{name: "kiln_max_i64", code: `static inline int64_t kiln_max_i64(int64_t a, int64_t b) { return a > b ? a : b; }`},
	{name: "kiln_min_u32", code: `static inline uint32_t kiln_min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }`},
	{name: "kiln_max_u32", code: `static inline uint32_t kiln_max_u32(uint32_t a, uint32_t b) { return a > b ? a : b; }`},
	{name: "kiln_min_u64", code: `static inline uint64_t kiln_min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }`},
	{name: "kiln_max_u64", code: `static inline uint64_t kiln_max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }`},
	// Float min/max follow Go's math.Min/Max (the interpreter's
	// semantics): an infinity of the winning sign wins, then NaN
	// propagates, and -0 < +0. They are written as selects, without
	// branches, so that loops over them (ReLU epilogues, max pooling)
	// vectorise: each rule overrides the ones before it, the strongest
	// last. Two zeros give a + b for max (+0 unless both are -0) and
	// -(-a + -b) for min (-0 unless both are +0).
	{name: "kiln_min_f32", code: `static inline float kiln_min_f32(float a, float b) {
  float m = a < b ? a : b;
  m = ((a == 0) & (b == 0)) ? -(-a + -b) : m;
  m = ((a != a) | (b != b)) ? NAN : m;
  return ((a == -INFINITY) | (b == -INFINITY)) ? -INFINITY : m;
}`},
	{name: "kiln_max_f32", code: `static inline float kiln_max_f32(float a, float b) {
  float m = a > b ? a : b;
  m = ((a == 0) & (b == 0)) ? a + b : m;
  m = ((a != a) | (b != b)) ? NAN : m;
  return ((a == INFINITY) | (b == INFINITY)) ? INFINITY : m;
}`},
	// With a constant c that is finite, and not -0 for max nor +0 for
	// min, the rules above reduce to these (expr.go minMaxConst): a
	// unless it is at most c (at least c for min), which a NaN is not, so
	// one unordered comparison and a select (a NaN gives a itself, as
	// the interpreter any NaN). The form with a separate NaN test took a
	// quarter longer in a vectorised bias-and-clip loop (0.100 against
	// 0.079 ns per value on Zen 5, in L1).
	{name: "kiln_maxc_f32", code: `static inline float kiln_maxc_f32(float a, float c) { return !(a <= c) ? a : c; }`},
	{name: "kiln_minc_f32", code: `static inline float kiln_minc_f32(float a, float c) { return !(a >= c) ? a : c; }`},
	// A clip with constant bounds before a conversion to int32
	// (expr.go clampToInt32): max then min (kiln_clamp_f32) or min then
	// max (kiln_clampr_f32), a NaN operand giving the constant n
	// (the _n forms) or, without a test, what the comparisons give.
	{name: "kiln_clamp_f32", code: `static inline float kiln_clamp_f32(float v, float lo, float hi) { const float t = v > lo ? v : lo; return t < hi ? t : hi; }`},
	{name: "kiln_clampr_f32", code: `static inline float kiln_clampr_f32(float v, float hi, float lo) { const float t = v < hi ? v : hi; return t > lo ? t : lo; }`},
	{name: "kiln_clamp_n_f32", code: `static inline float kiln_clamp_n_f32(float v, float lo, float hi, float n) { const float t = v > lo ? v : lo; return v != v ? n : (t < hi ? t : hi); }`},
	{name: "kiln_clampr_n_f32", code: `static inline float kiln_clampr_n_f32(float v, float hi, float lo, float n) { const float t = v < hi ? v : hi; return v != v ? n : (t > lo ? t : lo); }`},
	{name: "kiln_maxc_f64", code: `static inline double kiln_maxc_f64(double a, double c) { return !(a <= c) ? a : c; }`},
	{name: "kiln_minc_f64", code: `static inline double kiln_minc_f64(double a, double c) { return !(a >= c) ? a : c; }`},
	{name: "kiln_min_f64", code: `static inline double kiln_min_f64(double a, double b) {
  double m = a < b ? a : b;
  m = ((a == 0) & (b == 0)) ? -(-a + -b) : m;
  m = ((a != a) | (b != b)) ? (double)NAN : m;
  return ((a == -INFINITY) | (b == -INFINITY)) ? -INFINITY : m;
}`},
	{name: "kiln_max_f64", code: `static inline double kiln_max_f64(double a, double b) {
  double m = a > b ? a : b;
  m = ((a == 0) & (b == 0)) ? a + b : m;
  m = ((a != a) | (b != b)) ? (double)NAN : m;
  return ((a == INFINITY) | (b == INFINITY)) ? INFINITY : m;
}`},
	// Float floor division and modulo are computed in double (exact for
	// float32 and narrower operands) and rounded once, as the interpreter
	// does.
	{name: "kiln_floordiv_f64", code: `static inline double kiln_floordiv_f64(double a, double b) { return floor(a / b); }`},
	{name: "kiln_floormod_f64", code: `static inline double kiln_floormod_f64(double a, double b) { return a - floor(a / b) * b; }`},
	// Float to integer conversion without undefined behaviour: values
	// outside the int64 range and NaN give INT64_MIN (what the Go
	// interpreter produces on amd64); unsigned targets convert
	// non-negative values through uint64 (2^64 and above give 2^63).
	// The result is then narrowed by a C cast (which wraps on GCC/Clang).
	{name: "kiln_f2i64", code: `static inline int64_t kiln_f2i64(double x) {
  if (x >= -9223372036854775808.0 && x < 9223372036854775808.0) return (int64_t)x;
  return INT64_MIN;
}`},
	{name: "kiln_f2u64", deps: []string{"kiln_f2i64"}, code: `static inline uint64_t kiln_f2u64(double x) {
  if (x >= 0) {
    if (x < 18446744073709551616.0) return (uint64_t)x;
    return UINT64_C(0x8000000000000000);
  }
  return (uint64_t)kiln_f2i64(x);
}`},
	// float16 and bfloat16 are stored as uint16_t and computed in float;
	// every arithmetic result is rounded back to the 16-bit format
	// (round to nearest even) so results match a true 16-bit computation.
	{name: "kiln_f16_to_f32", code: `static inline float kiln_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (uint32_t)(h >> 10) & 0x1fu;
  uint32_t m = (uint32_t)h & 0x3ffu;
  uint32_t bits;
  float f;
  if (e == 0) {
    f = ldexpf((float)m, -24);
    return sign ? -f : f;
  }
  if (e == 0x1fu) {
    bits = sign | 0x7f800000u | (m << 13);
  } else {
    bits = sign | ((e + 112u) << 23) | (m << 13);
  }
  memcpy(&f, &bits, sizeof(f));
  return f;
}`},
	{name: "kiln_f64_to_f16", code: `static inline uint16_t kiln_f64_to_f16(double x) {
  uint64_t u, m, rem, half;
  uint16_t sign;
  int e;
  double a;
  if (isnan(x)) return 0x7e00u;
  memcpy(&u, &x, sizeof(u));
  sign = (uint16_t)((u >> 48) & 0x8000u);
  a = fabs(x);
  if (a < 6.103515625e-05) return (uint16_t)(sign | (uint16_t)nearbyint(a * 16777216.0));
  e = (int)((u >> 52) & 0x7ffu) - 1023;
  if (e > 15) return (uint16_t)(sign | 0x7c00u);
  m = u & UINT64_C(0xfffffffffffff);
  rem = m & ((UINT64_C(1) << 42) - 1);
  half = UINT64_C(1) << 41;
  m >>= 42;
  if (rem > half || (rem == half && (m & 1u))) m += 1;
  return (uint16_t)(sign | (uint16_t)((((uint32_t)(e + 15)) << 10) + (uint32_t)m));
}`},
	{name: "kiln_bf16_to_f32", code: `static inline float kiln_bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}`},
	{name: "kiln_f64_to_bf16", code: `static inline uint16_t kiln_f64_to_bf16(double x) {
  uint64_t u, m, rem, half;
  uint16_t sign;
  int e;
  double a;
  memcpy(&u, &x, sizeof(u));
  sign = (uint16_t)((u >> 48) & 0x8000u);
  if (isnan(x)) return (uint16_t)(sign | 0x7fc0u);
  a = fabs(x);
  if (a < 1.1754943508222875e-38) return (uint16_t)(sign | (uint16_t)nearbyint(ldexp(a, 133)));
  e = (int)((u >> 52) & 0x7ffu) - 1023;
  if (e > 127) return (uint16_t)(sign | 0x7f80u);
  m = u & UINT64_C(0xfffffffffffff);
  rem = m & ((UINT64_C(1) << 45) - 1);
  half = UINT64_C(1) << 44;
  m >>= 45;
  if (rem > half || (rem == half && (m & 1u))) m += 1;
  return (uint16_t)(sign | (uint16_t)((((uint32_t)(e + 127)) << 7) + (uint32_t)m));
}`},
	// KILN_FMAF is fmaf where the processor fuses multiply-add in
	// hardware (x86 FMA, Arm), else a multiply and an add (a libm fmaf
	// call would be slow and not vectorise). The float32 helpers below
	// are within 1 ulp either way.
	{name: "KILN_FMAF", code: `#ifndef KILN_FMAF
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define KILN_FMAF(a, b, c) fmaf(a, b, c)
#else
#define KILN_FMAF(a, b, c) ((a) * (b) + (c))
#endif
#endif`},
	// kiln_erff is erf for float32 without a libm call, so that loops
	// using it (GELU) vectorise, computed in float32: |x| < 1 as
	// |x| + |x| * Q(x^2), 1 <= |x| < 2.2 and 2.2 <= |x| < 3.92 as
	// polynomials in (|x| - 1.6) / 0.6 and (|x| - 3.06) / 0.86 (Chebyshev
	// fits of degree 6, 9 and 9, errors 1.2e-9, 3.6e-9 and 9.7e-9), 1 from
	// 3.92 on (erf rounds to 1 in float32 there), NaN for NaN, and the
	// sign of x. The three pieces are selected without branches. Checked
	// against (float)erf((double)x) on every float32, with and without
	// fused multiply-add: never more than 1 ulp apart.
	{name: "kiln_erff", deps: []string{"KILN_FMAF"}, code: `static inline float kiln_erff(float x) {
  float a = fabsf(x);
  float t = a * a;
  float pa = 7.875875062685488e-05f;
  pa = KILN_FMAF(pa, t, -0.000801686428716587f);
  pa = KILN_FMAF(pa, t, 0.005189087423433974f);
  pa = KILN_FMAF(pa, t, -0.026854212010626412f);
  pa = KILN_FMAF(pa, t, 0.11283594715160218f);
  pa = KILN_FMAF(pa, t, -0.37612626666720334f);
  pa = KILN_FMAF(pa, t, 0.1283791658483509f);
  pa = KILN_FMAF(a, pa, a);
  float u = (a - 1.6f) * 1.6666666f;
  float pb = 1.369028706117413e-05f;
  pb = KILN_FMAF(pb, u, -1.9244216886619105e-05f);
  pb = KILN_FMAF(pb, u, -0.00016778269108895733f);
  pb = KILN_FMAF(pb, u, 0.0007258305109194822f);
  pb = KILN_FMAF(pb, u, -0.00034084183079583614f);
  pb = KILN_FMAF(pb, u, -0.006392197405128681f);
  pb = KILN_FMAF(pb, u, 0.025875681568946693f);
  pb = KILN_FMAF(pb, u, -0.050243793467385216f);
  pb = KILN_FMAF(pb, u, 0.052337434108137154f);
  pb = KILN_FMAF(pb, u, 0.9763483804652228f);
  float v = (a - 3.06f) * 1.1627907f;
  float pc = 1.3494849725168392e-06f;
  pc = KILN_FMAF(pc, v, -3.055868485117534e-05f);
  pc = KILN_FMAF(pc, v, 0.00011774466824708361f);
  pc = KILN_FMAF(pc, v, -0.0002440818164541258f);
  pc = KILN_FMAF(pc, v, 0.00036506863521374756f);
  pc = KILN_FMAF(pc, v, -0.00042234083034830514f);
  pc = KILN_FMAF(pc, v, 0.00036400013614989936f);
  pc = KILN_FMAF(pc, v, -0.0002193878508079f);
  pc = KILN_FMAF(pc, v, 8.324859463585995e-05f);
  pc = KILN_FMAF(pc, v, 0.9999849244834524f);
  float r = a < 2.2f ? pb : pc;
  r = a < 1.0f ? pa : r;
  r = a < 3.92f ? r : 1.0f;
  r = a == a ? r : a;
  return copysignf(r, x);
}`},
	// kiln_expd_f32 is exp(x) for a float32 x, in double without a libm
	// call, so that loops using it vectorise (GCC cannot vectorise expf):
	// n = round(x / ln 2) by the 1.5 * 2^52 trick (no float-to-int
	// conversion), y = x - n ln 2, exp(y) by a degree-8 Chebyshev fit on
	// [-ln2/2, ln2/2] (relative error 8.1e-13), times 2^n built in the
	// exponent bits; x > 128 gives inf, x < -128 gives 0 and NaN stays
	// NaN (chosen with integer masks, not branches).
	{name: "kiln_expd_f32", code: `static inline double kiln_expd_f32(float x) {
  union { float f; uint32_t u; } xb;
  union { double d; uint64_t u; } k, s, r;
  uint32_t ab;
  uint64_t out, sel;
  double y, p;
  double xd = (double)x;
  k.d = xd * 1.4426950408889634 + 6755399441055744.0;
  y = xd - (k.d - 6755399441055744.0) * 0.6931471805599453;
  p = 2.4876178959085513e-05;
  p = p * y + 0.00019915881871396035;
  p = p * y + 0.001388882165071769;
  p = p * y + 0.008333266071022454;
  p = p * y + 0.0416666668910917;
  p = p * y + 0.16666666891180545;
  p = p * y + 0.49999999999797773;
  p = p * y + 0.999999999979769;
  p = p * y + 1.0;
  s.u = ((k.u + 1023u) & 0x7ffu) << 52;
  r.d = p * s.d;
  xb.f = x;
  ab = xb.u & 0x7fffffffu;
  out = (xb.u >> 31) ? UINT64_C(0) : UINT64_C(0x7ff0000000000000);
  sel = (uint64_t)0 - (uint64_t)(ab > 0x43000000u && ab <= 0x7f800000u);
  r.u = (r.u & ~sel) | (out & sel);
  return r.d;
}`},
	// kiln_expf_core is exp(x) for x in [-104, 89] (callers clamp), the
	// core kiln_expf, kiln_sigmoidf_v and kiln_tanhf share: n = round(x /
	// ln 2) by the 1.5 * 2^23 trick, r = x - n ln 2 (ln 2 in two parts),
	// exp(r) = 1 + r + r^2 Q(r) (Q a degree-5 Chebyshev fit on [-ln2/2,
	// ln2/2]), times 2^n applied in two halves so that subnormal results
	// are rounded once.
	{name: "kiln_expf_core", deps: []string{"KILN_FMAF"}, code: `static inline float kiln_expf_core(float x) {
  union { float f; int32_t i; } kb, s1, s2;
  kb.f = KILN_FMAF(x, 1.44269504088896341f, 12582912.0f);
  float n = kb.f - 12582912.0f;
  float r = KILN_FMAF(n, -0.693145751953125f, x);
  r = KILN_FMAF(n, -1.428606765330187e-06f, r);
  float q = 0.00019890980869750327f;
  q = KILN_FMAF(q, r, 0.0013933641031986701f);
  q = KILN_FMAF(q, r, 0.008333310934448869f);
  q = KILN_FMAF(q, r, 0.04166646500604005f);
  q = KILN_FMAF(q, r, 0.16666666681614256f);
  q = KILN_FMAF(q, r, 0.5000000013457727f);
  float p = KILN_FMAF(r * r, q, r) + 1.0f;
  int32_t ni = kb.i - 0x4b400000;
  int32_t n1 = ni >> 1;
  s1.i = (n1 + 127) << 23;
  s2.i = (ni - n1 + 127) << 23;
  return (p * s1.f) * s2.f;
}`},
	// kiln_expf is float32 exp for vectorized loops (elsewhere glibc's
	// table-driven expf is faster), in float32: kiln_expf_core on x
	// clamped to 89 from above; inf above 88.7228394, 0 below -104, NaN
	// for NaN, selected without branches. Below -104 the core computes
	// exp(0), which the select discards: at -104 it would scale into the
	// subnormal range, a microcode assist of some 150 cycles on Intel
	// cores for every element a softmax masks (GPT-2's causal attention:
	// 0.23 ms per softmax of 4x128x128 on an Emerald Rapids core, 0.39
	// with AVX2 code, against ONNX Runtime's 0.036). Checked against (float)exp((double)x) on
	// every float32, with and without fused multiply-add: never more than
	// 1 ulp apart. kiln_sigmoidf is the float32 sigmoid, computed in
	// double so that it neither overflows (x < -88.7 gives the subnormal
	// results, not 0) nor loses accuracy (within 1 ulp).
	{name: "kiln_expf", deps: []string{"kiln_expf_core"}, code: `static inline float kiln_expf(float x) {
  float xc = x < -104.0f ? 0.0f : x;
  xc = xc > 89.0f ? 89.0f : xc;
  float y = kiln_expf_core(xc);
  y = x > 88.7228394f ? INFINITY : y;
  y = x < -104.0f ? 0.0f : y;
  return x == x ? y : x;
}`},
	// kiln_sigmoidf_v is the float32 sigmoid in vectorized loops (SiLU,
	// squeeze-excite gates), in float32 where kiln_sigmoidf works in
	// double at half the lanes: e = exp(-|x|) by kiln_expf_core, r = 1 /
	// (1 + e), and r or e * r by the sign of x; 0 or 1 from |x| = 104 on,
	// where the result rounds to them (the core is then evaluated at 0,
	// not in the subnormal range: see kiln_expf); NaN for NaN. Checked against
	// the correctly rounded sigmoid on every float32, with and without
	// fused multiply-add: at most 3 ulp apart (393 inputs at 3 ulp with
	// it, 424 without; 4.2 million at 2), 2.6 times faster than
	// kiln_sigmoidf in a vectorized loop.
	{name: "kiln_sigmoidf_v", deps: []string{"kiln_expf_core"}, code: `static inline float kiln_sigmoidf_v(float x) {
  float a = fabsf(x);
  float e = kiln_expf_core(-(a < 104.0f ? a : 0.0f));
  float d = 1.0f / (1.0f + e);
  float y = x < 0.0f ? e * d : d;
  y = a < 104.0f ? y : (x < 0.0f ? 0.0f : 1.0f);
  return x == x ? y : x;
}`},
	{name: "kiln_sigmoidf", deps: []string{"kiln_expd_f32"},
		code: `static inline float kiln_sigmoidf(float x) { return (float)(1.0 / (1.0 + kiln_expd_f32(-x))); }`},
	// kiln_tanhf is float32 tanh without a libm call, so that loops using
	// it (GPT-2's GELU, recurrent cells) vectorise, computed in float32:
	// |x| < 0.625 as |x| + |x|^3 P(x^2) (P a degree-4 least-squares fit at
	// Chebyshev nodes, relative error 4.7e-9), else 1 - 2 / (exp(2|x|) +
	// 1) with exp by kiln_expf_core (2|x| up to 18.2), 1 from 9.1 on
	// (where tanh rounds to 1), NaN for NaN, and the sign of x; selected
	// without branches. Checked
	// against (float)tanh((double)x) on every float32, with and without
	// fused multiply-add: never more than 1 ulp apart.
	{name: "kiln_tanhf", deps: []string{"KILN_FMAF", "kiln_expf_core"}, code: `static inline float kiln_tanhf(float x) {
  float a = fabsf(x);
  float z = a * a;
  float p = -0.0056920009466232286f;
  p = KILN_FMAF(p, z, 0.020626306518273085f);
  p = KILN_FMAF(p, z, -0.053735323736248695f);
  p = KILN_FMAF(p, z, 0.13331381418765276f);
  p = KILN_FMAF(p, z, -0.3333327921103848f);
  float small = KILN_FMAF(p * z, a, a);
  float ac = a < 9.1f ? a : 9.1f;
  float big = 1.0f - 2.0f / (kiln_expf_core(ac + ac) + 1.0f);
  float y = a < 0.625f ? small : big;
  y = a < 9.1f ? y : 1.0f;
  y = a == a ? y : a;
  return copysignf(y, x);
}`},
	{name: "kiln_round_f16", deps: []string{"kiln_f16_to_f32", "kiln_f64_to_f16"},
		code: `static inline float kiln_round_f16(double x) { return kiln_f16_to_f32(kiln_f64_to_f16(x)); }`},
	{name: "kiln_round_bf16", deps: []string{"kiln_bf16_to_f32", "kiln_f64_to_bf16"},
		code: `static inline float kiln_round_bf16(double x) { return kiln_bf16_to_f32(kiln_f64_to_bf16(x)); }`},
}

var helperIndex = func() map[string]int {
	m := map[string]int{}
	for i, h := range helperTable {
		m[h.name] = i
	}
	return m
}()
