package targets

import "testing"

// FuzzTargetString checks the target-string parser: no panic, and what
// it accepts prints to a string that parses back to the same target (the
// printer is canonical: printing that again gives the same text).
func FuzzTargetString(f *testing.F) {
	for _, s := range []string{"c", "c -mcpu=skylake-avx512 -opt=2", "dnnl, c", "cblas, c -cc=gcc", `c -cflags="-O1,-g" -mcpu=native`,
		"llvm", "c -keys=cpu,arm", "ccompiler -device=ext_dev, c", "  c  ", "c -cc=true", "vanilla_accelerator, c", "c -opt=x", "c,,", "-mcpu=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if l, err := ParseList(s); err == nil {
			text := l.String()
			back, err := ParseList(text)
			if err != nil {
				t.Fatalf("ParseList(%q) printed %q, which does not parse: %v", s, text, err)
			}
			if back.String() != text {
				t.Fatalf("ParseList(%q): printed %q, then %q", s, text, back.String())
			}
		}
		tg, err := Parse(s)
		if err != nil {
			return
		}
		text := tg.String()
		back, err := Parse(text)
		if err != nil {
			t.Fatalf("Parse(%q) printed %q, which does not parse: %v", s, text, err)
		}
		if back.String() != text {
			t.Fatalf("Parse(%q): printed %q, then %q", s, text, back.String())
		}
	})
}
