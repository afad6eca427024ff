package c

import (
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/internal/escape"
	"github.com/kiln-dev/kiln/ir"
)

// libcNames are C library functions the generated code or its includes
// declare: they are never used as variable names, and call_extern to them
// gets no generated prototype (math.h already declares them).
var libcNames = wordSet(`exp expf exp2 exp2f log logf log2 log2f log10 log10f sqrt sqrtf tanh tanhf fabs fabsf
floor floorf ceil ceilf round roundf nearbyint nearbyintf rint rintf trunc truncf erf erff sin sinf cos cosf
tan tanf asin asinf acos acosf atan atanf sinh sinhf cosh coshf pow powf atan2 atan2f fma fmaf fmod fmodf
ldexp ldexpf frexp frexpf fmin fminf fmax fmaxf copysign copysignf expm1 expm1f log1p log1pf cbrt cbrtf
hypot hypotf erfc erfcf lround lrint llround llrint
malloc free calloc realloc abort memcpy memset memmove memcmp strlen strcmp strncpy snprintf printf fprintf
puts omp_get_num_procs omp_get_max_threads omp_set_num_threads omp_get_thread_num omp_get_num_threads`)

func wordSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// sanitize turns a name hint into a valid C identifier with
// escape.CIdent: invalid characters become '_', a leading digit gets a
// "v_" prefix, an empty name becomes "v", and names reserved by C or by
// kiln ("kiln_", "KILN_", keywords, libc names) get a "v_" prefix.
func sanitize(name string) string { return escape.CIdent(name, reservedName) }

// reservedName reports whether s must not be used as a generated name.
func reservedName(s string) bool {
	return escape.CKeyword(s) || libcNames[s] || strings.HasPrefix(s, "kiln_") || strings.HasPrefix(s, "KILN_") ||
		strings.HasPrefix(s, "__") || (len(s) > 1 && s[0] == '_' && s[1] >= 'A' && s[1] <= 'Z')
}

// isCIdent reports whether s is a valid C identifier (extern symbols are
// used verbatim and must be).
func isCIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		ok := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')
		if !ok {
			return false
		}
	}
	return !escape.CKeyword(s)
}

// nameTable hands out unique C names within one function.
type nameTable struct {
	taken map[string]bool
}

func newNameTable(reserved map[string]bool) *nameTable {
	t := &nameTable{taken: map[string]bool{}}
	for k := range reserved {
		t.taken[k] = true
	}
	return t
}

// fresh returns sanitize(hint), or it with the first free suffix _1, _2 ...
func (t *nameTable) fresh(hint string) string {
	base := sanitize(hint)
	name := base
	for k := 1; t.taken[name]; k++ {
		name = base + "_" + strconv.Itoa(k)
	}
	t.taken[name] = true
	return name
}

// cString quotes s as a C string literal (escape.CString).
func cString(s string) string { return escape.CString(s) }

// commentSafe makes s safe inside a /* */ or // comment
// (escape.CComment).
func commentSafe(s string) string { return escape.CComment(s) }

// runtimeNames are the identifiers kiln's generated code and C runtime
// header define; runtimePrefixes start families of generated helpers.
var (
	runtimeNames = wordSet(`kiln_tensor kiln_packed_func kiln_check_arg kiln_check_num_args kiln_device_type
kiln_dtype_code kiln_dtype_name kiln_get_last_error kiln_set_last_error kiln_last_error kiln_oom kiln_lib
kiln_set_num_threads kiln_set_num_threads_here kiln_thread_count kiln_threads kiln_threads_here kiln_bf16_to_f32 kiln_f16_to_f32 kiln_f2i64 kiln_f2u64
kiln_f64_to_bf16 kiln_f64_to_f16 kiln_round_bf16 kiln_round_f16`)
	runtimePrefixes = []string{"kiln_shape_", "kiln_min_", "kiln_max_", "kiln_minc_", "kiln_maxc_", "kiln_floordiv_", "kiln_floormod_", "KILN_"}
)

// exportedSymbol returns s unchanged when it can be the C symbol of a
// function whose global_symbol a pass or target hook fixed (for example a
// partitioned function's kiln_<module>_<compiler>_main_<n>, which the
// graph program calls by that name): a C identifier that is no keyword,
// C library function or name of kiln's runtime. Otherwise it returns
// sanitize(s), as for any other name.
func exportedSymbol(s string) string {
	if s == "" || escape.CKeyword(s) || libcNames[s] || runtimeNames[s] || strings.HasPrefix(s, "__") {
		return sanitize(s)
	}
	for _, p := range runtimePrefixes {
		if strings.HasPrefix(s, p) {
			return sanitize(s)
		}
	}
	for i, r := range s {
		ok := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')
		if !ok {
			return sanitize(s)
		}
	}
	return s
}

// StorageType is the C type of one element of a buffer of dtype d as the
// generated functions take it ("float", "int64_t", "uint16_t" for
// float16, ...), for code that declares buffers for them (the AOT
// executor's harness).
func StorageType(d ir.DType) string { return storageType(d) }

// DTypeCode is the kiln_dtype_code enumerator and the bit width of d, as
// a kiln_tensor describes it; an unsupported dtype is an error.
func DTypeCode(d ir.DType) (code string, bits int, err error) {
	defer func() {
		if p := recover(); p != nil {
			ge, ok := p.(genError)
			if !ok {
				panic(p)
			}
			err = ge.err
		}
	}()
	code, bits = dtypeCode(d)
	return code, bits, nil
}
