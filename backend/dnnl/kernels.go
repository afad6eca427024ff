//go:build cgo && !kiln_nodnnl

package dnnl

/*
#cgo LDFLAGS: -ldl -lgomp
#include <stdlib.h>
#include <omp.h>
#include "kd_dnnl.h"
#include "kd_funcs.h"

#define KD_MAX_ARGS 8

typedef struct {
	dnnl_primitive_t prim;
	int nargs;
	dnnl_exec_arg_t args[KD_MAX_ARGS];
} kd_step;

static void* kd_allocate(void) { return DNNL_MEMORY_ALLOCATE; }

// kd_default_threads is OpenMP's thread count (OMP_NUM_THREADS, or the
// processors available), read by kd_init_threads when the package is
// initialised, before kd_set_threads first changes it.
static int kd_default_threads = 1;

static void kd_init_threads(void) { kd_default_threads = omp_get_max_threads(); }

// kd_set_threads sets the calling thread's OpenMP thread count (n <= 0:
// OpenMP's default, kd_default_threads).
static void kd_set_threads(int n) { omp_set_num_threads(n > 0 ? n : kd_default_threads); }

// kd_run binds the run's buffers, sets the OpenMP thread count on this
// OS thread and executes the steps in order.
static int kd_run(dnnl_stream_t s, int nthreads, int nbind, dnnl_memory_t* mems, void** ptrs, int nsteps, kd_step* steps) {
	for (int i = 0; i < nbind; i++) {
		dnnl_status_t st = dnnl_memory_set_data_handle(mems[i], ptrs[i]);
		if (st != dnnl_success) return (int)st;
	}
	kd_set_threads(nthreads);
	for (int i = 0; i < nsteps; i++) {
		dnnl_status_t st = dnnl_primitive_execute(steps[i].prim, s, steps[i].nargs, steps[i].args);
		if (st != dnnl_success) return (int)st;
	}
	return (int)dnnl_stream_wait(s);
}

// kd_query_md copies a primitive descriptor's memory descriptor (zero
// when the query does not apply).
static dnnl_memory_desc_t kd_query_md(const_dnnl_primitive_desc_t pd, dnnl_query_t what) {
	dnnl_memory_desc_t md = {0};
	const dnnl_memory_desc_t* p = dnnl_primitive_desc_query_md(pd, what, 0);
	if (p) md = *p;
	return md;
}
*/
import "C"

import (
	"fmt"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/runtime"
	"github.com/kiln-dev/kiln/runtime/jsonrt"
)

// Available reports whether the oneDNN kernels can run: this build has
// cgo and was compiled with oneDNN's header (libdnnl-dev), and this
// process could load libdnnl (the major version of that header) when the
// package was initialised. kiln links no -ldnnl: a kiln built or run
// without oneDNN has no dnnl target (Unavailable says why) and everything
// else works.
var Available, unavailable = loadDNNL()

// Unavailable says why Available is false (nil when it is true).
func Unavailable() error { return unavailable }

// loadDNNL opens libdnnl and resolves the functions the kernels call.
func loadDNNL() (bool, error) {
	C.kd_init_threads()
	var msg [512]C.char
	if C.kd_load(&msg[0], C.int(len(msg))) != 0 {
		return false, fmt.Errorf("dnnl: %s", C.GoString(&msg[0]))
	}
	return true, nil
}

var registerLoader = sync.OnceValue(func() error {
	if !Available {
		return unavailable
	}
	return runtime.RegisterLoader(jsonrt.NewLoader(ModuleKind, func() (jsonrt.KernelSet, error) { return newKernelSet() }))
})

// RegisterLoader registers the runtime.Loader of ModuleKind so that
// driver.LoadArtifact can read dnnl modules back. It runs once per
// process (from this package's init); later calls return the first
// result.
func RegisterLoader() error { return registerLoader() }

func init() {
	if !Available {
		return
	}
	if err := RegisterLoader(); err != nil {
		// Only a programming error (another package registering the
		// same module kind) gets here.
		panic(err)
	}
}

// kernelSet is the oneDNN kernel set of one module: its engine and
// stream (created at the first Prepare) and thread count.
type kernelSet struct {
	once    sync.Once
	err     error
	engine  C.dnnl_engine_t
	stream  C.dnnl_stream_t
	threads atomic.Int32
	// shared is what every instance of the module shares (NewInstance):
	// the engine and the reordered weights.
	shared *setShared
}

// setShared is the part of a module's kernel sets its instances share.
// An engine is safe to use from several threads; the memory objects of
// the weights belong to it, and so may serve every instance's primitives.
type setShared struct {
	once    sync.Once
	err     error
	engine  C.dnnl_engine_t
	weights weightCache
	// instances counts the sets made by NewInstance (for tests).
	instances atomic.Int32
}

func newKernelSet() (*kernelSet, error) {
	if !Available {
		return nil, unavailable
	}
	return &kernelSet{shared: &setShared{}}, nil
}

// NewInstance returns the kernel set of another instance of the module
// (jsonrt.SetInstancer): a stream of its own, so that its
// kernels run at the same time as this set's, the same thread count,
// and the same engine and reordered weights.
func (s *kernelSet) NewInstance() (jsonrt.KernelSet, error) {
	n := &kernelSet{shared: s.shared}
	s.shared.instances.Add(1)
	n.threads.Store(s.threads.Load())
	return n, nil
}

// weightCache holds constants reordered into a primitive's layout, keyed
// by the constant's array and the layout, so that the instances of a
// module reorder each weight once and keep one copy of it. Entries live
// as long as the module (like its kernels); each keeps its source array
// alive, so a key's address is never reused.
type weightCache struct {
	mu      sync.Mutex
	entries []weightEntry
	// reorders counts the constants reordered (for tests: instances
	// must not reorder again what the cache holds).
	reorders int
}

type weightEntry struct {
	src *runtime.NDArray
	md  C.dnnl_memory_desc_t
	mem C.dnnl_memory_t
}

// lookup returns the reordered form of src in layout md, or nil.
func (w *weightCache) lookup(src *runtime.NDArray, md *C.dnnl_memory_desc_t) C.dnnl_memory_t {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.find(src, md)
}

// find is lookup with w.mu held.
func (w *weightCache) find(src *runtime.NDArray, md *C.dnnl_memory_desc_t) C.dnnl_memory_t {
	for i := range w.entries {
		if e := &w.entries[i]; e.src == src && mdEqual(&e.md, md) {
			return e.mem
		}
	}
	return nil
}

// add records mem as the reordered form of src in layout md and returns
// the memory to use: an entry another instance added meanwhile wins.
func (w *weightCache) add(src *runtime.NDArray, md *C.dnnl_memory_desc_t, mem C.dnnl_memory_t) C.dnnl_memory_t {
	w.mu.Lock()
	defer w.mu.Unlock()
	if m := w.find(src, md); m != nil {
		return m
	}
	w.entries = append(w.entries, weightEntry{src: src, md: *md, mem: mem})
	w.reorders++
	return mem
}

func (s *kernelSet) init() error {
	s.once.Do(func() {
		sh := s.shared
		sh.once.Do(func() {
			if st := C.dnnl_engine_create(&sh.engine, C.dnnl_cpu, 0); st != C.dnnl_success {
				sh.err = dnnlError("creating the CPU engine", st)
			}
		})
		if s.err = sh.err; s.err != nil {
			return
		}
		s.engine = sh.engine
		if st := C.dnnl_stream_create(&s.stream, s.engine, C.dnnl_stream_default_flags); st != C.dnnl_success {
			s.err = dnnlError("creating a stream", st)
		}
	})
	return s.err
}

// SetNumThreads sets the OpenMP thread count kernels are built and run
// with (n <= 0: every processor) and reports whether it changed: oneDNN
// splits a primitive's work for the thread count at its creation, so the
// module then builds its kernels again.
func (s *kernelSet) SetNumThreads(n int) bool {
	v := int32(max(0, min(n, 1<<20)))
	return s.threads.Swap(v) != v
}

func dnnlError(what string, st C.dnnl_status_t) error {
	return fmt.Errorf("oneDNN: %s: status %d", what, int(st))
}

// nodeTypes returns a kernel node's operand and result types.
func nodeTypes(g *jsonrt.Graph, id int) ([]*ir.TensorType, *ir.TensorType, error) {
	n := &g.Nodes[id]
	if len(n.Shape) != 1 {
		return nil, nil, fmt.Errorf("has %d outputs, want 1", len(n.Shape))
	}
	var ins []*ir.TensorType
	for _, e := range n.Inputs {
		dt, s := g.Type(e)
		ins = append(ins, ir.NewTensorType(dt, s))
	}
	dt, s := g.Type(jsonrt.Entry{Node: id})
	return ins, ir.NewTensorType(dt, s), nil
}

// Check validates a kernel node with the rules of Supported.
func (s *kernelSet) Check(g *jsonrt.Graph, id int) error {
	ins, out, err := nodeTypes(g, id)
	if err != nil {
		return err
	}
	return checkOp(g.Nodes[id].Name, g.Nodes[id].AttrMap(), ins, out)
}

// mdLayout is the jsonrt.Layout of a value oneDNN keeps in a format of
// its choice.
type mdLayout struct{ md C.dnnl_memory_desc_t }

// plainMD describes a dense row-major float32 tensor (rank 0 as [1]).
func plainMD(shape []int64) (C.dnnl_memory_desc_t, error) {
	if len(shape) == 0 {
		shape = []int64{1}
	}
	var dims, strides C.dnnl_dims_t
	st := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		dims[i], strides[i] = C.dnnl_dim_t(shape[i]), C.dnnl_dim_t(st)
		st *= max(shape[i], 1)
	}
	return stridedMD(len(shape), dims, strides)
}

func stridedMD(nd int, dims, strides C.dnnl_dims_t) (C.dnnl_memory_desc_t, error) {
	var md C.dnnl_memory_desc_t
	if st := C.dnnl_memory_desc_init_by_strides(&md, C.int(nd), &dims[0], C.dnnl_f32, &strides[0]); st != C.dnnl_success {
		return md, dnnlError("memory descriptor", st)
	}
	return md, nil
}

// anyMD lets the primitive choose the format.
func anyMD(shape []int64) (C.dnnl_memory_desc_t, error) {
	var md C.dnnl_memory_desc_t
	var dims C.dnnl_dims_t
	for i, d := range shape {
		dims[i] = C.dnnl_dim_t(d)
	}
	if st := C.dnnl_memory_desc_init_by_tag(&md, C.int(len(shape)), &dims[0], C.dnnl_f32, C.dnnl_format_tag_any); st != C.dnnl_success {
		return md, dnnlError("memory descriptor", st)
	}
	return md, nil
}

// activationMD describes a convolution's NCHW source or destination in
// layout: the format oneDNN picks (LayoutAny), or channel blocks of the
// ISA's vector width, nChw16c with AVX-512 and nChw8c otherwise, when
// the channels divide into them (LayoutBlocked; else oneDNN picks).
func activationMD(shape []int64, layout string) (C.dnnl_memory_desc_t, error) {
	block, tag := int64(8), C.dnnl_format_tag_t(C.dnnl_nChw8c)
	if effectiveISA() == "avx512" {
		block, tag = 16, C.dnnl_nChw16c
	}
	if layout != LayoutBlocked || len(shape) != 4 || shape[1]%block != 0 {
		return anyMD(shape)
	}
	var md C.dnnl_memory_desc_t
	d := dims(shape)
	if st := C.dnnl_memory_desc_init_by_tag(&md, 4, &d[0], C.dnnl_f32, tag); st != C.dnnl_success {
		return md, dnnlError("memory descriptor", st)
	}
	return md, nil
}

func mdEqual(a, b *C.dnnl_memory_desc_t) bool { return C.dnnl_memory_desc_equal(a, b) != 0 }

// kernel is a sequence of oneDNN primitives (reorders and the operator)
// run on the module's stream; binds say which memory objects take which
// argument's buffer at each run.
type kernel struct {
	set    *kernelSet
	nsteps int
	steps  *C.kd_step
	nbind  int
	mems   *C.dnnl_memory_t
	ptrs   *unsafe.Pointer
	args   []int // argument index of each binding
	// owned objects, destroyed by Release (the module's reordered
	// weights belong to its weightCache instead)
	prims []C.dnnl_primitive_t
	owned []C.dnnl_memory_t
}

// livePrimitives counts the primitives created and not yet destroyed in
// this process (for tests: closing an executor's forks frees theirs).
var livePrimitives atomic.Int64

// Release destroys the kernel's primitives and memory objects and frees
// its C arrays (jsonrt.Releaser); the kernel is not run again.
func (k *kernel) Release() {
	for _, p := range k.prims {
		C.dnnl_primitive_destroy(p)
		livePrimitives.Add(-1)
	}
	for _, m := range k.owned {
		C.dnnl_memory_destroy(m)
	}
	k.prims, k.owned = nil, nil
	C.free(unsafe.Pointer(k.steps))
	C.free(unsafe.Pointer(k.mems))
	C.free(unsafe.Pointer(k.ptrs))
	k.steps, k.mems, k.ptrs, k.nsteps, k.nbind = nil, nil, nil, 0, 0
}

// Close destroys the set's stream (jsonrt.SetCloser): its module is done.
func (s *kernelSet) Close() {
	if s.stream != nil {
		C.dnnl_stream_destroy(s.stream)
		s.stream = nil
	}
}

// Run binds the buffers and executes the steps.
func (k *kernel) Run(args []*runtime.NDArray) error {
	ptrs := unsafe.Slice(k.ptrs, k.nbind)
	for i, a := range k.args {
		p, err := args[a].DataPtr()
		if err != nil {
			return err
		}
		ptrs[i] = p
	}
	st := C.kd_run(k.set.stream, C.int(k.set.threads.Load()), C.int(k.nbind), k.mems, k.ptrs, C.int(k.nsteps), k.steps)
	goruntime.KeepAlive(args)
	if st != 0 {
		return dnnlError("executing", C.dnnl_status_t(st))
	}
	return nil
}

// builder assembles a kernel during Prepare.
type builder struct {
	s     *kernelSet
	ctx   *jsonrt.PrepareContext
	k     *kernel
	steps []C.kd_step
	post  []C.kd_step // run after the operator (output reorders)
	binds []C.dnnl_memory_t
	err   error
}

func (b *builder) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// memory makes a memory object; handle nil means bound per run.
func (b *builder) memory(md *C.dnnl_memory_desc_t, handle unsafe.Pointer) C.dnnl_memory_t {
	var m C.dnnl_memory_t
	if st := C.dnnl_memory_create(&m, md, b.s.engine, handle); st != C.dnnl_success {
		b.fail(dnnlError("creating memory", st))
		return nil
	}
	b.k.owned = append(b.k.owned, m)
	return m
}

// scratch makes a memory object with library-allocated storage.
func (b *builder) scratch(md *C.dnnl_memory_desc_t) C.dnnl_memory_t {
	return b.memory(md, C.kd_allocate())
}

// bound makes a memory object over argument arg's buffer in layout md.
func (b *builder) bound(arg int, md *C.dnnl_memory_desc_t) C.dnnl_memory_t {
	m := b.memory(md, nil)
	b.k.args = append(b.k.args, arg)
	b.binds = append(b.binds, m)
	return m
}

func (b *builder) primitive(pd C.dnnl_primitive_desc_t) C.dnnl_primitive_t {
	var p C.dnnl_primitive_t
	if st := C.dnnl_primitive_create(&p, pd); st != C.dnnl_success {
		b.fail(dnnlError("creating a primitive", st))
		return nil
	}
	implsCreated.add(b.ctx.Node.Name, implName(pd))
	livePrimitives.Add(1)
	b.k.prims = append(b.k.prims, p)
	return p
}

func step(p C.dnnl_primitive_t, args map[C.int]C.dnnl_memory_t) C.kd_step {
	var s C.kd_step
	s.prim = p
	for a, m := range args {
		s.args[s.nargs] = C.dnnl_exec_arg_t{arg: a, memory: m}
		s.nargs++
	}
	return s
}

// reorder returns a reorder primitive from src to dst layout.
func (b *builder) reorder(src, dst *C.dnnl_memory_desc_t) C.dnnl_primitive_t {
	var pd C.dnnl_primitive_desc_t
	if st := C.dnnl_reorder_primitive_desc_create(&pd, src, b.s.engine, dst, b.s.engine, nil); st != C.dnnl_success {
		b.fail(dnnlError("creating a reorder", st))
		return nil
	}
	defer C.dnnl_primitive_desc_destroy(pd)
	return b.primitive(pd)
}

// inputLayout returns the layout input i arrives in.
func (b *builder) inputLayout(i int) C.dnnl_memory_desc_t {
	if l, ok := b.ctx.InputLayout(i).(*mdLayout); ok {
		return l.md
	}
	_, shape := b.ctx.InputType(i)
	md, err := plainMD(shape)
	b.fail(err)
	return md
}

// input returns a memory object holding input i in layout want,
// reordering at each run when it arrives in another layout.
func (b *builder) input(i int, want *C.dnnl_memory_desc_t) C.dnnl_memory_t {
	have := b.inputLayout(i)
	if mdEqual(&have, want) {
		return b.bound(i, want)
	}
	src := b.bound(i, &have)
	dst := b.scratch(want)
	b.steps = append(b.steps, step(b.reorder(&have, want), map[C.int]C.dnnl_memory_t{C.DNNL_ARG_FROM: src, C.DNNL_ARG_TO: dst}))
	return dst
}

// plainInput returns input i as plain data described as md (a plain
// description of the same elements, e.g. flattened), reordering when
// it arrives in a blocked layout.
func (b *builder) plainInput(i int, md *C.dnnl_memory_desc_t) C.dnnl_memory_t {
	if _, blocked := b.ctx.InputLayout(i).(*mdLayout); !blocked {
		return b.bound(i, md)
	}
	_, shape := b.ctx.InputType(i)
	plain, err := plainMD(shape)
	b.fail(err)
	tmp := b.input(i, &plain)
	var h unsafe.Pointer
	if st := C.dnnl_memory_get_data_handle(tmp, &h); st != C.dnnl_success {
		b.fail(dnnlError("memory handle", st))
	}
	return b.memory(md, h)
}

// constInput returns constant input i, whose plain data plain
// describes, reordered once, now, into layout want.
func (b *builder) constInput(i int, plain, want *C.dnnl_memory_desc_t) C.dnnl_memory_t {
	c := b.ctx.Const(i)
	if m := b.s.shared.weights.lookup(c, want); m != nil {
		return m
	}
	ptr, err := c.DataPtr()
	if err != nil {
		b.fail(err)
		return nil
	}
	src := b.memory(plain, ptr)
	dst := b.scratch(want)
	p := b.reorder(plain, want)
	if b.err != nil {
		return nil
	}
	args := [2]C.dnnl_exec_arg_t{{arg: C.DNNL_ARG_FROM, memory: src}, {arg: C.DNNL_ARG_TO, memory: dst}}
	cargs := (*C.dnnl_exec_arg_t)(C.malloc(C.size_t(unsafe.Sizeof(args))))
	defer C.free(unsafe.Pointer(cargs))
	copy(unsafe.Slice(cargs, 2), args[:])
	if st := C.dnnl_primitive_execute(p, b.s.stream, 2, cargs); st != C.dnnl_success {
		b.fail(dnnlError("reordering a constant", st))
	} else if st := C.dnnl_stream_wait(b.s.stream); st != C.dnnl_success {
		b.fail(dnnlError("reordering a constant", st))
	}
	goruntime.KeepAlive(c)
	// The reorder and the view of the plain data served once.
	b.destroy(p, src)
	if b.err != nil {
		return nil
	}
	kept := b.s.shared.weights.add(c, want, dst)
	if kept == dst {
		// The cache owns it now: it outlives this kernel.
		b.k.owned = slices.DeleteFunc(b.k.owned, func(m C.dnnl_memory_t) bool { return m == dst })
	}
	return kept
}

// destroy destroys a primitive and a memory object of the kernel being
// built that it no longer needs.
func (b *builder) destroy(p C.dnnl_primitive_t, m C.dnnl_memory_t) {
	b.k.prims = slices.DeleteFunc(b.k.prims, func(x C.dnnl_primitive_t) bool { return x == p })
	C.dnnl_primitive_destroy(p)
	livePrimitives.Add(-1)
	b.k.owned = slices.DeleteFunc(b.k.owned, func(x C.dnnl_memory_t) bool { return x == m })
	C.dnnl_memory_destroy(m)
}

// output returns the memory the operator writes output 0 to in layout
// have; a graph output in a blocked layout goes through a scratch buffer
// and a reorder to plain.
func (b *builder) output(have *C.dnnl_memory_desc_t) C.dnnl_memory_t {
	_, shape := b.ctx.OutputType(0)
	plain, err := plainMD(shape)
	if err != nil {
		b.fail(err)
		return nil
	}
	if mdEqual(have, &plain) {
		return b.bound(len(b.ctx.Node.Inputs), have)
	}
	if !b.ctx.MustBePlain(0) {
		b.ctx.SetOutputLayout(0, &mdLayout{md: *have}, int64(C.dnnl_memory_desc_get_size(have)))
		return b.bound(len(b.ctx.Node.Inputs), have)
	}
	tmp := b.scratch(have)
	dst := b.bound(len(b.ctx.Node.Inputs), &plain)
	b.post = append(b.post, step(b.reorder(have, &plain), map[C.int]C.dnnl_memory_t{C.DNNL_ARG_FROM: tmp, C.DNNL_ARG_TO: dst}))
	return tmp
}

// finish moves the steps and bindings to C memory.
func (b *builder) finish(main C.kd_step) (*kernel, error) {
	if b.err != nil {
		return nil, b.err
	}
	k := b.k
	all := append(append(b.steps, main), b.post...)
	k.nsteps, k.nbind = len(all), len(b.binds)
	k.steps = (*C.kd_step)(C.calloc(C.size_t(len(all)), C.size_t(unsafe.Sizeof(C.kd_step{}))))
	copy(unsafe.Slice(k.steps, len(all)), all)
	k.mems = (*C.dnnl_memory_t)(C.calloc(C.size_t(max(1, len(b.binds))), C.size_t(unsafe.Sizeof(C.dnnl_memory_t(nil)))))
	copy(unsafe.Slice(k.mems, len(b.binds)), b.binds)
	k.ptrs = (*unsafe.Pointer)(C.calloc(C.size_t(max(1, len(b.binds))), C.size_t(unsafe.Sizeof(unsafe.Pointer(nil)))))
	return k, nil
}

// createPD makes a primitive descriptor for an operation descriptor.
func (b *builder) createPD(desc unsafe.Pointer, attr C.dnnl_primitive_attr_t) (C.dnnl_primitive_desc_t, error) {
	var pd C.dnnl_primitive_desc_t
	if st := C.dnnl_primitive_desc_create(&pd, C.const_dnnl_op_desc_t(desc), C.const_dnnl_primitive_attr_t(attr), b.s.engine, nil); st != C.dnnl_success {
		return nil, dnnlError("this operator configuration is not supported by the primitive", st)
	}
	return pd, nil
}

// implLog counts the primitives this process created by operator and
// oneDNN implementation ("nn.conv2d jit:avx2"), for tests that check no
// model takes a reference kernel.
type implLog struct {
	mu sync.Mutex
	n  map[string]int
}

var implsCreated implLog

func (l *implLog) add(node, impl string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == nil {
		l.n = map[string]int{}
	}
	l.n[node+" "+impl]++
}

// snapshot returns a copy of the counts.
func (l *implLog) snapshot() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := make(map[string]int, len(l.n))
	for k, v := range l.n {
		m[k] = v
	}
	return m
}

// effectiveISA is the instruction set oneDNN's JIT kernels use in this
// process (after ONEDNN_MAX_CPU_ISA).
func effectiveISA() string {
	if !Available {
		return "none"
	}
	switch isa := C.dnnl_get_effective_cpu_isa(); {
	case isa == C.dnnl_cpu_isa_avx2:
		return "avx2"
	case isa&C.dnnl_cpu_isa_avx512_core == C.dnnl_cpu_isa_avx512_core:
		return "avx512"
	default:
		return fmt.Sprintf("isa %#x", int(isa))
	}
}

// isReference reports whether oneDNN chose its reference (naive C++)
// implementation for pd: correct, but often 10-100x slower than a JIT
// kernel of the same operation in another layout.
func isReference(pd C.dnnl_primitive_desc_t) bool {
	return strings.HasPrefix(implName(pd), "ref")
}

// implName is the name of the implementation oneDNN chose for pd (as in
// ONEDNN_VERBOSE: "jit:uni", "ref:any", ...).
func implName(pd C.dnnl_primitive_desc_t) string {
	var s *C.char
	if st := C.dnnl_primitive_desc_query(C.const_dnnl_primitive_desc_t(pd), C.dnnl_query_impl_info_str, 0, unsafe.Pointer(&s)); st != C.dnnl_success || s == nil {
		return ""
	}
	return C.GoString(s)
}

// constScalar returns the value of input i when it is a float32
// constant with one element.
func (b *builder) constScalar(i int) (float64, bool) {
	c := b.ctx.Const(i)
	if c == nil || c.DType() != ir.Float32 || c.Shape().NumElements() != 1 {
		return 0, false
	}
	ptr, err := c.DataPtr()
	if err != nil {
		return 0, false
	}
	v := float64(*(*float32)(ptr))
	goruntime.KeepAlive(c)
	return v, true
}

func queryMD(pd C.dnnl_primitive_desc_t, what C.dnnl_query_t) C.dnnl_memory_desc_t {
	return C.kd_query_md(C.const_dnnl_primitive_desc_t(pd), what)
}

// activation is the eltwise post-op of an anchor: none, relu, clip to
// [lo, hi], or hard-swish.
type activation struct {
	kind   Activation
	lo, hi float64 // clip bounds
	a, b   float64 // hard-sigmoid's alpha and beta
}

// activationOf reads a composite's activation (clip bounds from the
// kernel attributes clip_min and clip_max, hard-sigmoid's from hs_alpha
// and hs_beta).
func activationOf(spec *CompositeSpec, attrs ir.Attrs) (activation, error) {
	a := activation{kind: spec.Act}
	var err error
	read := func(dst *float64, name string) {
		if err == nil {
			*dst, err = attrFloat(attrs, name)
		}
	}
	switch spec.Act {
	case ActClip:
		read(&a.lo, "clip_min")
		read(&a.hi, "clip_max")
	case ActHardSigmoid:
		read(&a.a, "hs_alpha")
		read(&a.b, "hs_beta")
	}
	return a, err
}

// postOps builds the attribute with a sum (when sum) and the activation.
func postOps(sum bool, act activation) (C.dnnl_primitive_attr_t, error) {
	var attr C.dnnl_primitive_attr_t
	if st := C.dnnl_primitive_attr_create(&attr); st != C.dnnl_success {
		return nil, dnnlError("attributes", st)
	}
	if !sum && act.kind == ActNone {
		return attr, nil
	}
	var po C.dnnl_post_ops_t
	if st := C.dnnl_post_ops_create(&po); st != C.dnnl_success {
		C.dnnl_primitive_attr_destroy(attr)
		return nil, dnnlError("post-ops", st)
	}
	defer C.dnnl_post_ops_destroy(po)
	if sum {
		C.dnnl_post_ops_append_sum(po, 1)
	}
	eltwise := func(alg C.dnnl_alg_kind_t, alpha, beta float64) {
		C.dnnl_post_ops_append_eltwise(po, 1, alg, C.float(alpha), C.float(beta))
	}
	switch act.kind {
	case ActRelu:
		eltwise(C.dnnl_eltwise_relu, 0, 0)
	case ActClip:
		eltwise(C.dnnl_eltwise_clip, act.lo, act.hi)
	case ActHardSwish:
		eltwise(C.dnnl_eltwise_hardswish, 0, 0)
	case ActHardSigmoid:
		eltwise(C.dnnl_eltwise_linear, act.a, act.b)
		eltwise(C.dnnl_eltwise_clip, 0, 1)
	case ActSigmoid:
		eltwise(C.dnnl_eltwise_logistic, 0, 0)
	case ActSiLU:
		eltwise(C.dnnl_eltwise_swish, 1, 0)
	}
	if st := C.dnnl_primitive_attr_set_post_ops(attr, po); st != C.dnnl_success {
		C.dnnl_primitive_attr_destroy(attr)
		return nil, dnnlError("post-ops", st)
	}
	return attr, nil
}

func dims(v []int64) C.dnnl_dims_t {
	var d C.dnnl_dims_t
	for i, x := range v {
		d[i] = C.dnnl_dim_t(x)
	}
	return d
}

// Prepare builds the oneDNN primitives of one kernel node.
func (s *kernelSet) Prepare(ctx *jsonrt.PrepareContext) (jsonrt.Kernel, error) {
	if err := s.init(); err != nil {
		return nil, err
	}
	// Primitives take the calling thread's OpenMP thread count at
	// creation: give them the count they will run with.
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	C.kd_set_threads(C.int(s.threads.Load()))
	ins, out, err := nodeTypes(ctx.Graph, ctx.ID)
	if err != nil {
		return nil, err
	}
	name := ctx.Node.Name
	attrs := ctx.Attrs()
	if err := checkOp(name, attrs, ins, out); err != nil {
		return nil, err
	}
	b := &builder{s: s, ctx: ctx, k: &kernel{set: s}}
	var main C.kd_step
	if spec, ok := compositeSpec(name); ok {
		var act activation
		if act, err = activationOf(spec, attrs); err == nil {
			main, err = b.anchor(spec.Anchor, attrs, ins, out, spec.Bias, spec.Add, act)
		}
	} else {
		o, _ := operator(name)
		switch o {
		case op.Conv2D, op.Dense:
			main, err = b.anchor(o, attrs, ins, out, false, false, activation{})
		case op.MatMul:
			main, err = b.matmul(attrs, ins, out)
		case op.MaxPool2D, op.AvgPool2D, op.GlobalAvgPool2D:
			main, err = b.pool(o, attrs, ins, out)
		case op.Relu:
			main, err = b.eltwise(C.dnnl_eltwise_relu, 0, 0)
		case op.Clip:
			lo, _ := attrFloat(attrs, "a_min")
			hi, _ := attrFloat(attrs, "a_max")
			main, err = b.eltwise(C.dnnl_eltwise_clip, lo, hi)
		case op.Add, op.Subtract, op.Multiply, op.BiasAdd:
			main, err = b.binary(o, attrs, ins, out)
		case op.BatchNorm:
			main, err = b.batchNorm(attrs)
		case op.Concatenate:
			main, err = b.concat(attrs, ins, out)
		default:
			err = fmt.Errorf("operator %s has no kernel", name)
		}
	}
	if err != nil {
		b.k.Release()
		return nil, err
	}
	k, err := b.finish(main)
	if err != nil {
		b.k.Release()
	}
	return k, err
}

// anchor builds a convolution or inner product with its bias and
// post-ops. Operands: data, weight, bias?, residual?.
func (b *builder) anchor(o *op.Op, attrs ir.Attrs, ins []*ir.TensorType, out *ir.TensorType, bias, sum bool, act activation) (C.kd_step, error) {
	var main C.kd_step
	attr, err := postOps(sum, act)
	if err != nil {
		return main, err
	}
	defer C.dnnl_primitive_attr_destroy(attr)
	var pd C.dnnl_primitive_desc_t
	var srcMD, wMD, wPlain, dstMD, biasMD C.dnnl_memory_desc_t
	constW := b.ctx.Const(1) != nil
	if o == op.Conv2D {
		cv, err := convParams(attrs, ins[0].Shape, ins[1].Shape, out.Shape)
		if err != nil {
			return main, err
		}
		layout, err := layoutAttr(attrs)
		if err != nil {
			return main, err
		}
		if srcMD, err = activationMD(cv.src, layout); err != nil {
			return main, err
		}
		if wPlain, err = plainMD(cv.weight); err != nil {
			return main, err
		}
		wMD = wPlain
		if constW {
			wMD, err = anyMD(cv.weight)
		}
		if err != nil {
			return main, err
		}
		if dstMD, err = activationMD(cv.dst, layout); err != nil {
			return main, err
		}
		var biasP *C.dnnl_memory_desc_t
		if bias {
			if biasMD, err = plainMD(cv.biasDim); err != nil {
				return main, err
			}
			biasP = &biasMD
		}
		strides := dims(cv.strides[:])
		dil := dims([]int64{cv.dilation[0] - 1, cv.dilation[1] - 1})
		pl, pr := dims(cv.padL[:]), dims(cv.padR[:])
		var d C.dnnl_convolution_desc_t
		if st := C.dnnl_dilated_convolution_forward_desc_init(&d, C.dnnl_forward_inference, C.dnnl_convolution_direct,
			&srcMD, &wMD, biasP, &dstMD, &strides[0], &dil[0], &pl[0], &pr[0]); st != C.dnnl_success {
			return main, dnnlError("convolution descriptor", st)
		}
		if pd, err = b.createPD(unsafe.Pointer(&d), attr); err != nil {
			return main, err
		}
	} else {
		// Inner product over x flattened to [M, K].
		xs := ins[0].Shape
		k := xs[len(xs)-1]
		m := xs[:len(xs)-1].NumElements()
		n := ins[1].Shape[0]
		if srcMD, err = plainMD([]int64{m, k}); err != nil {
			return main, err
		}
		if wPlain, err = plainMD([]int64{n, k}); err != nil {
			return main, err
		}
		wMD = wPlain
		if constW {
			wMD, err = anyMD([]int64{n, k})
		}
		if err != nil {
			return main, err
		}
		if dstMD, err = plainMD([]int64{m, n}); err != nil {
			return main, err
		}
		var biasP *C.dnnl_memory_desc_t
		if bias {
			if biasMD, err = plainMD([]int64{n}); err != nil {
				return main, err
			}
			biasP = &biasMD
		}
		var d C.dnnl_inner_product_desc_t
		if st := C.dnnl_inner_product_forward_desc_init(&d, C.dnnl_forward_inference, &srcMD, &wMD, biasP, &dstMD); st != C.dnnl_success {
			return main, dnnlError("inner product descriptor", st)
		}
		if pd, err = b.createPD(unsafe.Pointer(&d), attr); err != nil {
			return main, err
		}
	}
	defer C.dnnl_primitive_desc_destroy(pd)
	srcMD = queryMD(pd, C.dnnl_query_src_md)
	wMD = queryMD(pd, C.dnnl_query_weights_md)
	dstMD = queryMD(pd, C.dnnl_query_dst_md)
	args := map[C.int]C.dnnl_memory_t{}
	if o == op.Conv2D {
		args[C.DNNL_ARG_SRC] = b.input(0, &srcMD)
	} else {
		args[C.DNNL_ARG_SRC] = b.plainInput(0, &srcMD)
	}
	if constW {
		args[C.DNNL_ARG_WEIGHTS] = b.constInput(1, &wPlain, &wMD)
	} else {
		args[C.DNNL_ARG_WEIGHTS] = b.plainInput(1, &wMD)
	}
	next := 2
	if bias {
		args[C.DNNL_ARG_BIAS] = b.plainInput(next, &biasMD)
		next++
	}
	var dst C.dnnl_memory_t
	if o == op.Conv2D {
		dst = b.output(&dstMD)
	} else {
		// The [M, N] result is the output's plain data.
		dst = b.bound(len(b.ctx.Node.Inputs), &dstMD)
	}
	if sum {
		// The sum post-op adds to what dst holds: put the residual there.
		var resMD C.dnnl_memory_desc_t
		if o == op.Conv2D {
			resMD = b.inputLayout(next)
			res := b.bound(next, &resMD)
			b.steps = append(b.steps, step(b.reorder(&resMD, &dstMD), map[C.int]C.dnnl_memory_t{C.DNNL_ARG_FROM: res, C.DNNL_ARG_TO: dst}))
		} else {
			res := b.plainInput(next, &dstMD)
			b.steps = append(b.steps, step(b.reorder(&dstMD, &dstMD), map[C.int]C.dnnl_memory_t{C.DNNL_ARG_FROM: res, C.DNNL_ARG_TO: dst}))
		}
	}
	args[C.DNNL_ARG_DST] = dst
	return step(b.primitive(pd), args), b.err
}

// matmul builds nn.matmul (batched, transposes as strides). A batch of
// untransposed operands times one shared weight (weight batch dimensions
// all 1, as in a transformer's projections on [seq, batch, hidden]) is
// computed as one [batch*M, K] x [K, N] product: the same memory, but one
// large GEMM instead of a batch of small ones. A constant weight is
// reordered once, at build time, into the layout oneDNN prefers.
func (b *builder) matmul(attrs ir.Attrs, ins []*ir.TensorType, out *ir.TensorType) (C.kd_step, error) {
	var main C.kd_step
	tr, err := attrBools(attrs, "transpose_a", "transpose_b")
	if err != nil {
		return main, err
	}
	r := len(out.Shape)
	sa, sw, so := padShape(ins[0].Shape, r), padShape(ins[1].Shape, r), out.Shape
	if r > 2 && !tr[0] && allOnes(sw[:r-2]) {
		m := int64(1)
		for _, d := range so[:r-1] {
			m *= d
		}
		sa, sw, so = []int64{m, sa[r-1]}, sw[r-2:], []int64{m, so[r-1]}
		r = 2
	}
	operand := func(s []int64, t bool) (C.dnnl_memory_desc_t, error) {
		// Memory is row-major over s; the logical view swaps the last two
		// dimensions when transposed.
		var d, st C.dnnl_dims_t
		stride := int64(1)
		strides := make([]int64, r)
		for k := r - 1; k >= 0; k-- {
			strides[k] = stride
			stride *= max(s[k], 1)
		}
		for k := range r {
			d[k], st[k] = C.dnnl_dim_t(s[k]), C.dnnl_dim_t(strides[k])
		}
		if t {
			d[r-1], d[r-2] = d[r-2], d[r-1]
			st[r-1], st[r-2] = st[r-2], st[r-1]
		}
		return stridedMD(r, d, st)
	}
	aMD, err := operand(sa, tr[0])
	if err != nil {
		return main, err
	}
	wPlain, err := operand(sw, tr[1])
	if err != nil {
		return main, err
	}
	constW := b.ctx.Const(1) != nil
	wMD := wPlain
	if constW {
		logical := append([]int64(nil), sw...)
		if tr[1] {
			logical[r-1], logical[r-2] = logical[r-2], logical[r-1]
		}
		if wMD, err = anyMD(logical); err != nil {
			return main, err
		}
	}
	dstMD, err := plainMD(so)
	if err != nil {
		return main, err
	}
	var d C.dnnl_matmul_desc_t
	if st := C.dnnl_matmul_desc_init(&d, &aMD, &wMD, nil, &dstMD); st != C.dnnl_success {
		return main, dnnlError("matmul descriptor", st)
	}
	pd, err := b.createPD(unsafe.Pointer(&d), nil)
	if err != nil {
		return main, err
	}
	defer C.dnnl_primitive_desc_destroy(pd)
	args := map[C.int]C.dnnl_memory_t{
		C.DNNL_ARG_SRC: b.plainInput(0, &aMD),
		C.DNNL_ARG_DST: b.bound(len(b.ctx.Node.Inputs), &dstMD),
	}
	if constW {
		wMD = queryMD(pd, C.dnnl_query_weights_md)
		args[C.DNNL_ARG_WEIGHTS] = b.constInput(1, &wPlain, &wMD)
	} else {
		args[C.DNNL_ARG_WEIGHTS] = b.plainInput(1, &wMD)
	}
	return step(b.primitive(pd), args), b.err
}

// allOnes reports whether every element of s is 1 (true for none).
func allOnes(s []int64) bool {
	for _, d := range s {
		if d != 1 {
			return false
		}
	}
	return true
}

// pool builds max, average and global average pooling over the input's
// layout.
func (b *builder) pool(o *op.Op, attrs ir.Attrs, ins []*ir.TensorType, out *ir.TensorType) (C.kd_step, error) {
	var main C.kd_step
	var p *pool
	if o == op.GlobalAvgPool2D {
		x := ins[0].Shape
		p = &pool{kernel: [2]int64{x[2], x[3]}, strides: [2]int64{1, 1}, dil: [2]int64{1, 1}, src: x, dst: out.Shape}
	} else {
		var err error
		if p, err = poolParams(o, attrs, ins[0].Shape, out.Shape); err != nil {
			return main, err
		}
	}
	alg := C.dnnl_pooling_avg_exclude_padding
	switch {
	case p.max:
		alg = C.dnnl_pooling_max
	case p.includePad:
		alg = C.dnnl_pooling_avg_include_padding
	}
	srcMD := b.inputLayout(0)
	dstMD, err := anyMD(p.dst)
	if err != nil {
		return main, err
	}
	strides, kern := dims(p.strides[:]), dims(p.kernel[:])
	dil := dims([]int64{p.dil[0] - 1, p.dil[1] - 1})
	pl, pr := dims(p.padL[:]), dims(p.padR[:])
	var d C.dnnl_pooling_v2_desc_t
	if st := C.dnnl_pooling_v2_forward_desc_init(&d, C.dnnl_forward_inference, C.dnnl_alg_kind_t(alg), &srcMD, &dstMD,
		&strides[0], &kern[0], &dil[0], &pl[0], &pr[0]); st != C.dnnl_success {
		return main, dnnlError("pooling descriptor", st)
	}
	pd, err := b.createPD(unsafe.Pointer(&d), nil)
	if err != nil {
		return main, err
	}
	defer C.dnnl_primitive_desc_destroy(pd)
	srcMD = queryMD(pd, C.dnnl_query_src_md)
	dstMD = queryMD(pd, C.dnnl_query_dst_md)
	args := map[C.int]C.dnnl_memory_t{C.DNNL_ARG_SRC: b.input(0, &srcMD)}
	if ws := queryMD(pd, C.dnnl_query_workspace_md); C.dnnl_memory_desc_get_size(&ws) > 0 {
		args[C.DNNL_ARG_WORKSPACE] = b.scratch(&ws)
	}
	args[C.DNNL_ARG_DST] = b.output(&dstMD)
	return step(b.primitive(pd), args), b.err
}

// concat builds concatenate along its axis, reading each input in the
// layout it arrives in (oneDNN then chooses the output's layout, blocked
// when the inputs are, so that convolutions before and after keep
// theirs); when oneDNN has no implementation for those layouts, every
// input is reordered to plain first.
func (b *builder) concat(attrs ir.Attrs, ins []*ir.TensorType, out *ir.TensorType) (C.kd_step, error) {
	var main C.kd_step
	ax, err := concatAxis(attrs, len(out.Shape))
	if err != nil {
		return main, err
	}
	srcs := make([]C.dnnl_memory_desc_t, len(ins))
	for i := range ins {
		srcs[i] = b.inputLayout(i)
	}
	var pd C.dnnl_primitive_desc_t
	if st := C.dnnl_concat_primitive_desc_create(&pd, nil, C.int(len(ins)), C.int(ax), &srcs[0], nil, b.s.engine); st != C.dnnl_success {
		for i := range ins {
			if srcs[i], err = plainMD(ins[i].Shape); err != nil {
				return main, err
			}
		}
		if st := C.dnnl_concat_primitive_desc_create(&pd, nil, C.int(len(ins)), C.int(ax), &srcs[0], nil, b.s.engine); st != C.dnnl_success {
			return main, dnnlError("concat primitive", st)
		}
	}
	defer C.dnnl_primitive_desc_destroy(pd)
	dstMD := queryMD(pd, C.dnnl_query_dst_md)
	if !strings.HasPrefix(implName(pd), "jit") {
		// oneDNN 2.6's generic concat copies blocked layouts a block at a
		// time (squeezenet's 2x64x55x55 in aBcd8b: 0.75 ms, 2 GB/s);
		// reorders of each input into its part of the output run at
		// memory speed.
		if main, ok := b.concatByReorders(ax, ins, srcs, &dstMD); ok {
			return main, b.err
		}
	}
	args := map[C.int]C.dnnl_memory_t{}
	for i := range ins {
		args[C.DNNL_ARG_MULTIPLE_SRC+C.int(i)] = b.input(i, &srcs[i])
	}
	args[C.DNNL_ARG_DST] = b.output(&dstMD)
	return step(b.primitive(pd), args), b.err
}

// concatByReorders builds concatenation as one reorder per input into
// its part of the output (a sub-memory of dstMD at its offset on axis
// ax); it reports false, having built nothing, when a part cannot be
// described (an offset inside a block) or would take a reference
// reorder.
func (b *builder) concatByReorders(ax int, ins []*ir.TensorType, srcs []C.dnnl_memory_desc_t, dstMD *C.dnnl_memory_desc_t) (C.kd_step, bool) {
	var main C.kd_step
	subs := make([]C.dnnl_memory_desc_t, len(ins))
	pds := make([]C.dnnl_primitive_desc_t, 0, len(ins))
	defer func() {
		for _, pd := range pds {
			C.dnnl_primitive_desc_destroy(pd)
		}
	}()
	var off int64
	for i, t := range ins {
		d, o := dims(t.Shape), dims(make([]int64, len(t.Shape)))
		o[ax] = C.dnnl_dim_t(off)
		off += t.Shape[ax]
		if st := C.dnnl_memory_desc_init_submemory(&subs[i], dstMD, &d[0], &o[0]); st != C.dnnl_success {
			return main, false
		}
		var pd C.dnnl_primitive_desc_t
		if st := C.dnnl_reorder_primitive_desc_create(&pd, &srcs[i], b.s.engine, &subs[i], b.s.engine, nil); st != C.dnnl_success {
			return main, false
		}
		pds = append(pds, pd)
		if isReference(pd) {
			return main, false
		}
	}
	outs := b.outputParts(dstMD, subs)
	for i := range ins {
		st := step(b.primitive(pds[i]), map[C.int]C.dnnl_memory_t{C.DNNL_ARG_FROM: b.input(i, &srcs[i]), C.DNNL_ARG_TO: outs[i]})
		if i == len(ins)-1 {
			main = st
		} else {
			b.steps = append(b.steps, st)
		}
	}
	return main, true
}

// outputParts is output for an operator that writes its output in parts:
// one memory object per part, each described by its sub-memory of have.
func (b *builder) outputParts(have *C.dnnl_memory_desc_t, parts []C.dnnl_memory_desc_t) []C.dnnl_memory_t {
	whole := b.output(have)
	mems := make([]C.dnnl_memory_t, len(parts))
	if n := len(b.binds); n > 0 && b.binds[n-1] == whole {
		// The output's own buffer, bound per run.
		arg := b.k.args[len(b.k.args)-1]
		for i := range parts {
			mems[i] = b.bound(arg, &parts[i])
		}
		return mems
	}
	// A scratch buffer reordered to the plain output after the operator.
	var h unsafe.Pointer
	if st := C.dnnl_memory_get_data_handle(whole, &h); st != C.dnnl_success {
		b.fail(dnnlError("memory handle", st))
	}
	for i := range parts {
		mems[i] = b.memory(&parts[i], h)
	}
	return mems
}

// eltwise builds an elementwise primitive (relu; clip to [alpha, beta])
// in the input's layout.
func (b *builder) eltwise(alg C.dnnl_alg_kind_t, alpha, beta float64) (C.kd_step, error) {
	return b.eltwiseOn(0, alg, alpha, beta)
}

// eltwiseOn builds an elementwise primitive on input i, in its layout.
func (b *builder) eltwiseOn(i int, alg C.dnnl_alg_kind_t, alpha, beta float64) (C.kd_step, error) {
	var main C.kd_step
	md := b.inputLayout(i)
	var d C.dnnl_eltwise_desc_t
	if st := C.dnnl_eltwise_forward_desc_init(&d, C.dnnl_forward_inference, alg, &md, C.float(alpha), C.float(beta)); st != C.dnnl_success {
		return main, dnnlError("eltwise descriptor", st)
	}
	pd, err := b.createPD(unsafe.Pointer(&d), nil)
	if err != nil {
		return main, err
	}
	defer C.dnnl_primitive_desc_destroy(pd)
	args := map[C.int]C.dnnl_memory_t{C.DNNL_ARG_SRC: b.input(i, &md), C.DNNL_ARG_DST: b.output(&md)}
	return step(b.primitive(pd), args), b.err
}

// binary builds add, subtract, multiply and bias_add: src0 is the
// operand of the output's shape (kept in its layout when the other has
// the same shape), src1 the broadcast one (plain).
func (b *builder) binary(o *op.Op, attrs ir.Attrs, ins []*ir.TensorType, out *ir.TensorType) (C.kd_step, error) {
	var main C.kd_step
	alg := map[*op.Op]C.dnnl_alg_kind_t{op.Add: C.dnnl_binary_add, op.BiasAdd: C.dnnl_binary_add, op.Subtract: C.dnnl_binary_sub, op.Multiply: C.dnnl_binary_mul}[o]
	i0, i1 := 0, 1
	r := len(out.Shape)
	var s1 []int64
	if o == op.BiasAdd {
		ax, _ := attrInt(attrs, "axis")
		if ax < 0 {
			ax += int64(r)
		}
		s1 = make([]int64, r)
		for k := range s1 {
			s1[k] = 1
		}
		s1[ax] = out.Shape[ax]
	} else {
		swapped, err := binaryOrder(o, ins[0].Shape, ins[1].Shape, out.Shape)
		if err != nil {
			return main, err
		}
		if swapped {
			i0, i1 = 1, 0
		}
		s1 = padShape(ins[i1].Shape, r)
		// A constant scalar operand makes the operation an affine map of
		// the other, an eltwise primitive in any layout: oneDNN 2.6 has
		// only its reference binary kernel for a blocked tensor and a
		// broadcast scalar when limited to AVX2 (hard-sigmoid's x/6+0.5
		// in mobilenet_v3_large: 140 ms instead of 5 ms).
		if c, ok := b.constScalar(i1); ok && ins[i0].Shape.Equal(out.Shape) {
			alpha, beta := 1.0, c
			switch {
			case o == op.Multiply:
				alpha, beta = c, 0
			case o == op.Subtract: // never swapped (binaryOrder)
				beta = -c
			}
			return b.eltwiseOn(i0, C.dnnl_eltwise_linear, alpha, beta)
		}
	}
	// The broadcast operand may share src0's layout only when it has the
	// output's rank too (a rank-1 bias padded to [1, n] arrives as plain
	// [n], which a reorder to a 2-D layout cannot read).
	sameShape := ir.Shape(s1).Equal(out.Shape) && len(ins[i1].Shape) == r
	try := func(src0 C.dnnl_memory_desc_t) (C.dnnl_primitive_desc_t, C.dnnl_memory_desc_t, error) {
		src1, err := plainMD(s1)
		if err != nil {
			return nil, src1, err
		}
		if sameShape {
			src1 = src0
		}
		var d C.dnnl_binary_desc_t
		if st := C.dnnl_binary_desc_init(&d, alg, &src0, &src1, &src0); st != C.dnnl_success {
			return nil, src1, dnnlError("binary descriptor", st)
		}
		pd, err := b.createPD(unsafe.Pointer(&d), nil)
		return pd, src1, err
	}
	src0 := b.inputLayout(i0)
	pd, src1, err := try(src0)
	if err != nil || isReference(pd) {
		// Fall back to plain data when the layout is not supported, or
		// has only oneDNN's reference kernel (a blocked tensor with a
		// per-channel operand when limited to AVX2: 10-20x slower than
		// the plain one).
		plain, perr := plainMD(out.Shape)
		if perr != nil {
			return main, perr
		}
		if err != nil || !mdEqual(&plain, &src0) {
			if ppd, psrc1, perr := try(plain); perr == nil {
				if err == nil && isReference(ppd) {
					C.dnnl_primitive_desc_destroy(ppd) // no better: keep the first
				} else {
					if pd != nil {
						C.dnnl_primitive_desc_destroy(pd)
					}
					pd, src1, src0, err = ppd, psrc1, plain, nil
				}
			}
		}
		if err != nil {
			return main, err
		}
	}
	defer C.dnnl_primitive_desc_destroy(pd)
	args := map[C.int]C.dnnl_memory_t{C.DNNL_ARG_SRC_0: b.input(i0, &src0)}
	if sameShape {
		args[C.DNNL_ARG_SRC_1] = b.input(i1, &src1)
	} else {
		args[C.DNNL_ARG_SRC_1] = b.plainInput(i1, &src1)
	}
	args[C.DNNL_ARG_DST] = b.output(&src0)
	return step(b.primitive(pd), args), b.err
}

// batchNorm builds inference batch normalisation with global statistics.
func (b *builder) batchNorm(attrs ir.Attrs) (C.kd_step, error) {
	var main C.kd_step
	eps, err := attrFloat(attrs, "epsilon")
	if err != nil {
		return main, err
	}
	md := b.inputLayout(0)
	var d C.dnnl_batch_normalization_desc_t
	flags := C.uint(C.dnnl_use_global_stats | C.dnnl_use_scale | C.dnnl_use_shift)
	if st := C.dnnl_batch_normalization_forward_desc_init(&d, C.dnnl_forward_inference, &md, C.float(eps), flags); st != C.dnnl_success {
		return main, dnnlError("batch normalization descriptor", st)
	}
	pd, err := b.createPD(unsafe.Pointer(&d), nil)
	if err != nil {
		return main, err
	}
	defer C.dnnl_primitive_desc_destroy(pd)
	_, shape := b.ctx.InputType(1)
	pmd, err := plainMD(shape)
	if err != nil {
		return main, err
	}
	args := map[C.int]C.dnnl_memory_t{
		C.DNNL_ARG_SRC:      b.input(0, &md),
		C.DNNL_ARG_SCALE:    b.plainInput(1, &pmd),
		C.DNNL_ARG_SHIFT:    b.plainInput(2, &pmd),
		C.DNNL_ARG_MEAN:     b.plainInput(3, &pmd),
		C.DNNL_ARG_VARIANCE: b.plainInput(4, &pmd),
		C.DNNL_ARG_DST:      b.output(&md),
	}
	return step(b.primitive(pd), args), b.err
}
