// Package testenv sorts commlab's tests into tiers. Unit tests need nothing.
// Root tests (real network namespaces, tc, nftables, cgroups, sandboxes) call
// RequireRoot first: they run as root in `make test` and are skipped for
// `make test-short` (go test -short) and for anyone not root.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// RequireRoot skips t unless it runs as root and not under -short; why says
// what the test needs root for, e.g. "network namespaces, tc".
func RequireRoot(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("root test (%s): skipped under -short", why)
	}
	if os.Geteuid() != 0 {
		t.Skipf("needs root (%s)", why)
	}
}

// RequireTools skips t unless every tool is on PATH.
func RequireTools(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s on PATH", tool)
		}
	}
}
