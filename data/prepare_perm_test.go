package data

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/voxtrain/voxtrain/config"
	"github.com/voxtrain/voxtrain/internal/testutil"
)

// TestSetupFilesFollowTheUmask: what Setup writes into a store folder (the
// case files and index, the ct statistics) and the splits it writes into
// the experiment folder get the umask's permissions, so a group sharing a
// store (umask 002) can read and renew it; case files were 0600 and the
// rest 0644 whatever the umask.
func TestSetupFilesFollowTheUmask(t *testing.T) {
	testutil.Umask(t, 0o002)
	st := filepath.Join(t.TempDir(), "st")
	cfg := filled(config.Data{Dataset: demoDataset(t, 2), Store: st, Source: "store", NumFolds: 2, Normalization: config.StringList{"ct"}})
	exp := filepath.Join(t.TempDir(), "exp")
	if _, err := Setup(context.Background(), cfg, SetupOptions{Logger: discard(), SplitsDir: exp}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(exp, "splits_final.json")); err != nil || fi.Mode().Perm() != 0o664 {
		t.Errorf("splits: %v, want mode 0664 (umask 002)", err)
	}
	names := testutil.DirNames(t, st)
	for _, want := range []string{"index.json", ctStatsFile} {
		if _, err := os.Stat(filepath.Join(st, want)); err != nil {
			t.Errorf("the store holds %v, no %s", names, want)
		}
	}
	if fi, err := os.Stat(st); err != nil || fi.Mode().Perm() != 0o775 {
		t.Errorf("store folder: %v, %v, want mode 0775", fi.Mode(), err)
	}
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(st, n))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o664 {
			t.Errorf("%s has mode %v, want 0664 (umask 002)", n, fi.Mode().Perm())
		}
	}
}
