package nifti

import (
	"fmt"
	"strings"
)

// FormatError reports malformed NIfTI input: the file, the header field (or
// "data"/"extension"/"gzip"), the byte offset where the problem is (-1 when
// unknown; for compressed files the offset is in the decompressed stream),
// and what is wrong.
type FormatError struct {
	File   string
	Field  string
	Offset int64
	Msg    string
}

// Error formats the error as "nifti: FILE: FIELD (byte N): MSG", leaving
// out what is unknown.
func (e *FormatError) Error() string {
	var sb strings.Builder
	sb.WriteString("nifti: ")
	sb.WriteString(e.File)
	sb.WriteString(": ")
	if e.Field != "" {
		sb.WriteString(e.Field)
		if e.Offset >= 0 {
			fmt.Fprintf(&sb, " (byte %d)", e.Offset)
		}
		sb.WriteString(": ")
	} else if e.Offset >= 0 {
		fmt.Fprintf(&sb, "at byte %d: ", e.Offset)
	}
	sb.WriteString(e.Msg)
	return sb.String()
}
