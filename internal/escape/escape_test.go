package escape

import (
	"github.com/kiln-dev/kiln/internal/testenv"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hostile are strings that try every metacharacter of the languages kiln
// writes.
var hostile = []string{
	"", "x", `x */ int pwn = system("touch pwned"); /*`, "a/*b", "a*/b", "*//", "/**/",
	`"`, `\`, "\\\n", "a\nb", "a\rb", "a*\\\r/b", "*??/\n/", "??=??/??'", "$(touch pwned)", "`touch pwned`",
	"<script>alert(1)</script>", "#", "%s%n", "\xff\xfe", "\x00", "'", `'\''`, "a b\tc", "ü", "\u2028",
	"$$", "${HOME}", "|x|", "[a](b)", "\\x41",
}

func TestCCommentNeverEnds(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	check := func(s string) {
		c := CComment(s)
		for _, bad := range []string{"*/", "/*", "??", "\n", "\r", "\\\n"} {
			if strings.Contains(c, bad) {
				t.Fatalf("CComment(%q) = %q contains %q", s, c, bad)
			}
		}
		for i := 0; i < len(c); i++ {
			if c[i] < 0x20 || c[i] >= 0x7f {
				t.Fatalf("CComment(%q) = %q has byte %#x", s, c, c[i])
			}
		}
	}
	for _, s := range hostile {
		check(s)
	}
	alphabet := []byte("*/?\\\n\r\"' abc\xff$")
	for i := 0; i < 20000; i++ {
		b := make([]byte, r.Intn(12))
		for k := range b {
			b[k] = alphabet[r.Intn(len(alphabet))]
		}
		check(string(b))
	}
}

func TestCIdent(t *testing.T) {
	for in, want := range map[string]string{
		"": "v", "a/b": "a_b", "1x": "v_1x", "int": "v_int", "__x": "v___x", "_Foo": "v__Foo", "ok_9": "ok_9",
		"\xff": "_", "main": "v_main",
	} {
		if got := CIdent(in, nil); got != want {
			t.Errorf("CIdent(%q) = %q, want %q", in, got, want)
		}
	}
	if got := CIdent("kiln_x", func(s string) bool { return strings.HasPrefix(s, "kiln_") }); got != "v_kiln_x" {
		t.Errorf("reserved: got %q", got)
	}
}

func TestNamerDistinct(t *testing.T) {
	n := Namer{FoldCase: true}
	got := []string{n.Name("a/b"), n.Name("a_b"), n.Name("A_B"), n.Name("a_b_2"), n.Name("int")}
	want := []string{"a_b", "a_b_2", "A_B_3", "a_b_2_2", "v_int"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("names %v, want %v", got, want)
		}
	}
}

func TestShellAndMake(t *testing.T) {
	sh := testenv.Tool(t, "sh")
	dir := t.TempDir()
	for _, s := range hostile {
		if strings.ContainsRune(s, 0) {
			continue
		}
		out, err := exec.Command(sh, "-c", "printf %s "+Shell(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("Shell(%q): sh printed %q (%v)", s, out, err)
		}
	}
	testenv.Tool(t, "make")
	var mk strings.Builder
	var want []string
	for i, s := range hostile {
		w, err := MakeWord(s)
		if strings.ContainsAny(s, "\n\r\x00") {
			if err == nil {
				t.Errorf("MakeWord(%q): want an error", s)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		mk.WriteString("# " + MakeComment(s) + "\n")
		mk.WriteString("V" + string(rune('A'+i)) + " := " + w + "\n")
		mk.WriteString("all::\n\t@printf '%s\\n' $(V" + string(rune('A'+i)) + ")\n")
		want = append(want, s)
	}
	if err := os.WriteFile(filepath.Join(dir, "Makefile"), []byte(mk.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "-s")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make: %v\n%s", err, out)
	}
	if got := strings.TrimSuffix(string(out), "\n"); got != strings.Join(want, "\n") {
		t.Errorf("make printed\n%q\nwant\n%q", got, strings.Join(want, "\n"))
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Error("a command ran")
	}
}

// TestCStringAndCommentCompile compiles a C program with every hostile
// string in a comment and as a literal, and checks the literals hold the
// exact bytes and nothing ran.
func TestCStringAndCommentCompile(t *testing.T) {
	cc := testenv.CC(t)
	dir := t.TempDir()
	var src strings.Builder
	src.WriteString("#include <stdio.h>\n#include <string.h>\nint main(void) {\n  int bad = 0;\n")
	for _, s := range hostile {
		src.WriteString("  /* " + CComment(s) + " */\n")
		src.WriteString("  // " + CComment(s) + "\n")
		src.WriteString("  { static const char s[] = " + CString(s) + "; const unsigned char want[] = {")
		for i := 0; i < len(s); i++ {
			src.WriteString(itoa(int(s[i])) + ",")
		}
		src.WriteString(" 0}; if (sizeof s != sizeof want || memcmp(s, want, sizeof s) != 0) bad++; }\n")
	}
	src.WriteString("  printf(\"%d\\n\", bad);\n  return 0;\n}\n")
	c := filepath.Join(dir, "t.c")
	if err := os.WriteFile(c, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, std := range []string{"-std=c11", "-std=gnu11", "-std=c99"} {
		bin := filepath.Join(dir, "t")
		out, err := exec.Command(cc, std, "-Wall", "-Wextra", "-Werror", "-Wtrigraphs", "-o", bin, c).CombinedOutput()
		if err != nil {
			t.Fatalf("cc %s: %v\n%s", std, err, out)
		}
		cmd := exec.Command(bin)
		cmd.Dir = dir
		out, err = cmd.Output()
		if err != nil || strings.TrimSpace(string(out)) != "0" {
			t.Fatalf("%s: %v, %q literals differ", std, err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Error("a command ran")
	}
}

func itoa(i int) string {
	const d = "0123456789"
	if i < 10 {
		return d[i : i+1]
	}
	return itoa(i/10) + d[i%10:i%10+1]
}

func TestTextEscapes(t *testing.T) {
	for _, s := range hostile {
		m := Markdown(s)
		if strings.ContainsAny(m, "<>\n\r") {
			t.Errorf("Markdown(%q) = %q", s, m)
		}
		for i := 0; i < len(m); i++ {
			if strings.IndexByte("|`*_[]", m[i]) >= 0 && (i == 0 || m[i-1] != '\\') {
				t.Errorf("Markdown(%q) = %q: %q at %d not escaped", s, m, m[i], i)
			}
		}
		if h := HTML(s); strings.ContainsAny(h, "<>\"'\n") {
			t.Errorf("HTML(%q) = %q", s, h)
		}
		d := DOT(s)
		inner := d[1 : len(d)-1]
		if strings.Contains(strings.ReplaceAll(strings.ReplaceAll(inner, `\\`, ""), `\"`, ""), `"`) || strings.ContainsAny(d, "\n\r") {
			t.Errorf("DOT(%q) = %q", s, d)
		}
		if p := Printable(s); strings.ContainsAny(p, "\n\r\x00") {
			t.Errorf("Printable(%q) = %q", s, p)
		}
	}
}
