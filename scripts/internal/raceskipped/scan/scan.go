// Package scan finds the tests that skip themselves under the race
// detector (command raceskipped).
package scan

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// Found are the tests that call testutil.SkipUnderRace, by package
// directory (relative, "./dir").
type Found map[string][]string

// Pattern returns a -run pattern matching exactly the found tests' names
// (a name found in several packages also runs in those where it does
// not skip: harmless), or one matching nothing when there are none.
func (f Found) Pattern() string {
	var names []string
	for _, ns := range f {
		names = append(names, ns...)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) == 0 {
		return "^$"
	}
	return "^(" + strings.Join(names, "|") + ")$"
}

// Dirs returns the package directories, sorted.
func (f Found) Dirs() []string {
	var d []string
	for k := range f {
		d = append(d, k)
	}
	slices.Sort(d)
	return d
}

// Dir scans the _test.go files under root (testdata and hidden folders
// left out). A test counts when it calls testutil.SkipUnderRace or a
// function of its package's tests that does (at any depth). Dir fails
// where a test function skips by hand inside `if ... testutil.Race ...`:
// such a test would run nowhere.
func Dir(root string) (Found, error) {
	fset := token.NewFileSet()
	funcs := map[string][]*ast.FuncDecl{} // test files' functions by directory
	var bad []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		dir := "./" + filepath.ToSlash(rel)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil {
				continue
			}
			funcs[dir] = append(funcs[dir], fn)
			if isTest(fn) {
				for _, pos := range skipsByHand(fn.Body) {
					bad = append(bad, fmt.Sprintf("%s: %s skips under the race detector by hand; call testutil.SkipUnderRace so that make test runs it without", fset.Position(pos), fn.Name.Name))
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(bad, "\n"))
	}
	found := Found{}
	for dir, fns := range funcs {
		// The functions that skip: those calling SkipUnderRace, then
		// their callers, until nothing is added.
		skips := map[string]bool{}
		for changed := true; changed; {
			changed = false
			for _, fn := range fns {
				if !skips[fn.Name.Name] && callsAny(fn.Body, skips) {
					skips[fn.Name.Name], changed = true, true
				}
			}
		}
		for _, fn := range fns {
			if isTest(fn) && skips[fn.Name.Name] {
				found[dir] = append(found[dir], fn.Name.Name)
			}
		}
	}
	return found, nil
}

// isTest reports whether fn is a test function (TestXxx).
func isTest(fn *ast.FuncDecl) bool {
	return strings.HasPrefix(fn.Name.Name, "Test") && fn.Name.Name != "TestMain"
}

// callsAny reports whether body calls testutil.SkipUnderRace or one of
// the package-level functions named in fns.
func callsAny(body ast.Node, fns map[string]bool) bool {
	hit := false
	ast.Inspect(body, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok {
			return !hit
		}
		if isSel(c.Fun, "testutil", "SkipUnderRace") {
			hit = true
		} else if id, ok := c.Fun.(*ast.Ident); ok && fns[id.Name] {
			hit = true
		}
		return !hit
	})
	return hit
}

// skipsByHand returns the positions of t.Skip/Skipf/SkipNow calls inside
// an if statement whose condition reads testutil.Race.
func skipsByHand(body ast.Node) []token.Pos {
	var out []token.Pos
	ast.Inspect(body, func(n ast.Node) bool {
		is, ok := n.(*ast.IfStmt)
		if !ok || !mentions(is.Cond, "testutil", "Race") {
			return true
		}
		ast.Inspect(is.Body, func(m ast.Node) bool {
			if c, ok := m.(*ast.CallExpr); ok {
				if s, ok := c.Fun.(*ast.SelectorExpr); ok && strings.HasPrefix(s.Sel.Name, "Skip") {
					if _, isIdent := s.X.(*ast.Ident); isIdent {
						out = append(out, c.Pos())
					}
				}
			}
			return true
		})
		return true
	})
	return out
}

func mentions(e ast.Expr, pkg, name string) bool {
	hit := false
	ast.Inspect(e, func(n ast.Node) bool {
		if x, ok := n.(ast.Expr); ok && isSel(x, pkg, name) {
			hit = true
		}
		return !hit
	})
	return hit
}

func isSel(e ast.Expr, pkg, name string) bool {
	s, ok := e.(*ast.SelectorExpr)
	if !ok || s.Sel.Name != name {
		return false
	}
	id, ok := s.X.(*ast.Ident)
	return ok && id.Name == pkg
}
