package dist

import (
	"fmt"
	"strconv"
	"strings"
)

// maxHosts bounds an expansion, so a typo such as [1-99999999] fails
// instead of filling memory.
const maxHosts = 1 << 20

// ExpandHostlist expands a SLURM hostlist ("gpu[01-03,07],cpu5",
// "rack[1-2]-n[1-2]") into its hosts, in SLURM's order: the items as
// listed; within an item with several bracketed ranges, the first range
// varies slowest. A range keeps its lower bound's width ("[08-10]" is 08,
// 09, 10). A malformed list is an error saying where.
func ExpandHostlist(list string) ([]string, error) {
	items, err := splitTopLevel(list)
	if err != nil {
		return nil, err
	}
	var hosts []string
	for _, item := range items {
		if item == "" {
			return nil, fmt.Errorf("an empty host name in %q", list)
		}
		expanded, err := expandItem(item)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", item, err)
		}
		if len(hosts)+len(expanded) > maxHosts {
			return nil, fmt.Errorf("expands to more than %d hosts", maxHosts)
		}
		hosts = append(hosts, expanded...)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("no hosts")
	}
	return hosts, nil
}

// splitTopLevel splits at the commas outside brackets.
func splitTopLevel(s string) ([]string, error) {
	var items []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			if depth > 0 {
				return nil, fmt.Errorf("a bracket inside a bracket at offset %d", i)
			}
			depth++
		case ']':
			if depth == 0 {
				return nil, fmt.Errorf("a ] without its [ at offset %d", i)
			}
			depth--
		case ',':
			if depth == 0 {
				items = append(items, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if depth > 0 {
		return nil, fmt.Errorf("a [ without its ]")
	}
	return append(items, strings.TrimSpace(s[start:])), nil
}

// expandItem expands one host pattern: the product of its bracketed
// ranges.
func expandItem(item string) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		return []string{item}, nil
	}
	end := strings.IndexByte(item[open:], ']') + open
	prefix, body, rest := item[:open], item[open+1:end], item[end+1:]
	values, err := expandRanges(body)
	if err != nil {
		return nil, err
	}
	tails, err := expandItem(rest)
	if err != nil {
		return nil, err
	}
	if len(values)*len(tails) > maxHosts {
		return nil, fmt.Errorf("expands to more than %d hosts", maxHosts)
	}
	out := make([]string, 0, len(values)*len(tails))
	for _, v := range values {
		for _, t := range tails {
			out = append(out, prefix+v+t)
		}
	}
	return out, nil
}

// expandRanges expands a bracket's body: "01-03,07" is 01, 02, 03, 07.
func expandRanges(body string) ([]string, error) {
	if body == "" {
		return nil, fmt.Errorf("empty brackets")
	}
	var out []string
	for _, r := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(r), "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.ParseUint(lo, 10, 32)
		b, err2 := strconv.ParseUint(hi, 10, 32)
		if lo == "" || hi == "" || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%q is not a number or a range of numbers", r)
		}
		if b < a {
			return nil, fmt.Errorf("the range %q runs backwards", r)
		}
		if int(b-a)+1+len(out) > maxHosts {
			return nil, fmt.Errorf("the range %q expands to more than %d hosts", r, maxHosts)
		}
		for v := a; v <= b; v++ {
			s := strconv.FormatUint(v, 10)
			if pad := len(lo) - len(s); pad > 0 {
				s = strings.Repeat("0", pad) + s
			}
			out = append(out, s)
		}
	}
	return out, nil
}
