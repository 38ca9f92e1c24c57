package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads a config file: its keys decoded on top of the defaults, the
// settings that follow others derived, every relative path in it made
// absolute against the file's folder (so a config works from any working
// directory; paths given as flags are the caller's, relative to its
// working directory), and the whole checked (Validate). Errors name the
// file and the key, with its line where one is known.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	base, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	c, err := Parse(b, path, base)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, atLines(err, b))
	}
	return c, nil
}

// atLines adds to each of Validate's errors ("train.batch_size: 0, want
// ≥ 1") the line of the document b where its key is written, when it is:
// "line 9: train.batch_size: 0, want ≥ 1". A setting left at its default
// has no line.
func atLines(err error, b []byte) error {
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) != nil || len(doc.Content) == 0 {
		return err
	}
	root := doc.Content[0]
	if _, merr := migrate(root); merr != nil {
		return err
	}
	lines := map[string]int{}
	if checkKnownKeys(root, reflect.TypeFor[Config](), "", lines) != nil {
		return err
	}
	errs := Problems(err)
	for i, e := range errs {
		key, _, _ := strings.Cut(e.Error(), ":")
		key, _, _ = strings.Cut(key, "[")
		if l, ok := lines[key]; ok {
			errs[i] = fmt.Errorf("line %d: %w", l, e)
		}
	}
	return errors.Join(errs...)
}

// Parse decodes a config document (name labels errors) on top of the
// defaults and derives the settings that follow others; it does not
// validate (a caller that overrides settings validates after). Relative
// paths written in the document are made relative to baseDir ("" leaves
// them as written). Keys of older configs are folded into their
// replacements (see migrate), with a note in Warnings.
func Parse(b []byte, name, baseDir string) (*Config, error) {
	c := table()
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("config %s: %w", name, err)
	}
	if len(doc.Content) > 0 {
		root := doc.Content[0]
		if root.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("config %s: line %d: want a mapping of sections, got %s", name, root.Line, kindName(root))
		}
		warn, err := migrate(root)
		if err != nil {
			return nil, fmt.Errorf("config %s: %w", name, err)
		}
		lines := map[string]int{}
		if err := checkKnownKeys(root, reflect.TypeFor[Config](), "", lines); err != nil {
			return nil, fmt.Errorf("config %s: %w", name, err)
		}
		if baseDir != "" {
			resolvePaths(root, baseDir)
		}
		if err := root.Decode(&c); err != nil {
			return nil, fmt.Errorf("config %s: %w", name, withKeys(err, lines))
		}
		c.Warnings = warn
		present := func(key string) bool { return lookup(root, strings.Split(key, ".")...) != nil }
		if err := c.explicitZeros(root); err != nil {
			return nil, fmt.Errorf("config %s: %w", name, err)
		}
		c.Data.CTMeanGiven = present("data.ct_mean")
		c.derive(present)
		return &c, nil
	}
	c.derive(nil)
	return &c, nil
}

// YAML returns the config as YAML: every setting, defaults included (the
// run directory's config.yaml and every checkpoint carry it, so a run can
// be reproduced and predicted from without the original file).
func (c *Config) YAML() (string, error) {
	e := c.explicit()
	var doc yaml.Node
	if err := doc.Encode(&e); err != nil {
		return "", fmt.Errorf("encode config: %w", err)
	}
	yaml11Floats(&doc)
	b, err := yaml.Marshal(&doc)
	if err != nil {
		return "", fmt.Errorf("encode config: %w", err)
	}
	return string(b), nil
}

// yaml11Floats rewrites every float scalar under n so that YAML 1.1
// readers (PyYAML, which users load config.yaml with) read a float, not a
// string or an int: YAML 1.1's float needs a dot, so Go's 1e-05 becomes
// 1.0e-05 and 2 becomes 2.0. YAML 1.2 readers, ours included, read the
// same values.
func yaml11Floats(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!float" {
		v := n.Value
		if !strings.ContainsAny(v, ".nN") { // not 1.5, .inf, .nan
			if i := strings.IndexAny(v, "eE"); i >= 0 {
				n.Value = v[:i] + ".0" + v[i:]
			} else {
				n.Value = v + ".0"
			}
		}
	}
	for _, c := range n.Content {
		yaml11Floats(c)
	}
}

// pathKeys are the settings that hold a path, as key paths from the root.
var pathKeys = [][]string{{"output_dir"}, {"data", "dataset"}, {"data", "manifest"}, {"data", "store"}, {"data", "splits_file"}, {"train", "init_weights"}}

// resolvePaths rewrites, in the document, every relative path it gives to
// be relative to base: the path settings, and the files of an explicit
// case list when no dataset folder is given (with one, case files are
// relative to the dataset).
func resolvePaths(root *yaml.Node, base string) {
	abs := func(n *yaml.Node) {
		if n != nil && n.Kind == yaml.ScalarNode && n.Value != "" && !filepath.IsAbs(n.Value) {
			n.Value = filepath.Join(base, n.Value)
		}
	}
	for _, k := range pathKeys {
		abs(lookup(root, k...))
	}
	if lookup(root, "data", "dataset") != nil {
		return
	}
	cases := lookup(root, "data", "cases")
	if cases == nil || cases.Kind != yaml.SequenceNode {
		return
	}
	for _, cs := range cases.Content {
		abs(lookup(cs, "label"))
		img := lookup(cs, "image")
		if img != nil && img.Kind == yaml.SequenceNode {
			for _, f := range img.Content {
				abs(f)
			}
		} else {
			abs(img)
		}
	}
}

// lookup returns the value node at a key path of mappings (nil: absent).
func lookup(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return n
}

// remove deletes key from mapping n, returning its value (nil: absent).
func remove(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			v := n.Content[i+1]
			n.Content = append(n.Content[:i], n.Content[i+2:]...)
			return v
		}
	}
	return nil
}

// set adds key: value to mapping n (which must not hold key).
func set(n *yaml.Node, key string, value *yaml.Node) {
	n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, value)
}

// moved are the keys of older configs that now live elsewhere, one key per
// setting: the sampler's seed is the run's seed, the number of batches per
// epoch is the training loop's, and out_channels was an alias of
// num_classes.
var moved = []struct{ from, to []string }{
	{[]string{"data", "seed"}, []string{"seed"}},
	{[]string{"data", "iterations_per_epoch"}, []string{"train", "iterations_per_epoch"}},
	{[]string{"model", "out_channels"}, []string{"model", "num_classes"}},
}

// migrate folds the moved keys of an older config (a run directory's or a
// checkpoint's config.yaml written before) into their replacements: a
// moved key whose replacement is absent takes its place; one whose
// replacement has the same value is dropped; different values are an
// error naming both lines. It returns a note per key moved.
func migrate(root *yaml.Node) ([]string, error) {
	var notes []string
	for _, m := range moved {
		parent := lookup(root, m.from[:len(m.from)-1]...)
		old := lookup(parent, m.from[len(m.from)-1])
		if old == nil {
			continue
		}
		from, to := strings.Join(m.from, "."), strings.Join(m.to, ".")
		now := lookup(root, m.to...)
		switch {
		case now == nil:
			dst := root
			for _, k := range m.to[:len(m.to)-1] {
				next := lookup(dst, k)
				if next == nil {
					next = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
					set(dst, k, next)
				}
				dst = next
			}
			set(dst, m.to[len(m.to)-1], old)
			notes = append(notes, fmt.Sprintf("line %d: %s is now %s (one key per setting); moved", old.Line, from, to))
		case now.Value == old.Value:
			notes = append(notes, fmt.Sprintf("line %d: %s repeats %s; dropped", old.Line, from, to))
		default:
			return nil, fmt.Errorf("line %d: %s (%s) differs from %s (%s, line %d): voxtrain has one key for this setting now, %s",
				old.Line, from, old.Value, to, now.Value, now.Line, to)
		}
		remove(parent, m.from[len(m.from)-1])
	}
	return notes, nil
}

// explicitZeros reports the keys a file gives as 0 (or less) where their
// zero value stands for "not given", and where that 0 would be used:
// rather than the default in its place, an error naming the key and its
// line. These few keep 0 as "not given" because a run's saved config.yaml
// writes 0 for them when unused (base_features and max_features beside
// explicit features, ct_std without ct normalisation), and those files
// must load. Keys whose 0 means something (iterations_per_epoch,
// cache_bytes, …) are decoded as given and checked by Validate.
func (c *Config) explicitZeros(root *yaml.Node) error {
	node := func(key string) *yaml.Node { return lookup(root, strings.Split(key, ".")...) }
	derives := node("model.features") == nil
	usesCT := false
	for _, n := range c.Data.Normalization {
		usesCT = usesCT || n == "ct"
	}
	var errs []error
	for _, z := range []struct {
		key       string
		zero, use bool
		want      string
	}{
		{"model.levels", c.Model.Levels <= 0, true, "want ≥ 1 (leave it out for the default: as many as model.features, or 4)"},
		{"model.base_features", c.Model.BaseFeatures <= 0, derives, "want ≥ 1 (leave it out for 32)"},
		{"model.max_features", c.Model.MaxFeatures <= 0, derives, "want ≥ 1 (leave it out for 320)"},
		{"data.ct_std", c.Data.CTStd == 0, usesCT, "a std must be > 0 (leave ct_std out to compute it from the dataset)"},
	} {
		if n := node(z.key); n != nil && z.zero && z.use {
			errs = append(errs, fmt.Errorf("line %d: %s: %s, %s", n.Line, z.key, n.Value, z.want))
		}
	}
	return errors.Join(errs...)
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// checkKnownKeys walks a document against the type it decodes into and
// reports the first key the type does not have, with its line and the
// keys it does have, or the first fixed-length list (patch_size, betas, a
// range) of the wrong length or not a list, with its key and line. Types that decode themselves (yaml.Unmarshaler) check
// their own keys. When lines is not nil it receives the line of every key
// by its path ("augment.blur.p"), for errors found after decoding.
func checkKnownKeys(n *yaml.Node, t reflect.Type, path string, lines map[string]int) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	switch {
	case t.Kind() == reflect.Array && n.Kind == yaml.SequenceNode && len(n.Content) != t.Len():
		// yaml.v3 says only "invalid array: want 3 elements but got 2",
		// with neither key nor line.
		return fmt.Errorf("line %d: %s: %d values, want %d", n.Line, path, len(n.Content), t.Len())
	case t.Kind() == reflect.Array && n.Kind != yaml.SequenceNode && n.Tag != "!!null":
		got := kindName(n)
		if n.Kind == yaml.ScalarNode {
			got = fmt.Sprintf("%q", n.Value)
		}
		return fmt.Errorf("line %d: %s: want a list of %d values, got %s", n.Line, path, t.Len(), got)
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && n.Kind == yaml.SequenceNode:
		for i, e := range n.Content {
			if err := checkKnownKeys(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), lines); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		fields := map[string]reflect.Type{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if f.IsExported() && name != "-" {
				if name == "" {
					name = strings.ToLower(f.Name)
				}
				fields[name] = f.Type
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			key := k.Value
			if path != "" {
				key = path + "." + k.Value
			}
			ft, ok := fields[k.Value]
			if !ok {
				known := make([]string, 0, len(fields))
				for name := range fields {
					known = append(known, name)
				}
				sort.Strings(known)
				where := "the top level"
				if path != "" {
					where = path
				}
				return fmt.Errorf("line %d: unknown key %q in %s (known: %s)", k.Line, k.Value, where, strings.Join(known, ", "))
			}
			if lines != nil {
				lines[key] = k.Line
			}
			if err := checkKnownKeys(n.Content[i+1], ft, key, lines); err != nil {
				return err
			}
		}
	}
	return nil
}

// withKeys names the key of each line in a decoding error: yaml.v3's
// type errors read "line 3: cannot unmarshal !!str `two` into int"; with
// lines (key → line, from checkKnownKeys) they read "line 3:
// train.batch_size: cannot unmarshal …". A line that holds several keys
// (a flow mapping) is left as it is.
func withKeys(err error, lines map[string]int) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	keys := map[int][]string{}
	for k, l := range lines {
		keys[l] = append(keys[l], k)
	}
	out := make([]string, len(te.Errors))
	for i, e := range te.Errors {
		out[i] = e
		var line int
		if _, serr := fmt.Sscanf(e, "line %d:", &line); serr != nil || len(keys[line]) != 1 {
			continue
		}
		prefix := fmt.Sprintf("line %d:", line)
		out[i] = prefix + " " + keys[line][0] + ":" + strings.TrimPrefix(e, prefix)
	}
	return &yaml.TypeError{Errors: out}
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		return "a scalar"
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	return "something else"
}
