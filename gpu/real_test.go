//go:build unix

package gpu

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openReal opens the host's NVML, skipping where there is no GPU (CI).
func openReal(tb testing.TB) *NVML {
	tb.Helper()
	n, err := Open()
	if errors.Is(err, ErrNoDriver) {
		tb.Skipf("no GPU here: %v", err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { n.Close() })
	return n
}

// On a GPU node: the real NVML snapshot names every GPU by UUID and PCI
// address, the sysfs path ends at that address, and an Xid watch returns.
func TestRealNVMLSnapshot(t *testing.T) {
	n := openReal(t)
	ctx := context.Background()
	inv, err := n.Snapshot(ctx, SnapshotOptions{Throughput: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.GPUs) == 0 {
		t.Fatal("NVML opened but lists no GPU")
	}
	for _, g := range inv.GPUs {
		if g.UUID == "" || !bdfRe.MatchString(g.BusID) {
			t.Errorf("GPU%d: UUID %q, bus id %q", g.Index, g.UUID, g.BusID)
		}
		if len(g.PCIPath) == 0 || g.PCIPath[len(g.PCIPath)-1] != g.BusID {
			t.Errorf("GPU%d: sysfs path %v does not end at %s", g.Index, g.PCIPath, g.BusID)
		}
		if g.PCIe.MaxWidth == 0 || g.PCIe.MaxGen == 0 {
			t.Errorf("GPU%d: PCIe max Gen%d x%d", g.Index, g.PCIe.MaxGen, g.PCIe.MaxWidth)
		}
		t.Logf("GPU%d %s %s PCIe Gen%d x%d (max Gen%d x%d) nvlinks %d unsupported %v",
			g.Index, g.Name, g.BusID, g.PCIe.CurGen, g.PCIe.CurWidth, g.PCIe.MaxGen, g.PCIe.MaxWidth, len(g.NVLinks), g.Unsupported)
	}
	if _, err := n.WatchXid(ctx, 500*time.Millisecond); err != nil {
		t.Errorf("watch Xid: %v", err)
	}
}

func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkNVMLSample measures what monitoring costs: one reading of every
// GPU, reported per GPU as wall time, CPU time, and the CPU share that
// reading once a second takes. "snapshot" reads everything health needs;
// "+throughput" adds the PCIe throughput counters, which NVML samples over
// 20 ms each.
func BenchmarkNVMLSample(b *testing.B) {
	n := openReal(b)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opt  SnapshotOptions
	}{
		{"snapshot", SnapshotOptions{}},
		{"snapshot+throughput", SnapshotOptions{Throughput: true}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			gpus := 0
			cpu0, wall0 := cpuTime(), time.Now()
			iters := 0
			for b.Loop() {
				inv, err := n.Snapshot(ctx, tc.opt)
				if err != nil {
					b.Fatal(err)
				}
				gpus = len(inv.GPUs)
				iters++
			}
			wall, cpu := time.Since(wall0), cpuTime()-cpu0
			per := float64(iters * max(gpus, 1))
			b.ReportMetric(wall.Seconds()*1e3/per, "wall-ms/GPU/sample")
			b.ReportMetric(cpu.Seconds()*1e3/per, "cpu-ms/GPU/sample")
			b.ReportMetric(100*cpu.Seconds()/per, "cpu-%/GPU@1Hz")
		})
	}
}
