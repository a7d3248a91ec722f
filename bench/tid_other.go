//go:build !linux

package bench

import "os"

// gettid stands in the process id where threads have no ids of their own.
func gettid() int { return os.Getpid() }
