//go:build !unix

package transport

import (
	"time"

	"github.com/commlab/commlab/labs"
)

func roceSocket(int, bool) error { return labs.ErrNeedsLinux }

// monoNanos has no clock shared by processes here; the RoCE transport that
// needs one refuses in roceSocket anyway.
func monoNanos() int64 { return time.Now().UnixNano() }

func mapShared(int, int) ([]byte, error) { return nil, labs.ErrNeedsLinux }

func unmap([]byte) {}

func allocate(int, int64) error { return labs.ErrNeedsLinux }
