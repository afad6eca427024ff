package targets

import (
	"errors"
	"strings"
	"testing"
)

// TestRegisterUnavailable: a kind a backend reports unavailable is an
// unknown kind whose error says why; registering it later wins.
func TestRegisterUnavailable(t *testing.T) {
	r := NewRegistry()
	if err := r.Register(C); err != nil {
		t.Fatal(err)
	}
	r.RegisterUnavailable("npu", "its driver is not installed")
	_, err := r.ParseList("npu, c")
	if !errors.Is(err, ErrUnknownKind) || !strings.Contains(err.Error(), `unknown target kind "npu": this kiln has no npu target: its driver is not installed`) {
		t.Errorf("ParseList(npu, c): %v", err)
	}
	if _, err := r.Parse(`{"kind": "npu"}`); err == nil || !strings.Contains(err.Error(), "its driver is not installed") {
		t.Errorf("JSON target of an unavailable kind: %v", err)
	}
	if err := r.Register(&Kind{Name: "npu"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ParseList("npu, c"); err != nil {
		t.Errorf("after registering npu: %v", err)
	}
}
