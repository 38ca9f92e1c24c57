// Package atomicfile writes files so that a reader, or a crash at any
// moment, sees either the previous file or the complete new one, never a
// torn mix.
//
// The bytes go to a temporary file in the destination's directory (the
// same filesystem, so the final rename is atomic), named TempPrefix +
// base + "-" + random suffix so that whoever owns the directory can
// recognise and remove the leftovers of a killed writer. The file is
// fsynced before it is renamed over the destination, so even a power loss
// leaves the old file or the complete new one.
//
// That the new name itself survives a power loss takes one more fsync, of
// the directory (SyncDir). WriteFile does it for its one file; a writer of
// many files through Create (a dataset, a batch of predictions) does it
// once after the batch when it needs it, rather than once a file.
//
// WriteFile and Create give the file exactly the permissions asked for,
// whatever the umask, for files whose mode is part of their contract.
// WriteFileUmask and CreateUmask instead let the umask (and a default ACL
// of the directory) filter them, as os.WriteFile and os.Create do: for
// data other users or a group share (a prepared store, predictions, plots),
// where the user's umask is how they say who may read it.
//
// Like os.WriteFile, nothing here creates missing directories.
package atomicfile

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// TempPrefix starts the name of every temporary file (and of the names
// TempName makes): a dot file, hidden from ls and globs such as *.nii.gz.
const TempPrefix = ".tmp-"

// TempName returns a fresh temporary name for path: in path's directory,
// TempPrefix + base(path) + "-" + a random suffix, unique without any
// shared counter. It is for callers that build something other than a
// single file (a directory, a symbolic link) to rename over path.
func TempName(path string) string {
	return filepath.Join(filepath.Dir(path), TempPrefix+filepath.Base(path)+"-"+rand.Text())
}

// WriteFile writes data to path atomically and durably: when it returns
// nil the new file has replaced the old one and survives a power loss (the
// directory is fsynced too). The file's permissions are exactly perm (the
// umask does not apply). On error the previous file, if any, is untouched
// and no temporary file is left behind.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return writeFile(path, data, perm, true)
}

// WriteFileUmask is WriteFile with perm filtered by the process's umask,
// as os.WriteFile does (0o666 gives 0o644 under the usual umask 022).
func WriteFileUmask(path string, data []byte, perm os.FileMode) error {
	return writeFile(path, data, perm, false)
}

func writeFile(path string, data []byte, perm os.FileMode, exact bool) error {
	f, err := create(path, perm, exact)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Commit(); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// File is a file being written under a temporary name; Commit puts it in
// place of its destination, Close without Commit discards it. Always
// defer Close: after a Commit it does nothing.
type File struct {
	f    *os.File
	path string // the destination
	done bool   // committed or discarded
}

// Create starts writing path: it creates a temporary file beside path
// with permissions exactly perm (the umask does not apply). Nothing is
// visible at path until Commit.
func Create(path string, perm os.FileMode) (*File, error) { return create(path, perm, true) }

// CreateUmask is Create with perm filtered by the process's umask, as
// os.Create does (0o666 gives 0o644 under the usual umask 022): the rename
// keeps the mode the temporary file was created with.
func CreateUmask(path string, perm os.FileMode) (*File, error) { return create(path, perm, false) }

func create(path string, perm os.FileMode, exact bool) (*File, error) {
	tmp := TempName(path)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, err
	}
	// Chmod, because the mode given to OpenFile is filtered by the umask.
	if exact {
		if err := f.Chmod(perm); err != nil {
			f.Close()
			os.Remove(tmp)
			return nil, err
		}
	}
	return &File{f: f, path: path}, nil
}

// Write writes to the temporary file (io.Writer).
func (f *File) Write(p []byte) (int, error) { return f.f.Write(p) }

// WriteAt writes at an offset of the temporary file (io.WriterAt), e.g. a
// header whose contents are known only after the body.
func (f *File) WriteAt(p []byte, off int64) (int, error) { return f.f.WriteAt(p, off) }

// Seek sets the offset of the next Write (io.Seeker).
func (f *File) Seek(offset int64, whence int) (int64, error) { return f.f.Seek(offset, whence) }

// Commit fsyncs the temporary file and renames it over the destination.
// It does not fsync the directory (see the package documentation: call
// SyncDir when the new name must survive a power loss). On error the
// temporary file is removed and the destination is untouched.
func (f *File) Commit() error {
	if f.done {
		return fmt.Errorf("commit %s: %w", f.path, os.ErrClosed)
	}
	f.done = true
	tmp := f.f.Name()
	err := f.f.Sync()
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, f.path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// Close discards the temporary file unless Commit was called, leaving the
// destination as it was; after Commit it does nothing and returns nil.
func (f *File) Close() error {
	if f.done {
		return nil
	}
	f.done = true
	err := f.f.Close()
	if rerr := os.Remove(f.f.Name()); err == nil {
		err = rerr
	}
	return err
}

// SyncDir fsyncs a directory so that entries created, renamed or removed
// in it survive a power loss. Filesystems that cannot sync a directory
// (EINVAL or ENOTSUP, e.g. some network and FUSE filesystems) are
// accepted: there is nothing more to do on them.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
