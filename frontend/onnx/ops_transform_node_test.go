package onnx

import (
	"fmt"
	"github.com/kiln-dev/kiln/internal/testenv"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// trNodeTestDirs are the ONNX backend tests of the transform group (glob
// patterns under ../shared/onnx).
var trNodeTestDirs = []string{
	"node/test_reshape*", "node/test_slice*", "node/test_split*", "node/test_squeeze*",
	"node/test_unsqueeze*", "node/test_pad*", "node/test_constant_pad", "node/test_edge_pad",
	"node/test_reflect_pad", "node/test_resize*", "node/test_upsample*", "node/test_concat*",
	"node/test_flatten*", "node/test_transpose*", "node/test_gather*", "node/test_scatter*",
	"node/test_tile*", "node/test_expand*", "node/test_shape*", "node/test_size*",
	"node/test_constantofshape*", "node/test_range*", "node/test_eyelike*", "node/test_onehot*",
	"node/test_compress*", "node/test_nonzero*", "node/test_unique*", "node/test_tril*",
	"node/test_triu*", "node/test_reversesequence*", "node/test_top_k*", "node/test_cumsum*",
	"node/test_argmax*", "node/test_argmin*", "node/test_reduce_*",
	"simple/test_expand_shape_model*",
	// pytorch-operator tests whose models use only this group's ops.
	"pytorch-operator/test_operator_chunk", "pytorch-operator/test_operator_concat2",
	"pytorch-operator/test_operator_flatten", "pytorch-operator/test_operator_index",
	"pytorch-operator/test_operator_pad", "pytorch-operator/test_operator_permute2",
	"pytorch-operator/test_operator_reduced_*", "pytorch-operator/test_operator_repeat*",
	"pytorch-operator/test_operator_view",
}

// trKnownFailures are backend tests of the group that kiln cannot pass,
// with the reason. Everything else must pass.
var trKnownFailures = map[string]string{}

// trRunBackendTest imports one backend test (every input may be frozen, so
// shape inputs become constants) and checks each data set with the
// reference executor, rtol 1e-3 and atol 1e-5.
func trRunBackendTest(dir string) error {
	sets, _ := filepath.Glob(filepath.Join(dir, "test_data_set_*"))
	if len(sets) == 0 {
		return fmt.Errorf("no data sets")
	}
	for _, set := range sets {
		probe, err := LoadFile(filepath.Join(dir, "model.onnx"), Options{})
		var inputs []ValueInfo
		if err == nil {
			inputs = probe.Inputs
		}
		freeze := map[string]*tensor.Tensor{}
		var args []*tensor.Tensor
		files, _ := filepath.Glob(filepath.Join(set, "input_*.pb"))
		sort.Strings(files)
		for i := range files {
			t, name, err := ReadTensorFile(filepath.Join(set, fmt.Sprintf("input_%d.pb", i)))
			if err != nil {
				return err
			}
			if name == "" && i < len(inputs) {
				name = inputs[i].Name
			}
			if name != "" {
				freeze[name] = t
			}
			args = append(args, t)
		}
		m, err := LoadFile(filepath.Join(dir, "model.onnx"), Options{Freeze: freeze})
		if err != nil {
			return err
		}
		v, err := ref.Run(m.Module, args)
		if err != nil {
			return err
		}
		got := v.Flatten()
		for i := range got {
			want, _, err := ReadTensorFile(filepath.Join(set, fmt.Sprintf("output_%d.pb", i)))
			if err != nil {
				return err
			}
			if err := trClose(got[i], want); err != nil {
				return fmt.Errorf("%s output %d: %v", filepath.Base(set), i, err)
			}
		}
	}
	return nil
}

func trClose(got, want *tensor.Tensor) error {
	if got.DType != want.DType || !got.Shape.Equal(want.Shape) {
		return fmt.Errorf("got %s, want %s", got.Type(), want.Type())
	}
	for i := 0; i < got.Len(); i++ {
		if !want.DType.IsFloat() {
			if got.Int(i) != want.Int(i) {
				return fmt.Errorf("element %d: got %d, want %d", i, got.Int(i), want.Int(i))
			}
			continue
		}
		g, w := got.Float(i), want.Float(i)
		if math.IsNaN(g) && math.IsNaN(w) || g == w {
			continue
		}
		if math.IsNaN(g) || math.IsNaN(w) || math.Abs(g-w) > 1e-5+1e-3*math.Abs(w) {
			return fmt.Errorf("element %d: got %g, want %g", i, g, w)
		}
	}
	return nil
}

// TestTransformONNXBackend runs the transform group's ONNX backend tests
// from ../shared/onnx when that folder is present.
func TestTransformONNXBackend(t *testing.T) {
	root := testenv.SharedPath(t, "onnx")
	var dirs []string
	for _, p := range trNodeTestDirs {
		m, _ := filepath.Glob(filepath.Join(root, p))
		dirs = append(dirs, m...)
	}
	sort.Strings(dirs)
	pass, fail := 0, 0
	var report []string
	for _, d := range dirs {
		name := filepath.Base(d)
		err := trRunBackendTest(d)
		reason, known := trKnownFailures[name]
		switch {
		case err == nil && known:
			t.Errorf("%s passes but is listed as a known failure (%s)", name, reason)
		case err == nil:
			pass++
			report = append(report, "PASS "+name)
		case known:
			fail++
			report = append(report, fmt.Sprintf("FAIL %s (known: %s): %v", name, reason, err))
		default:
			fail++
			report = append(report, fmt.Sprintf("FAIL %s: %v", name, err))
			t.Errorf("%s: %v", name, err)
		}
	}
	if os.Getenv("KILN_TR_REPORT") != "" {
		fmt.Println(strings.Join(report, "\n"))
	}
	t.Logf("%d passed, %d failed", pass, fail)
}
