//go:build !linux

package cgroup

import (
	"path/filepath"

	"github.com/commlab/commlab/labs"
)

// Off Linux there are no cgroups: probes say so and everything else refuses
// with labs.ErrNeedsLinux.

// Unified reports false: there is no cgroup tree.
func Unified() bool { return false }

// Mode reports "unavailable".
func Mode() string { return "unavailable" }

// Dir is where the group would live on a v1 host.
func Dir(ctrl, rel string) string { return filepath.Join(MountRoot, ctrl, rel) }

// HasControllers reports false.
func HasControllers(...string) bool { return false }

// Move refuses.
func Move(string, int) error { return labs.ErrNeedsLinux }
