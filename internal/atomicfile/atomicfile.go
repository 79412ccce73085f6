// Package atomicfile replaces a file's content so that readers and crashes see
// either the old content or the new, never a torn or empty file.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces the file at path with data. It writes a temporary file in the
// same directory (hidden, named after path), gives it exactly perm (the umask
// does not apply, unlike os.WriteFile), fsyncs it, renames it over path and
// fsyncs the directory, so the new content and its name survive a crash once
// Write returns nil. On failure the temporary file is removed and path keeps its
// old content, except when only the directory fsync fails: then the new content
// is in place but may not survive a crash.
//
// The rename replaces path itself: if path is a symlink, the link is replaced,
// not its target. The directory must exist.
func Write(path string, data []byte, perm os.FileMode) error {
	if err := write(path, data, perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func write(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		if !renamed {
			_ = tmp.Close() // a second Close only returns an error
			_ = os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	renamed = true
	return SyncDir(dir)
}

// SyncDir fsyncs the directory dir, which makes a rename in it durable;
// writers with a sequence of their own (the store's snapshot restore) need
// it without Write.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
