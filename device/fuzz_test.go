package device

import (
	"strings"
	"testing"
)

// FuzzPlacement checks the placement-rule parser: no panic, and every
// rule it accepts prints as a line that parses back to the same rule.
func FuzzPlacement(f *testing.F) {
	for _, s := range []string{"node:Conv_3 = little:1\nop:nn.conv2d = big", "# c\n\nop:add=cpu:0 # x", "node: = a", "node:x = ", "op:x = a:b:c",
		"node:a=b\nnode:a=c", "op:nn.dense = dnnl:-1", "node:\"q\" = l:99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		rules, err := ParseRules(src)
		if err != nil {
			return
		}
		var lines []string
		for _, r := range rules {
			lines = append(lines, r.String())
		}
		back, err := ParseRules(strings.Join(lines, "\n"))
		if err != nil {
			t.Fatalf("ParseRules(%q) printed %q, which does not parse: %v", src, lines, err)
		}
		if len(back) != len(rules) {
			t.Fatalf("ParseRules(%q): %d rules, printed and parsed %d", src, len(rules), len(back))
		}
		for i := range rules {
			if back[i].String() != rules[i].String() {
				t.Fatalf("rule %d: %q became %q", i, rules[i].String(), back[i].String())
			}
		}
		if _, _, _, err := ParseDeviceString(src); err != nil {
			return
		}
	})
}
