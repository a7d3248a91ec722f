package testenv

import (
	"os"
	"testing"
)

// TestRequireRoot: a root test runs only as root and never under -short.
func TestRequireRoot(t *testing.T) {
	ran := false
	t.Run("inner", func(t *testing.T) {
		RequireRoot(t, "testing the helper")
		ran = true
	})
	if want := os.Geteuid() == 0 && !testing.Short(); ran != want {
		t.Errorf("root test ran = %v, want %v (euid %d, short %v)", ran, want, os.Geteuid(), testing.Short())
	}
}

func TestRequireTools(t *testing.T) {
	ran := false
	t.Run("missing", func(t *testing.T) {
		RequireTools(t, "sh", "commlab-no-such-tool")
		ran = true
	})
	if ran {
		t.Error("a test needing a missing tool ran")
	}
}
