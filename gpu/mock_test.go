//go:build linux && cgo

package gpu

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

func busIDBytes(s string) [32]int8 {
	var b [32]int8
	for i := 0; i < len(s) && i < 31; i++ {
		b[i] = int8(s[i])
	}
	return b
}

// mockDGXH200 is go-nvml's mock DGX H200 (8 × H200), completed with what the
// collector reads and the mock leaves unset. Each GPU has 18 NVLinks into
// NVSwitches, as on the real system; down[gpu] lists links to report
// inactive. GPUs 0-3 sit on NUMA node 0, 4-7 on node 1.
func mockDGXH200(t *testing.T, down map[int][]int) *server.Server {
	t.Helper()
	s := dgxh200.New()
	for i, dd := range s.Devices {
		d := dd.(*server.Device)
		idx := i
		isDown := map[int]bool{}
		for _, l := range down[idx] {
			isDown[l] = true
		}
		d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			return nvml.PciInfo{BusId: busIDBytes(strings.ToUpper("0000" + d.PciBusID)), PciDeviceId: d.Config.PciDeviceId}, nvml.SUCCESS
		}
		d.GetCpuAffinityFunc = func(n int) ([]uint, nvml.Return) {
			w := make([]uint, n)
			if idx < 4 {
				w[0] = 0xffff
			} else {
				w[0] = 0xffff0000
			}
			return w, nvml.SUCCESS
		}
		d.GetMemoryAffinityFunc = func(int, nvml.AffinityScope) ([]uint, nvml.Return) {
			return []uint{1 << uint(idx/4)}, nvml.SUCCESS
		}
		d.GetNumaNodeIdFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		d.GetTopologyCommonAncestorFunc = func(o nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
			j := o.(*server.Device).Index
			if (idx < 4) == (j < 4) {
				return nvml.TOPOLOGY_NODE, nvml.SUCCESS
			}
			return nvml.TOPOLOGY_SYSTEM, nvml.SUCCESS
		}
		d.GetCurrPcieLinkGenerationFunc = func() (int, nvml.Return) { return 5, nvml.SUCCESS }
		d.GetMaxPcieLinkGenerationFunc = func() (int, nvml.Return) { return 5, nvml.SUCCESS }
		d.GetGpuMaxPcieLinkGenerationFunc = func() (int, nvml.Return) { return 5, nvml.SUCCESS }
		d.GetCurrPcieLinkWidthFunc = func() (int, nvml.Return) { return 16, nvml.SUCCESS }
		d.GetMaxPcieLinkWidthFunc = func() (int, nvml.Return) { return 16, nvml.SUCCESS }
		d.GetPcieThroughputFunc = func(nvml.PcieUtilCounter) (uint32, nvml.Return) { return 0, nvml.SUCCESS }
		d.GetPcieReplayCounterFunc = func() (int, nvml.Return) { return 0, nvml.SUCCESS }
		d.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
			if l >= 18 {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			if isDown[l] {
				return nvml.FEATURE_DISABLED, nvml.SUCCESS
			}
			return nvml.FEATURE_ENABLED, nvml.SUCCESS
		}
		d.GetNvLinkVersionFunc = func(int) (uint32, nvml.Return) { return 4, nvml.SUCCESS }
		d.GetNvLinkRemotePciInfoFunc = func(l int) (nvml.PciInfo, nvml.Return) {
			// Four NVSwitches; link l goes to switch l%4.
			return nvml.PciInfo{BusId: busIDBytes(fmt.Sprintf("00000000:%02X:00.0", 0x80+l%4))}, nvml.SUCCESS
		}
		d.GetNvLinkRemoteDeviceTypeFunc = func(int) (nvml.IntNvLinkDeviceType, nvml.Return) {
			return nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS
		}
		d.GetNvLinkErrorCounterFunc = func(int, nvml.NvLinkErrorCounter) (uint64, nvml.Return) { return 0, nvml.SUCCESS }
		d.GetEccModeFunc = func() (nvml.EnableState, nvml.EnableState, nvml.Return) {
			return nvml.FEATURE_ENABLED, nvml.FEATURE_ENABLED, nvml.SUCCESS
		}
		d.GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) { return 0, nvml.SUCCESS }
		d.GetRetiredPagesFunc = func(nvml.PageRetirementCause) ([]uint64, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
		d.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 0, false, false, nvml.SUCCESS }
		d.GetClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) { return 1980, nvml.SUCCESS }
		d.GetMaxClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) { return 1980, nvml.SUCCESS }
		d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return 0, nvml.SUCCESS }
		d.GetPerformanceStateFunc = func() (nvml.Pstates, nvml.Return) { return nvml.PSTATE_0, nvml.SUCCESS }
		d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 100}, nvml.SUCCESS }
		d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 40, nvml.SUCCESS }
		d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 500000, nvml.SUCCESS }
	}
	return s
}

func mockInventory(t *testing.T, down map[int][]int) *Inventory {
	t.Helper()
	n, err := open(mockDGXH200(t, down), Sysfs{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	inv, err := n.Snapshot(context.Background(), SnapshotOptions{Throughput: true})
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// The collector and the matrix on go-nvml's mock DGX H200: NVSwitch-connected
// GPUs show NV18 (18 links each), a GPU with a dead link NV17, a GPU with
// every link dead falls back to NVML's PCI ancestor, and health fails on the
// GPUs with dead links only.
func TestMockDGXH200FromGoNVML(t *testing.T) {
	cases := []struct {
		name     string
		down     map[int][]int
		cell     map[[2]int]string // (row, col) -> want
		failGPUs []int
	}{
		{"all links up", nil,
			map[[2]int]string{{0, 1}: "NV18", {0, 7}: "NV18", {3, 4}: "NV18", {6, 6}: "X"}, nil},
		{"GPU3 link 5 down", map[int][]int{3: {5}},
			map[[2]int]string{{3, 0}: "NV17", {0, 3}: "NV17", {0, 1}: "NV18"}, []int{3}},
		{"GPU5 all links down", map[int][]int{5: {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}},
			map[[2]int]string{{5, 4}: "NODE", {5, 0}: "SYS", {0, 5}: "SYS", {4, 6}: "NV18"}, []int{5}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inv := mockInventory(t, tc.down)
			if len(inv.GPUs) != 8 {
				t.Fatalf("got %d GPUs, want 8", len(inv.GPUs))
			}
			if got := inv.GPUs[2].BusID; got != "0000:02:00.0" {
				t.Errorf("GPU2 bus id %q, want 0000:02:00.0 (the mock's, normalised)", got)
			}
			m := BuildMatrix(inv, MatrixOptions{})
			for rc, want := range tc.cell {
				if got := m.Cells[rc[0]][rc[1]]; got != want {
					t.Errorf("cell GPU%d-GPU%d = %q, want %q", rc[0], rc[1], got, want)
				}
			}
			if m.CPUAffinity[0] != "0-15" || m.CPUAffinity[4] != "16-31" || m.NUMAAffinity[3] != "0" || m.NUMAAffinity[4] != "1" {
				t.Errorf("CPU affinity %v, NUMA affinity %v", m.CPUAffinity, m.NUMAAffinity)
			}
			rep := Check(inv, nil)
			var failed []int
			for _, f := range rep.Findings {
				if f.Severity == Fail {
					if f.Check != "nvlink" {
						t.Errorf("unexpected failure %+v", f)
					}
					failed = append(failed, f.GPU)
				}
			}
			if fmt.Sprint(failed) != fmt.Sprint(tc.failGPUs) {
				t.Errorf("failing GPUs %v, want %v", failed, tc.failGPUs)
			}
		})
	}
}

// Xid events from go-nvml's mock event set reach the report, with the GPU's address.
func TestMockDGXH200XidWatchFromGoNVML(t *testing.T) {
	s := mockDGXH200(t, nil)
	delivered := false
	s.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mockEventSet{wait: func(uint32) (nvml.EventData, nvml.Return) {
			if delivered {
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
			delivered = true
			return nvml.EventData{Device: s.Devices[6], EventType: nvml.EventTypeXidCriticalError, EventData: 79}, nvml.SUCCESS
		}}, nvml.SUCCESS
	}
	for _, d := range s.Devices {
		d.(*server.Device).RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	}
	n, err := open(s, Sysfs{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ev, err := n.WatchXid(context.Background(), 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev) != 1 || ev[0].Xid != 79 || ev[0].BusID != "0000:06:00.0" {
		t.Fatalf("events %+v, want one Xid 79 on 0000:06:00.0", ev)
	}
	inv, err := n.Snapshot(context.Background(), SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rep := Check(inv, ev)
	for _, f := range rep.Findings {
		if f.Check == "xid" && (f.GPU == 6) != (f.Severity == Fail) {
			t.Errorf("xid finding %+v", f)
		}
	}
}

type mockEventSet struct {
	nvml.EventSet
	wait func(uint32) (nvml.EventData, nvml.Return)
}

func (m *mockEventSet) Wait(ms uint32) (nvml.EventData, nvml.Return) { return m.wait(ms) }
func (m *mockEventSet) Free() nvml.Return                            { return nvml.SUCCESS }
