package onnx

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"testing"

	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

// nnBackendTests are the nn group's ONNX backend tests (globs under
// ../shared/onnx) plus the real CNNs under ../shared/models.
var nnBackendTests = []string{
	"onnx/node/test_conv*", "onnx/node/test_basic_conv*", "onnx/node/test_convtranspose*",
	"onnx/node/test_maxpool*", "onnx/node/test_averagepool*", "onnx/node/test_batchnorm*",
	"onnx/node/test_gemm*", "onnx/node/test_matmul*", "onnx/node/test_softmax*",
	"onnx/node/test_logsoftmax*", "onnx/node/test_hardmax*", "onnx/node/test_lstm*",
	"onnx/node/test_gru*", "onnx/node/test_rnn*", "onnx/node/test_einsum*",
	"onnx/node/test_layer_normalization*", "onnx/node/test_instancenorm*", "onnx/node/test_lrn*",
	"onnx/node/test_mvn*", "onnx/node/test_roialign*", "onnx/node/test_gridsample*",
	"onnx/node/test_depthtospace*", "onnx/node/test_spacetodepth*", "onnx/node/test_qlinear*",
	"onnx/node/test_convinteger*", "onnx/node/test_maxunpool*",
	"onnx/node/test_globalaveragepool*", "onnx/node/test_globalmaxpool*",
	"onnx/pytorch-converted/test_*Pool*", "onnx/pytorch-converted/test_BatchNorm*",
	"onnx/pytorch-converted/test_Conv*", "onnx/pytorch-converted/test_Linear*",
	"onnx/pytorch-converted/test_*Softmax*", "onnx/pytorch-converted/test_*softmax*",
	"onnx/pytorch-converted/test_PixelShuffle",
	"models/resnet18", "models/mobilenet_v2", "models/squeezenet1_1",
}

// nnRunBackendTest imports one test directory, freezing every input (so
// that inputs which determine shapes become constants), and checks each
// data set on the reference executor with rtol 1e-3, atol 1e-5.
func nnRunBackendTest(dir string) error {
	sets, _ := filepath.Glob(filepath.Join(dir, "test_data_set_*"))
	if len(sets) == 0 {
		return fmt.Errorf("no data sets")
	}
	plain, err := LoadFile(filepath.Join(dir, "model.onnx"), Options{})
	for _, set := range sets {
		files, _ := filepath.Glob(filepath.Join(set, "input_*.pb"))
		args := make([]*tensor.Tensor, len(files))
		freeze := map[string]*tensor.Tensor{}
		for i := range files {
			t, name, err := ReadTensorFile(filepath.Join(set, fmt.Sprintf("input_%d.pb", i)))
			if err != nil {
				return err
			}
			args[i] = t
			if name != "" {
				freeze[name] = t
			}
		}
		m := plain
		if err != nil {
			if m, err = LoadFile(filepath.Join(dir, "model.onnx"), Options{Freeze: freeze}); err != nil {
				return err
			}
			err = nil
		}
		v, rerr := ref.Run(m.Module, args[:len(m.Inputs)])
		if rerr != nil {
			return rerr
		}
		got := v.Flatten()
		outs, _ := filepath.Glob(filepath.Join(set, "output_*.pb"))
		if len(got) != len(outs) {
			return fmt.Errorf("%d outputs, want %d", len(got), len(outs))
		}
		for i := range got {
			want, _, err := ReadTensorFile(filepath.Join(set, fmt.Sprintf("output_%d.pb", i)))
			if err != nil {
				return err
			}
			if err := nnClose(got[i], want); err != nil {
				return fmt.Errorf("%s output %d: %v", filepath.Base(set), i, err)
			}
		}
	}
	return nil
}

func nnClose(got, want *tensor.Tensor) error {
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
		if g == w || math.IsNaN(g) && math.IsNaN(w) {
			continue
		}
		if math.IsNaN(g) || math.IsNaN(w) || math.Abs(g-w) > 1e-5+1e-3*math.Abs(w) {
			return fmt.Errorf("element %d: got %g, want %g", i, g, w)
		}
	}
	return nil
}

// TestNNONNXBackend runs the nn group's backend tests and the CNN models
// from ../shared when that folder is present (the models only without
// -short).
func TestNNONNXBackend(t *testing.T) {
	root := testenv.Shared(t)
	var dirs []string
	for _, p := range nnBackendTests {
		if testing.Short() && filepath.Dir(p) == "models" {
			continue
		}
		m, _ := filepath.Glob(filepath.Join(root, p))
		dirs = append(dirs, m...)
	}
	sort.Strings(dirs)
	if len(dirs) < 150 {
		t.Fatalf("found only %d test directories under %s", len(dirs), root)
	}
	t.Logf("%d test directories", len(dirs))
	for _, d := range dirs {
		if err := nnRunBackendTest(d); err != nil {
			t.Errorf("%s: %v", filepath.Base(d), err)
		}
	}
}
