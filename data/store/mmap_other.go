//go:build !unix

package store

import "os"

// mapFile has no memory map here: raw stores are read with ReadAt.
func mapFile(*os.File) ([]byte, error) { return nil, nil }

func unmapFile([]byte) error { return nil }
