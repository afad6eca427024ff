package runtime

import (
	"bytes"
	"github.com/kiln-dev/kiln/internal/testenv"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/budget"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/tensor"
)

// FuzzReadParams checks the params.bin reader (the format of params.bin
// and constants.bin in artifacts): no panic, no allocation a short file
// does not back, accepted tensors hold exactly their shapes' bytes, and
// saving them again reads back equal.
func FuzzReadParams(f *testing.F) {
	for _, ps := range []map[string]*tensor.Tensor{
		{},
		{"w": tensor.FromFloat32s(ir.Shape{2, 2}, []float32{1, 2, 3, 4})},
		{"a": tensor.FromInt64s(ir.Shape{}, []int64{3}), "b": tensor.New(ir.Bool, ir.Shape{0, 5}), "c": tensor.New(ir.Float16, ir.Shape{3})},
	} {
		var b bytes.Buffer
		if err := SaveParams(&b, ps); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ps, err := ReadParams(bytes.NewReader(data))
		if err != nil {
			return
		}
		for n, v := range ps {
			if int64(len(v.Data)) != v.Shape.NumElements()*int64(v.DType.Size()) {
				t.Fatalf("%q: %s%v holds %d bytes", n, v.DType, v.Shape, len(v.Data))
			}
		}
		var b bytes.Buffer
		if err := SaveParams(&b, ps); err != nil {
			t.Fatal(err)
		}
		back, err := ReadParams(&b)
		if err != nil || len(back) != len(ps) {
			t.Fatalf("round trip: %v", err)
		}
		for n, v := range ps {
			if !back[n].Equal(v) {
				t.Fatalf("round trip changed %q", n)
			}
		}
	})
}

// FuzzGraphJSON checks the graph program loader: validation and executor
// construction against a real library never panic, and whatever they
// accept names only functions of the library's table (anything else is
// refused at load).
func FuzzGraphJSON(f *testing.F) {
	testenv.Cgo(f)
	f.Add([]byte(testGraph))
	f.Add([]byte(strings.Replace(testGraph, "add_f32", "system", 1)))
	f.Add([]byte(`{"nodes":[{"op":"null","name":"x"}],"arg_nodes":[0],"heads":[[0,0]],"node_row_ptr":[0,1],"attrs":{"shape":[[2]],"dltype":["float32"],"storage_id":[0]}}`))
	// Storage is allocated from the program's shapes: a small budget
	// keeps fuzzed programs from allocating gigabytes.
	defer budget.SetLimit(budget.SetLimit(64 << 20))
	lib := loadMain(f)
	extra := loadExtra(f)
	lib.Import(extra)
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := ValidateGraphJSON(data); err != nil {
			return
		}
		ex, err := NewGraphExecutor(data, lib)
		if err != nil {
			return
		}
		ex.Close()
	})
}
