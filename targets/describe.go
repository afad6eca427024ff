package targets

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// OptionInfo describes one option for `kiln targets`.
type OptionInfo struct {
	Name string `json:"name"`
	// Kind is "string", "int", "bool", "strings" or "target".
	Kind string `json:"kind"`
	// Default is the default value (int64, bool, string, []string), or nil.
	Default any    `json:"default,omitempty"`
	Doc     string `json:"doc,omitempty"`
	// Common marks the options every kind accepts.
	Common bool `json:"common,omitempty"`
	// Choices are the values a string option accepts (empty: any).
	Choices []string `json:"choices,omitempty"`
}

// KindInfo describes one registered kind for `kiln targets`.
type KindInfo struct {
	Name       string       `json:"name"`
	DeviceType string       `json:"device_type"`
	Keys       []string     `json:"keys"`
	Host       bool         `json:"host"`
	Doc        string       `json:"doc,omitempty"`
	Options    []OptionInfo `json:"options"`
	// Hooks are the registered hooks (Kind.HookNames).
	Hooks []string `json:"hooks"`
}

// TagInfo describes one registered tag for `kiln targets`.
type TagInfo struct {
	Name string `json:"name"`
	// Target is the configuration, in target-string syntax.
	Target string `json:"target"`
	Doc    string `json:"doc,omitempty"`
}

// Describe lists r's kinds sorted by name, each with its own options then
// the common ones, for `kiln targets` (JSON-encodable as is).
func Describe(r *Registry) []KindInfo {
	var out []KindInfo
	for _, k := range r.Kinds() {
		ki := KindInfo{
			Name:       k.Name,
			DeviceType: k.DeviceType.String(),
			Keys:       append([]string{}, k.Keys...),
			Host:       k.Host,
			Doc:        k.Doc,
			Hooks:      append([]string{}, k.HookNames()...),
		}
		for i, o := range k.AllOptions() {
			ki.Options = append(ki.Options, OptionInfo{
				Name: o.Name, Kind: kindName(o.Kind), Default: o.Default, Doc: o.Doc,
				Common: i >= len(k.Options), Choices: o.Choices,
			})
		}
		out = append(out, ki)
	}
	return out
}

// DescribeTags lists r's tags sorted by name.
func DescribeTags(r *Registry) []TagInfo {
	var out []TagInfo
	for _, t := range r.Tags().List() {
		tt := t.Target()
		delete(tt.Attrs, "tag")
		out = append(out, TagInfo{Name: t.Name, Target: tt.String(), Doc: t.Doc})
	}
	return out
}

// WriteText prints kinds (and tags, when given) for people:
//
//	c  (device cpu, keys cpu, host)
//	    host code generated as C ...
//	    hooks: none
//	    -mcpu     string        CPU to tune for ...
//	    -opt      int = 3       C optimisation level (-O)
//	    ...
//
// Common options are listed once at the end rather than under every kind.
func WriteText(w io.Writer, kinds []KindInfo, tags []TagInfo) error {
	var b strings.Builder
	var common []OptionInfo
	for i, k := range kinds {
		if i > 0 {
			b.WriteByte('\n')
		}
		flags := []string{"device " + k.DeviceType}
		if len(k.Keys) > 0 {
			flags = append(flags, "keys "+strings.Join(k.Keys, ","))
		}
		if k.Host {
			flags = append(flags, "host")
		}
		fmt.Fprintf(&b, "%s  (%s)\n", k.Name, strings.Join(flags, ", "))
		if k.Doc != "" {
			fmt.Fprintf(&b, "    %s\n", k.Doc)
		}
		hooks := "none"
		if len(k.Hooks) > 0 {
			hooks = strings.Join(k.Hooks, ", ")
		}
		fmt.Fprintf(&b, "    hooks: %s\n", hooks)
		var own []OptionInfo
		for _, o := range k.Options {
			if o.Common {
				if i == 0 {
					common = append(common, o)
				}
				continue
			}
			own = append(own, o)
		}
		writeOptions(&b, own)
	}
	if len(common) > 0 {
		b.WriteString("\noptions of every kind:\n")
		writeOptions(&b, common)
	}
	if len(tags) > 0 {
		b.WriteString("\ntags:\n")
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		for _, t := range tags {
			fmt.Fprintf(tw, "    %s\t%s\t%s\n", t.Name, t.Target, t.Doc)
		}
		tw.Flush()
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeOptions(b *strings.Builder, opts []OptionInfo) {
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	for _, o := range opts {
		typ := o.Kind
		if len(o.Choices) > 0 {
			typ = strings.Join(o.Choices, "|")
		}
		if o.Default != nil {
			typ += " = " + formatOptionValue(o.Default, nil)
		}
		fmt.Fprintf(tw, "    -%s\t%s\t%s\n", o.Name, typ, o.Doc)
	}
	tw.Flush()
}
