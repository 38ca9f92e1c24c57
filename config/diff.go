package config

import (
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxChanges bounds the changes Changes lists.
const maxChanges = 12

// Changes lists the keys whose values differ between two resolved
// configs (YAML), as "section.key: old → new", sorted; at most
// maxChanges, then a count of the rest. Both are read as Load reads a file
// first (an older version's keys moved, every setting written out), so
// only differences of value are listed. A config that does not parse (or
// is empty: a checkpoint saved without one) is reported as such.
func Changes(old, now string) []string {
	old, now = normalized(old), normalized(now)
	var a, b map[string]any
	if old == "" || yaml.Unmarshal([]byte(old), &a) != nil {
		return []string{"the checkpoint's config is missing or unreadable"}
	}
	if yaml.Unmarshal([]byte(now), &b) != nil {
		return []string{"the new config is unreadable"}
	}
	fa, fb := map[string]string{}, map[string]string{}
	flatten("", a, fa)
	flatten("", b, fb)
	var out []string
	for k, va := range fa {
		if vb, ok := fb[k]; !ok {
			out = append(out, fmt.Sprintf("%s: %s → (absent)", k, va))
		} else if va != vb {
			out = append(out, fmt.Sprintf("%s: %s → %s", k, va, vb))
		}
	}
	for k, vb := range fb {
		if _, ok := fa[k]; !ok {
			out = append(out, fmt.Sprintf("%s: (absent) → %s", k, vb))
		}
	}
	sort.Strings(out)
	if len(out) > maxChanges {
		out = append(out[:maxChanges], fmt.Sprintf("and %d more", len(out)-maxChanges))
	}
	return out
}

// flatten writes every leaf of v into dst under its dotted path (lists
// are leaves, formatted whole).
func flatten(prefix string, v any, dst map[string]string) {
	m, ok := v.(map[string]any)
	if !ok {
		dst[prefix] = fmt.Sprint(v)
		return
	}
	for k, sub := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		flatten(p, sub, dst)
	}
}

// normalized is text as this version writes the config it describes, or
// text itself when it is not one.
func normalized(text string) string {
	if strings.TrimSpace(text) == "" {
		return text
	}
	c, err := Parse([]byte(text), "", "")
	if err != nil {
		return text
	}
	if out, err := c.YAML(); err == nil {
		return out
	}
	return text
}
