package nccl

import (
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
)

// The logs recorded on the H200 (testdata/README.md): a healthy world-size-1
// run, NCCL_SOCKET_IFNAME naming no interface, and two ranks on one GPU.
func TestParseRecordedH200(t *testing.T) {
	t.Run("healthy init", func(t *testing.T) {
		l := parseFile(t, "testdata/h200/nccl-info.log")
		if l.Version != "2.28.9+cuda13.0" || l.CUDADriver != 13000 {
			t.Errorf("version %q, CUDA driver %d", l.Version, l.CUDADriver)
		}
		want := []Rank{{Comm: "0xd403c80", CommID: "0xf0b353cbe752cd18", Rank: 0, NRanks: 1, Host: "vm", PID: 758, CUDADev: 0, NVMLDev: 0, BusID: "60", Complete: true}}
		if !reflect.DeepEqual(l.Ranks, want) {
			t.Errorf("ranks %+v", l.Ranks)
		}
		if l.Ranks[0].PCIBusID() != "0000:00:06.0" {
			t.Errorf("bus id %s, want 0000:00:06.0 (nvidia-smi's)", l.Ranks[0].PCIBusID())
		}
		if l.Network != "Socket" || !reflect.DeepEqual(l.SocketIfs, []string{"[0]eth0:192.0.2.2<0>"}) || len(l.IBDevs) != 0 ||
			!reflect.DeepEqual(l.Bootstrap, []string{"eth0:192.0.2.2<0>"}) {
			t.Errorf("network %q socket %v ib %v bootstrap %v", l.Network, l.SocketIfs, l.IBDevs, l.Bootstrap)
		}
		if l.Env["NCCL_NVLS_ENABLE"] != "0" {
			t.Errorf("env %v", l.Env)
		}
		if l.Channels == nil || *l.Channels != (ChannelCounts{Coll: 64, CollNet: 64, NVLS: 0, P2P: 64, P2PPerPeer: 64}) {
			t.Errorf("channels %+v", l.Channels)
		}
		if len(l.Rings) != 64 || !reflect.DeepEqual(l.Rings[63].Order, []int{0}) || len(l.Transports) != 0 || l.NNodes != 1 {
			t.Errorf("%d rings, %d transports, %d nodes", len(l.Rings), len(l.Transports), l.NNodes)
		}
		if l.Failed() || len(l.Notes) != 1 || !strings.Contains(l.Notes[0].Text, "NET/IB : No device found") {
			t.Errorf("warnings %+v errors %+v notes %+v", l.Warnings, l.Errors, l.Notes)
		}
	})
	t.Run("no socket interface", func(t *testing.T) {
		l := parseFile(t, "testdata/h200/nccl-bad-ifname.log")
		if l.Env["NCCL_SOCKET_IFNAME"] != "cl-nosuch" || l.Version != "2.28.9" {
			t.Errorf("env %v version %q", l.Env, l.Version)
		}
		if len(l.Warnings) != 1 || l.Warnings[0].Source != "bootstrap.cc:114" || !strings.Contains(l.Warnings[0].Meaning, "NCCL_SOCKET_IFNAME") {
			t.Errorf("warnings %+v", l.Warnings)
		}
		if l.Codes[InvalidUsage] != 3 || len(l.Codes) != 1 {
			t.Errorf("codes %v", l.Codes)
		}
		if !reflect.DeepEqual(l.LastError, []string{"Bootstrap : no socket interface found"}) {
			t.Errorf("last error %q", l.LastError)
		}
	})
	t.Run("two ranks on one GPU", func(t *testing.T) {
		l := parseFile(t, "testdata/h200/nccl-dup-gpu.log")
		if len(l.Ranks) != 2 || l.Ranks[0].Group() != l.Ranks[1].Group() || l.Ranks[0].Complete || l.Ranks[1].Complete {
			t.Errorf("ranks %+v", l.Ranks)
		}
		if len(l.Warnings) != 2 || !strings.Contains(l.Warnings[0].Text, "Duplicate GPU detected") || !strings.Contains(l.Warnings[0].Check, "set_device") {
			t.Errorf("warnings %+v", l.Warnings)
		}
		if l.Codes[InvalidUsage] < 2 || len(l.LastError) != 2 {
			t.Errorf("codes %v last error %v", l.Codes, l.LastError)
		}
	})
}

// The table the embedded script printed on the H200 parses, and its numbers
// follow nccl-tests' definitions: algbw = bytes / time, busbw = algbw ×
// factor (0 for one rank, 1 for broadcast), the average is over both halves.
func TestTablesRecordedH200(t *testing.T) {
	f, err := os.Open("testdata/h200/nccl-info.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	benches, err := ParseTables(f)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range benches {
		names = append(names, b.Name)
	}
	if !reflect.DeepEqual(names, []string{"all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall"}) {
		t.Fatalf("benches %v", names)
	}
	const n = 1
	for _, b := range benches {
		factor, err := BusBWFactor(b.Name, n)
		if err != nil {
			t.Fatal(err)
		}
		sum, cnt := 0.0, 0
		for _, r := range b.Rows {
			bytes := float64(r.Count) * 4 // float
			if b.Name != "all_reduce" && b.Name != "broadcast" {
				bytes *= n
			}
			for half, p := range []Perf{r.OutOfPlace, r.InPlace} {
				if p.NA {
					if b.Name != "alltoall" || half != 1 {
						t.Errorf("%s size %d: N/A half %d", b.Name, r.Size, half)
					}
					continue
				}
				if p.Wrong != 0 {
					t.Errorf("%s size %d: #wrong %d", b.Name, r.Size, p.Wrong)
				}
				alg := bytes / p.TimeUs / 1e3
				// The table rounds time to 4 significant digits and bandwidths to 2 decimals.
				if math.Abs(alg-p.AlgBW) > 0.006+alg*2e-3 {
					t.Errorf("%s size %d: algbw %.2f, bytes/time gives %.3f", b.Name, r.Size, p.AlgBW, alg)
				}
				if math.Abs(p.BusBW-p.AlgBW*factor) > 0.006 {
					t.Errorf("%s size %d: busbw %.2f, algbw × %g = %.2f", b.Name, r.Size, p.BusBW, factor, p.AlgBW*factor)
				}
				sum += p.BusBW
				cnt++
			}
		}
		if !b.HasAvg || math.Abs(b.AvgBusBW-sum/float64(cnt)) > 0.01 {
			t.Errorf("%s: avg busbw %v, rows give %v", b.Name, b.AvgBusBW, sum/float64(cnt))
		}
	}
}

// Explain on the recorded logs: golden files, so a change in wording is seen.
func TestExplainRecordedH200(t *testing.T) {
	for _, name := range []string{"nccl-info", "nccl-bad-ifname", "nccl-dup-gpu"} {
		var b strings.Builder
		if err := parseFile(t, "testdata/h200/"+name+".log").Explain(&b); err != nil {
			t.Fatal(err)
		}
		golden(t, "testdata/h200/"+name+".explain.golden", b.String())
	}
}
