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

func TestThroughput(t *testing.T) {
	tests := []struct {
		name      string
		runs      []float64
		want      float64
		wantCalls int
	}{
		{"first run good", []float64{35, 10}, 35, 1},
		{"slow once, then good", []float64{12, 36, 50}, 36, 2},
		{"always slow: best of all", []float64{12, 20, 15}, 20, 3},
		{"too fast is kept", []float64{90}, 90, 1},
	}
	for _, tt := range tests {
		calls := 0
		got := Throughput(3, 30, func() float64 { calls++; return tt.runs[calls-1] })
		if got != tt.want || calls != tt.wantCalls {
			t.Errorf("%s: got %v after %d runs, want %v after %d", tt.name, got, calls, tt.want, tt.wantCalls)
		}
	}
}
