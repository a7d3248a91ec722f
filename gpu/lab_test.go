//go:build linux && cgo

package gpu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestForLab picks the first GPUs in NVML order and finds the driver's library
// directory from the process's mappings.
func TestForLab(t *testing.T) {
	n, err := open(mockDGXH200(t, nil), Sysfs{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	maps := filepath.Join(t.TempDir(), "maps")
	if err := os.WriteFile(maps, []byte(strings.Join([]string{
		"7f0a1c000000-7f0a1c021000 r--p 00000000 00:00 0 ",
		"7f0a1c200000-7f0a1c3ff000 r-xp 00000000 fd:01 1234 /usr/lib/x86_64-linux-gnu/libc.so.6",
		"7f0a1d000000-7f0a1d2ff000 r-xp 00000000 fd:01 5678 /usr/local/nvidia/lib64/libnvidia-ml.so.580.159.04",
	}, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		want    int
		uuids   int
		wantErr string
	}{
		{want: 1, uuids: 1},
		{want: 8, uuids: 8},
		{want: 9, wantErr: "needs 9 GPUs in one node, this host has 8"},
	} {
		got, err := n.forLab(tt.want, maps)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("forLab(%d) error = %v, want %q", tt.want, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("forLab(%d): %v", tt.want, err)
		}
		if len(got.UUIDs) != tt.uuids || !strings.HasPrefix(got.UUIDs[0], "GPU-") {
			t.Errorf("forLab(%d) UUIDs = %v", tt.want, got.UUIDs)
		}
		if got.DriverLibDir != "/usr/local/nvidia/lib64" {
			t.Errorf("DriverLibDir = %q, want /usr/local/nvidia/lib64", got.DriverLibDir)
		}
	}
	if d := loadedFrom(filepath.Join(t.TempDir(), "none"), "libnvidia-ml.so"); d != "" {
		t.Errorf("no maps file: %q", d)
	}
}
