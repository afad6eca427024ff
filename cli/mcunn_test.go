package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/internal/shared"
	"github.com/kiln-dev/kiln/internal/testenv"
	"github.com/kiln-dev/kiln/tensor"
)

// TestMCUNNProject is the microcontroller example end to end: lenet
// quantized by kiln quantize (int8, 8 generated calibration inputs),
// compiled with the AOT executor for "mcunn, c" (convolutions, pooling
// and dense layers as kiln_nn calls, their scratch buffers in the static
// workspace) and for "c" (kiln's integer kernels), exported as C
// projects, built with a plain cc under AddressSanitizer and
// UndefinedBehaviorSanitizer, and built for a Cortex-M4 warning-free and
// run under qemu-system-arm: every output must equal the host engine's
// (-t c, graph executor) bit for bit.
func TestMCUNNProject(t *testing.T) {
	testenv.Cgo(t)
	model, err := shared.Path("models", "lenet")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	q := filepath.Join(dir, "lenet_int8.onnx")
	if code, _, stderr := kiln("quantize", filepath.Join(model, "model.onnx"), "-o", q, "--samples", "8", "--activation-type", "int8", "--eval", "0"); code != 0 {
		t.Fatalf("quantize: exit %d: %s", code, stderr)
	}
	fold := []string{"--pass-config", "import.fold_qdq=true"}
	inPB := filepath.Join(model, "test_data_set_0", "input_0.pb")

	// The host engine's output.
	hostArt := filepath.Join(dir, "host.kiln")
	if code, _, stderr := kiln(append([]string{"compile", q, "-t", "c", "-o", hostArt, "--quiet"}, fold...)...); code != 0 {
		t.Fatalf("compile -t c: %s", stderr)
	}
	if code, _, stderr := kiln("run", hostArt, "--input", inPB, "--output-dir", filepath.Join(dir, "host_out")); code != 0 {
		t.Fatalf("run -t c: %s", stderr)
	}
	want, err := tensor.ReadNpyFile(filepath.Join(dir, "host_out", "output.npy"))
	if err != nil {
		t.Fatal(err)
	}

	for _, tgt := range []string{"mcunn, c", "c"} {
		t.Run(tgt, func(t *testing.T) { checkInt8Project(t, q, tgt, fold, inPB, want.Data) })
	}
}

// checkInt8Project compiles the int8 model q for tgt with the AOT
// executor, exports the C project and requires the host engine's output
// (want) from its program built with a plain cc under ASan and UBSan and
// from its Cortex-M4 image under QEMU. With "mcunn, c" the quantized
// layers are kiln_nn calls; with "c" they are kiln's own integer kernels,
// whose vector code the M4 build leaves out for its portable C.
func checkInt8Project(t *testing.T, q, tgt string, fold []string, inPB string, want []byte) {
	dir := t.TempDir()
	art := filepath.Join(dir, "mcu.kiln")
	code, stdout, stderr := kiln(append([]string{"compile", q, "-t", tgt, "--executor", "aot", "--weights", "blob", "-o", art, "-v"}, fold...)...)
	if code != 0 {
		t.Fatalf("compile -t %q: exit %d: %s", tgt, code, stderr)
	}
	mcu := tgt != "c"
	for _, node := range []string{"/0/Conv", "/2/MaxPool", "/3/Conv", "/5/MaxPool", "/7/Gemm", "/9/Gemm", "/11/Gemm"} {
		if mcu && !lineHas(stdout, node, "mcunn #") {
			t.Errorf("%s is not on mcunn in the partition report:\n%s", node, stdout)
		}
	}
	proj := filepath.Join(dir, "proj")
	if code, _, stderr := kiln("export", art, "--format", "c-project", "--weights", "c-array", "-o", proj); code != 0 {
		t.Fatalf("export: %s", stderr)
	}
	lib, err := os.ReadFile(filepath.Join(proj, "kiln_lib.c"))
	if err != nil {
		t.Fatal(err)
	}
	if mcu {
		for _, call := range []string{"kiln_nn_conv_s8(&(const kiln_nn_context){", "kiln_nn_max_pool_s8(", "kiln_nn_fully_connected_s8("} {
			if !strings.Contains(string(lib), call) {
				t.Errorf("kiln_lib.c does not call %s", call)
			}
		}
		for _, f := range []string{"kiln_nn.c", "kiln_nn.h"} {
			if _, err := os.Stat(filepath.Join(proj, f)); err != nil {
				t.Errorf("the project lacks kiln_nn's %s", f)
			}
		}
	} else if !strings.Contains(string(lib), "kiln_qconv_") {
		t.Error("kiln_lib.c has no integer convolution kernel")
	}

	in, _, err := ReadTensor(inPB)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "in.bin"), in.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	make := tool(t, "make")
	run := inDir(t, proj)
	same := func(outBin, what string) {
		t.Helper()
		got, err := os.ReadFile(filepath.Join(proj, outBin))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the host engine's", what)
		}
	}
	run(make, "CC=cc", "CFLAGS=-O1 -g -std=c11 -Wall -Wextra -Werror -ffp-contract=off -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer")
	run("./kiln_lenet_int8", "in.bin", "out.bin")
	same("out.bin", "the project's output under ASan and UBSan")

	tool(t, "arm-none-eabi-gcc")
	size := tool(t, "arm-none-eabi-size")
	run(make, "m4", "M4_FLAGS=-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 -O2 -std=c11 -ffp-contract=off -Wall -Wextra -Werror -DKILN_NO_THREADS")
	t.Logf("Cortex-M4 image:\n%s", run(size, "kiln_lenet_int8_m4.elf"))
	tool(t, "qemu-system-arm")
	run(make, "qemu", "ARGS=in.bin out_m4.bin")
	same("out_m4.bin", "the Cortex-M4 (QEMU) output")
}

// lineHas reports whether a line of text holds a (then a space) and, after it, b.
func lineHas(text, a, b string) bool {
	for _, l := range strings.Split(text, "\n") {
		if i := strings.Index(l, a+" "); i >= 0 && strings.Contains(l[i:], b) {
			return true
		}
	}
	return false
}

// TestMCUNNConv1D: the keyword-spotting conv1d model quantized to int8
// runs on mcunn whole but for the input quantization, reshapes and the
// output dequantization (its 1-D convolutions import as qnn.conv2d of
// height 1), with the host engine's outputs bit for bit.
func TestMCUNNConv1D(t *testing.T) {
	testenv.Cgo(t)
	model, err := shared.Path("models", "conv1d_kws")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	q := filepath.Join(dir, "kws_int8.onnx")
	if code, _, stderr := kiln("quantize", filepath.Join(model, "model.onnx"), "-o", q, "--samples", "8", "--activation-type", "int8", "--eval", "0"); code != 0 {
		t.Fatalf("quantize: exit %d: %s", code, stderr)
	}
	inPB := filepath.Join(model, "test_data_set_0", "input_0.pb")
	outs := map[string][]byte{}
	for _, tgt := range []string{"c", "mcunn, c"} {
		art := filepath.Join(dir, strings.ReplaceAll(tgt, ", ", "_")+".kiln")
		code, stdout, stderr := kiln("compile", q, "-t", tgt, "-o", art, "-v", "--pass-config", "import.fold_qdq=true")
		if code != 0 {
			t.Fatalf("compile -t %q: %s", tgt, stderr)
		}
		if tgt != "c" {
			for _, node := range []string{"/0/Conv", "/2/Conv", "/4/GlobalAveragePool", "/6/Gemm"} {
				if !lineHas(stdout, node, "mcunn #") {
					t.Errorf("%s is not on mcunn:\n%s", node, stdout)
				}
			}
		}
		od := filepath.Join(dir, "out_"+strings.ReplaceAll(tgt, ", ", "_"))
		if code, _, stderr := kiln("run", art, "--input", inPB, "--output-dir", od); code != 0 {
			t.Fatalf("run -t %q: %s", tgt, stderr)
		}
		v, err := tensor.ReadNpyFile(filepath.Join(od, "output.npy"))
		if err != nil {
			t.Fatal(err)
		}
		outs[tgt] = v.Data
	}
	if !bytes.Equal(outs["c"], outs["mcunn, c"]) {
		t.Error("mcunn's output differs from the host engine's")
	}
}
