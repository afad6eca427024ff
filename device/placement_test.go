package device

import (
	"reflect"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/graph"
	"github.com/kiln-dev/kiln/graph/op"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ref"
	"github.com/kiln-dev/kiln/tensor"
)

func TestParseRules(t *testing.T) {
	got, err := ParseRules(`# placement for the demo
node:Conv_3 = little:1
   op:nn.conv2d=big   # every other convolution

node:"odd name" = npu
`)
	if err != nil {
		t.Fatal(err)
	}
	want := []Rule{
		{NodeName: "Conv_3", Device: "little:1", Line: 2, Column: 15},
		{OpType: "nn.conv2d", Device: "big", Line: 3, Column: 17},
		{NodeName: `"odd name"`, Device: "npu", Line: 5, Column: 19},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if s := got[0].String(); s != "node:Conv_3 = little:1" {
		t.Fatalf("String = %q", s)
	}
	errs := []struct{ src, err string }{
		{"node:A = cpu\nnode:B\n", "placement line 2, column 1: want `node:NAME = DEVICE`"},
		{"layer:A = cpu", "placement line 1, column 1: selector \"layer:A\""},
		{"  node: = cpu", "placement line 1, column 3: selector"},
		{"\n\nop:nn.conv3x = cpu", `placement line 3, column 4: unknown operator "nn.conv3x"`},
		{"node:A =  cpu:x", "placement line 1, column 11: device \"cpu:x\""},
		{"node:A = ", "placement line 1, column 9: device \"\" has an empty label"},
		{"node:A = cpu\nnode:A = cpu:1", "placement line 2, column 1: node:A already placed on line 1"},
	}
	for _, tc := range errs {
		if _, err := ParseRules(tc.src); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ParseRules(%q) err = %v, want %q", tc.src, err, tc.err)
		}
	}
}

// placeSrc mimics an imported ONNX model: calls carry node names as spans.
const placeSrc = `def @main(%x: Tensor[(4, 2), float32], %y: Tensor[(2, 2), float32]) {
  %0 = add(%x, constant(float32, [], [1.0])) /* span="Add_0" */;
  %1 = split(%0, indices=[2]) /* span="Split_1" */;
  %2 = %1.0;
  %3 = %1.1;
  %4 = multiply(%2, %y) /* span="Mul_2" */;
  %5 = multiply(%3, %y) /* span="Mul_3" */;
  subtract(%4, %5) /* span="Sub_4" */
}`

func TestPlace(t *testing.T) {
	env := newPlanEnv(t)
	env.cfg.Labels = mapResolver{"npu": {env.a, 0}, "little": {env.c, 1}}
	in := env.parse(t, placeSrc)
	rules, err := ParseRules("node:Split_1 = little\nop:multiply = npu\nnode:Mul_3 = cpu:0\n")
	if err != nil {
		t.Fatal(err)
	}
	placed, err := Place(in, rules)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := graph.Print(&b, placed, graph.PrintOptions{HideTypes: true, ShowSpans: true}); err != nil {
		t.Fatal(err)
	}
	// Each placed call gets its arguments and its result annotated.
	want := `def @main(%x: Tensor[(4, 2), float32], %y: Tensor[(2, 2), float32]) -> Tensor[(2, 2), float32] {
  %0 = add(%x, constant(float32, [], [1.0])) /* span="Add_0" */;
  %1 = on_device(%0, constrain_body=false, constrain_result=true, device="little", device_id=-1, device_type=-1);
  %2 = split(%1, axis=0, indices=[2]) /* span="Split_1" */;
  %3 = %2.0;
  %4 = on_device(%3, constrain_body=true, constrain_result=false, device="little", device_id=-1, device_type=-1);
  %5 = on_device(%4, constrain_body=false, constrain_result=true, device="npu", device_id=-1, device_type=-1);
  %6 = on_device(%y, constrain_body=false, constrain_result=true, device="npu", device_id=-1, device_type=-1);
  %7 = multiply(%5, %6) /* span="Mul_2" */;
  %8 = on_device(%7, constrain_body=true, constrain_result=false, device="npu", device_id=-1, device_type=-1);
  %9 = %2.1;
  %10 = on_device(%9, constrain_body=true, constrain_result=false, device="little", device_id=-1, device_type=-1);
  %11 = on_device(%10, constrain_body=false, constrain_result=true, device="cpu:0", device_id=-1, device_type=-1);
  %12 = on_device(%y, constrain_body=false, constrain_result=true, device="cpu:0", device_id=-1, device_type=-1);
  %13 = multiply(%11, %12) /* span="Mul_3" */;
  %14 = on_device(%13, constrain_body=true, constrain_result=false, device="cpu:0", device_id=-1, device_type=-1);
  subtract(%8, %14) /* span="Sub_4" */
}
`
	if got := b.String(); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	if printed(t, in) == printed(t, placed) {
		t.Fatal("Place returned its input unchanged")
	}
	planned, err := PlanDevices(placed)
	if err != nil {
		t.Fatal(err)
	}
	mul := calls(planned, "main", op.Multiply)
	checkDevice(t, planned, mul[0], env.accel0)
	checkDevice(t, planned, mul[1], env.cpu0)
	checkDevice(t, planned, calls(planned, "main", op.Split)[0], env.cpu1)
	checkDevice(t, planned, calls(planned, "main", op.Subtract)[0], env.cpu0)
	checkDevice(t, planned, calls(planned, "main", op.Add)[0], env.cpu0)
	checkDevice(t, planned, planned.Main().Params[1], env.cpu0)
	// Copies: add's result to little (cpu:1), split's first output and %y
	// to the accelerator, its product back, split's second output to cpu:0.
	wantPlanned := `def @main [param_device_ids=[0, 0], param_device_types=[1, 1], result_device_id=0, result_device_type=1] (%x: Tensor[(4, 2), float32], %y: Tensor[(2, 2), float32]) -> Tensor[(2, 2), float32] {
  %0 = add(%x, constant(float32, [], [1.0]));
  %1 = device_copy(%0, dst_device_id=1, dst_device_type=1, src_device_id=0, src_device_type=1);
  %2 = split(%1, axis=0, indices=[2]);
  %3 = %2.0;
  %4 = device_copy(%3, dst_device_id=0, dst_device_type=12, src_device_id=1, src_device_type=1);
  %5 = device_copy(%y, dst_device_id=0, dst_device_type=12, src_device_id=0, src_device_type=1);
  %6 = multiply(%4, %5);
  %7 = device_copy(%6, dst_device_id=0, dst_device_type=1, src_device_id=0, src_device_type=12);
  %8 = %2.1;
  %9 = device_copy(%8, dst_device_id=0, dst_device_type=1, src_device_id=1, src_device_type=1);
  %10 = multiply(%9, %y);
  subtract(%7, %10)
}
`
	if got := printed(t, planned); got != wantPlanned {
		t.Fatalf("planned:\n%s\nwant:\n%s", got, wantPlanned)
	}
	// Values are unchanged by placement and planning.
	x := tensor.FromFloat32s(ir.Shape{4, 2}, []float32{1, 2, 3, 4, 5, 6, 7, 8})
	y := tensor.FromFloat32s(ir.Shape{2, 2}, []float32{0.5, -1, 2, 0.25})
	w, err := ref.Run(in, []*tensor.Tensor{x, y})
	if err != nil {
		t.Fatal(err)
	}
	g, err := ref.Run(planned, []*tensor.Tensor{x, y})
	if err != nil {
		t.Fatal(err)
	}
	if err := tensor.AllClose(g.Tensor, w.Tensor, 0, 0); err != nil {
		t.Fatal(err)
	}
}

func TestPlaceErrors(t *testing.T) {
	env := newPlanEnv(t)
	in := env.parse(t, placeSrc)
	cases := []struct {
		rules []Rule
		err   string
	}{
		{[]Rule{{NodeName: "Conv_9", Device: "cpu", Line: 4, Column: 17, Source: "rules.txt"}}, `placement rule at rules.txt:4:17: no node named "Conv_9"`},
		{[]Rule{{NodeName: "Conv_8", Device: "cpu", Source: "--place"}}, `placement rule at --place "node:Conv_8 = cpu": no node named "Conv_8"`},
		{[]Rule{{OpType: "nn.nope", Device: "cpu"}}, `unknown operator "nn.nope"`},
		{[]Rule{{NodeName: "Add_0", Device: "cpu:-2"}}, "not a non-negative integer"},
		{[]Rule{{NodeName: "Add_0", OpType: "add", Device: "cpu"}}, "exactly one of NodeName and OpType"},
	}
	for _, tc := range cases {
		if _, err := Place(in, tc.rules); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Place(%+v) err = %v, want %q", tc.rules, err, tc.err)
		}
	}
	whole := env.parse(t, `def @main(%x: Tensor[(4, 2), float32]) {
  split(%x, indices=[2]) /* span="Split_0" */
}`)
	if _, err := Place(whole, []Rule{{NodeName: "Split_0", Device: "cpu"}}); err == nil || !strings.Contains(err.Error(), "used as a whole tuple") {
		t.Errorf("whole-tuple placement: err = %v", err)
	}
}
