package scan

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func write(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDirFindsSkippedTests: tests that call SkipUnderRace directly or
// through helpers of their package (in another file too) are found, with
// their package directories; others, testdata and non-test files are not.
func TestDirFindsSkippedTests(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "a"), "a_test.go", `package a
import "x/internal/testutil"
func TestDirect(t *testing.T) { testutil.SkipUnderRace(t, "numeric") }
func TestViaHelper(t *testing.T) { fixture(t) }
func TestViaTwoHelpers(t *testing.T) { outer(t) }
func TestPlain(t *testing.T) { if testutil.Race { n = 2 } }
func TestMain(m *testing.M) { fixture(nil) }
`)
	write(t, filepath.Join(root, "a"), "helpers_test.go", `package a
func fixture(t *testing.T) { testutil.SkipUnderRace(t, "slow") }
func outer(t *testing.T) { fixture(t) }
`)
	write(t, filepath.Join(root, "a"), "a.go", `package a
func TestNotATestFile(t *testing.T) { testutil.SkipUnderRace(t, "x") }
`)
	write(t, filepath.Join(root, "b", "c"), "c_test.go", `package c
func TestDeep(t *testing.T) { testutil.SkipUnderRace(t, "numeric") }
`)
	write(t, filepath.Join(root, "b", "testdata"), "x_test.go", `package x
func TestInTestdata(t *testing.T) { testutil.SkipUnderRace(t, "x") }
`)
	found, err := Dir(root)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := found.Dirs(), []string{"./a", "./b/c"}; !slices.Equal(got, want) {
		t.Errorf("dirs %v, want %v", got, want)
	}
	if got, want := found.Pattern(), "^(TestDeep|TestDirect|TestViaHelper|TestViaTwoHelpers)$"; got != want {
		t.Errorf("pattern %q, want %q", got, want)
	}
	if got := (Found{}).Pattern(); got != "^$" {
		t.Errorf("no tests: pattern %q, want one matching nothing", got)
	}
}

// TestDirRefusesSkipsByHand: a test skipping inside `if testutil.Race`
// would run nowhere, so the scan fails naming its file, line and name.
func TestDirRefusesSkipsByHand(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "p"), "p_test.go", `package p
func TestOK(t *testing.T) { testutil.SkipUnderRace(t, "numeric") }
func TestByHand(t *testing.T) {
	if testing.Short() || testutil.Race {
		t.Skip("slow")
	}
}
`)
	_, err := Dir(root)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(root, "p", "p_test.go")+":5:3: TestByHand skips under the race detector by hand") {
		t.Errorf("error %v, want one naming p_test.go:5 and TestByHand", err)
	}
	write(t, filepath.Join(root, "q"), "q_test.go", "package q\nfunc TestBroken(t *testing.T) {\n")
	if _, err := Dir(root); err == nil || !strings.Contains(err.Error(), "q_test.go") {
		t.Errorf("a test file that does not parse: error %v, want one naming it", err)
	}
}
