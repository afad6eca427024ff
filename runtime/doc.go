// Package runtime loads and runs the artifacts kiln's compiler produces.
//
// It sits at the end of the pipeline: the compiler lowers a model to C
// (codegen/c), builds it into a shared library that exports one packed
// function per fused operator, and emits a graph JSON that says in which
// order to call them on which buffers. Here the library is loaded as a
// Module, the graph JSON drives a GraphExecutor, and the user binds inputs,
// runs and reads outputs. (The AOT executor for microcontrollers is C and
// does not use this package.)
//
// # Pieces
//
//   - Device and DeviceAPI: a device is a type and an id (cpu:0, cpu:1,
//     ext_dev:0). Each device type has a DeviceAPI that allocates its memory
//     and copies to, from and between devices. The CPU API allocates C
//     memory; cpu:N devices share it but are distinct devices, so copies
//     between them are real. ExtDevAPI simulates a device with memory of its
//     own: its blocks are tracked per device id and every copy checks that
//     the device side is live memory of that device. RegisterDeviceAPI adds
//     device types.
//   - NDArray: a dense tensor in the memory of one device. Host data moves
//     in and out by copying (FromTensor, ToTensor, CopyFrom, CopyTo).
//   - Module and PackedFunc: a module holds functions by name and imports
//     other modules; lookup searches the module, then its imports. This is
//     how an artifact composes: the host library is the root, and modules
//     from external code generators (a JSON runtime module for a BYOC
//     backend, ...) are imported into it, so an executor finds every
//     operator through one Module. LoadLibrary loads a "dso" module.
//   - GraphExecutor: runs a graph JSON (format below) over a Module.
//   - SaveParams/ReadParams: the params file format for weights.
//
// # Memory and cgo
//
// Every buffer handed to C is C memory (posix_memalign, 64-byte aligned),
// and so are the kiln_tensor arrays that point to it, so no Go pointer ever
// reaches C: the cgo pointer-passing rules hold by construction, under the
// default GODEBUG=cgocheck=1 and under GOEXPERIMENT=cgocheck2. Buffers are
// freed by NDArray.Free / GraphExecutor.Close, or by a cleanup when they
// become unreachable; a GraphExecutor's whole storage is allocated once at
// construction, and its per-call kiln_tensor arrays are built once too, so
// Run allocates no device or C memory.
//
// # Calling compiled code: cgo rather than purego
//
// Libraries are loaded with dlopen/dlsym and called through a small C
// trampoline via cgo. kiln needs a C toolchain anyway to build the
// artifacts it runs, so cgo costs nothing extra, and it gives a direct,
// typed call with the kiln_tensor layout checked by the C compiler against
// the ABI header. The ABI reports errors through a thread-local slot
// (kiln_get_last_error); the trampoline clears it, calls the function and
// reads it in one C call, hence on one OS thread, which a purego caller
// could only get by locking the goroutine to its thread around several
// foreign calls. purego would allow CGO_ENABLED=0 builds of the runtime, at
// the price of per-platform assembly trampolines and hand-kept struct
// layouts; that is not worth it while building an artifact needs cc anyway.
//
// Libraries are opened with RTLD_NOW|RTLD_LOCAL (each defines its own
// kiln_set_last_error and friends) and stay loaded for the lifetime of the
// process: function pointers into them live in PackedFuncs and executors,
// and unloading under them would be fatal.
//
// # Graph JSON
//
// The compiler's graph executor codegen emits:
//
//	{
//	  "nodes": [
//	    {"op": "null", "name": "x"},
//	    {"op": "null", "name": "w"},
//	    {"op": "kiln_op", "name": "fused_conv2d_relu", "inputs": [[0, 0], [1, 0]],
//	     "attrs": {"func_name": "fused_nn_conv2d_nn_relu", "num_inputs": 2, "num_outputs": 1}},
//	    {"op": "device_copy", "name": "copy_3", "inputs": [[2, 0]],
//	     "attrs": {"num_inputs": 1, "num_outputs": 1}}
//	  ],
//	  "arg_nodes": [0, 1],
//	  "heads": [[3, 0]],
//	  "node_row_ptr": [0, 1, 2, 3, 4],
//	  "attrs": {
//	    "shape": [[1, 3, 8, 8], [4, 3, 3, 3], [1, 4, 6, 6], [1, 4, 6, 6]],
//	    "dltype": ["float32", "float32", "float32", "float32"],
//	    "storage_id": [0, 1, 2, 3],
//	    "storage_offset": [0, 0, 0, 0],
//	    "device_index": [[1, 0], [1, 0], [1, 0], [12, 0]]
//	  }
//	}
//
// Rules, all checked by NewGraphExecutor (and ValidateGraphJSON), with
// errors that name the node:
//
//   - nodes are in execution order; an input [node, output] (an optional
//     third element, a version, is ignored) refers to an earlier node.
//   - op is "null" (a graph input or parameter: no inputs, one output),
//     "kiln_op" (attrs func_name, num_inputs = len(inputs), num_outputs >= 1,
//     and optionally sources, the model nodes it computes, for profiles;
//     the function is called with the inputs then the outputs; with
//     attribute in_place 1 it is not called, because its operands already
//     sit in the right bytes: with several inputs (a join, such as a
//     concatenation) its one output is its inputs laid end to end, each at
//     the byte where the previous one ends in the output's storage, each
//     written by a kiln_op that is not in place and read by this node
//     alone, none of them or the output a graph output; with one input (a
//     cut: a reshape, a split) its outputs are that input's bytes cut in
//     order, the input written by a kiln_op that is not in place, no
//     output a graph output) or
//     "device_copy" (one input, one output of the same dtype and shape,
//     copied between the devices of the two entries). Integer attrs may be
//     numbers or decimal strings; other node attrs are ignored.
//   - every node output is an "entry"; entries are numbered node by node,
//     and node_row_ptr[i] .. node_row_ptr[i+1]-1 are node i's (node_row_ptr
//     may be omitted). attrs.shape, attrs.dltype (kiln dtype names) and
//     attrs.storage_id have one element per entry, as do two optional
//     tables: attrs.storage_offset (bytes from the start of the storage, a
//     multiple of 64, at most 2^48; omitted: all 0) and attrs.device_index
//     ([device_type, device_id], types as in the C header; omitted:
//     everything on the executor's first device, cpu:0).
//   - arg_nodes lists exactly the null nodes, whose names are unique: they
//     are the names SetInput and SetParams take. heads are the outputs.
//   - all entries of one kiln_op are on one device (cross-device data moves
//     only through device_copy).
//   - entries sharing a storage_id share one buffer (as large as the
//     furthest end, storage_offset plus size, of its entries) and must be
//     on one device; entries whose bytes overlap must have disjoint
//     lifetimes. An entry lives from the node that writes it to its last
//     reader, both included (the entries an in_place node places inside
//     another count as parts of it: a join's output lives from the first
//     of its inputs on, a cut's input until the last reader of its
//     outputs);
//     inputs and heads live for the whole run. So
//     memory planning (package memplan: one pool per device for the
//     intermediates) may reuse bytes once their last reader has run, but
//     not for that reader's own outputs, and never those of inputs or
//     outputs.
//   - unknown fields are rejected, so that a misspelt key is an error.
//
// # Concurrency
//
// Modules are safe to share between goroutines. A GraphExecutor serialises
// its methods with a mutex, so one executor runs one inference at a time;
// Execute binds inputs, runs and copies outputs under one lock. To run
// inferences in parallel, Fork the executor once per concurrent caller: a
// fork shares the parameters' buffers (frozen from then on) and the
// compiled code, and has its own activation memory; a module whose calls
// share state (a JSON runtime module: its intermediates, and for oneDNN
// its primitives) gives each fork an instance of its own (Instancer),
// sharing what it only reads (constants, reordered weights). SetThreads
// gives a fork its own thread count: the host library reads it per OS
// thread (kiln_set_num_threads_here), so forks on different threads do
// not disturb each other. Package kiln's sessions are built on forks.
// A library keeps a team of worker threads per calling OS thread (kiln's
// pool, as OpenMP does for a library built on it): an
// executor runs its multi-threaded runs on an OS thread of its own, so
// that one team serves them all (runs from whatever thread called would
// leave a spinning team on each), and its runs at one thread on the
// caller's thread. A fork dropped without Close releases its memory,
// threads and module instances when it is collected. An NDArray is not
// synchronised beyond guarding against use after Free.
package runtime
