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

// Throughput measures a rate that a busy machine can only push down (other
// processes take CPU from the sender; nothing makes a shaper pass more): it
// measures up to tries times, stops at the first value of at least lo, and
// returns the highest seen. The caller checks it against [lo, hi]; a value above
// hi in any try still fails, since the highest is returned.
func Throughput(tries int, lo float64, measure func() float64) float64 {
	best := 0.0
	for i := 0; i < max(tries, 1); i++ {
		best = max(best, measure())
		if best >= lo {
			break
		}
	}
	return best
}
