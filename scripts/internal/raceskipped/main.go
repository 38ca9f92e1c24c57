// Command raceskipped lists the tests that skip themselves under the race
// detector (they call testutil.SkipUnderRace), so that `make test` runs
// them once without it:
//
//	raceskipped -run    a -run (or -skip) pattern matching their names
//	raceskipped -pkgs   their packages' directories (./dir), one per line
//
// It reads the module's _test.go files from the current directory down and
// fails, naming the file and line, where a test skips under the race
// detector by hand (a t.Skip inside `if testutil.Race`), which `make test`
// would never run.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/voxtrain/voxtrain/scripts/internal/raceskipped/scan"
)

func main() {
	run := flag.Bool("run", false, "print a pattern matching the tests' names")
	pkgs := flag.Bool("pkgs", false, "print the tests' package directories")
	flag.Parse()
	if *run == *pkgs {
		fmt.Fprintln(os.Stderr, "raceskipped: give one of -run and -pkgs")
		os.Exit(2)
	}
	found, err := scan.Dir(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "raceskipped:", err)
		os.Exit(1)
	}
	if *run {
		fmt.Println(found.Pattern())
		return
	}
	for _, d := range found.Dirs() {
		fmt.Println(d)
	}
}
