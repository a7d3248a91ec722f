package gpu

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// recorded is the inventory `commlab gpu inventory --json` wrote on an
// NVIDIA H200 (see docs/gpu-validation.md).
func recorded(t *testing.T) *Inventory {
	t.Helper()
	inv, err := ReadInventoryFile("testdata/h200/inventory.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.GPUs) == 0 {
		t.Fatal("recorded inventory has no GPU")
	}
	return inv
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "h200", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func findings(r Report, gpu int, check string) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.GPU == gpu && f.Check == check {
			out = append(out, f)
		}
	}
	return out
}

// The health rules on the inventory recorded on the H200, as it was and
// with one fault written into it at a time.
func TestHealthRulesOnRecordedH200(t *testing.T) {
	cases := []struct {
		name  string
		fault func(g *GPU)
		xids  func(g GPU) []XidEvent
		check string
		want  Severity
		text  string // in the summary
	}{
		{"as recorded: link", nil, nil, "pcie-link", -1, ""},
		{"as recorded: ecc", nil, nil, "ecc", OK, "ECC on"},
		{"as recorded: xid", nil, nil, "xid", OK, "no Xid"},
		{"link trained x8", func(g *GPU) { g.PCIe.CurWidth = 8 }, nil, "pcie-link", Fail, "x8, its maximum is x16"},
		{"Gen1 while busy", func(g *GPU) { g.PCIe.CurGen = 1; g.UtilGPU = 97; g.Pstate = 0 }, nil, "pcie-link", Fail, "while the GPU is busy"},
		{"Gen1 at idle", func(g *GPU) { g.PCIe.CurGen = 1; g.UtilGPU = 0; g.Clocks.Reasons = reasonIdle }, nil, "pcie-link", Info, "at idle"},
		{"Gen1 in P0, clocks not idle", func(g *GPU) { g.PCIe.CurGen = 1; g.UtilGPU = 0; g.Pstate = 0; g.Clocks.Reasons = 0 }, nil, "pcie-link", Fail, "while the GPU is busy"},
		{"slot caps the GPU", func(g *GPU) { g.PCIe.MaxGen = 4 }, nil, "pcie-slot", Warn, "allows Gen4"},
		{"PCIe replays", func(g *GPU) { g.PCIe.Replays = 12 }, nil, "pcie-replay", Warn, "12 PCIe replays"},
		{"uncorrected ECC", func(g *GPU) { g.ECC.VolatileUncorrected = 2 }, nil, "ecc", Fail, "2 uncorrected"},
		{"remap pending", func(g *GPU) { g.ECC.RemapSupported = true; g.ECC.RemapPending = true; g.ECC.RemapUncorrectable = 1 }, nil, "memory-repair", Warn, "pending"},
		{"remap failure", func(g *GPU) { g.ECC.RemapSupported = true; g.ECC.RemapFailure = true }, nil, "memory-repair", Fail, "failed"},
		{"HW slowdown", func(g *GPU) { g.Clocks.Reasons = reasonHwSlowdown }, nil, "clocks", Fail, "HW slowdown"},
		{"SW thermal", func(g *GPU) { g.Clocks.Reasons = reasonSwThermal }, nil, "clocks", Warn, "software thermal"},
		{"Xid 79", nil, func(g GPU) []XidEvent { return []XidEvent{{BusID: g.BusID, Xid: 79, Source: "nvml"}} }, "xid", Fail, "Xid 79"},
		{"Xid 13 (application)", nil, func(g GPU) []XidEvent { return []XidEvent{{BusID: g.BusID, Xid: 13, Source: "nvml"}} }, "xid", Warn, "Xid 13"},
		{"Xid from the kernel log", nil, func(g GPU) []XidEvent {
			return []XidEvent{{BusID: g.BusID[:len(g.BusID)-2], Xid: 48, Source: "kernel log"}}
		}, "xid", Fail, "Xid 48 (kernel log)"},
		{"Xid on another GPU", nil, func(g GPU) []XidEvent { return []XidEvent{{BusID: "0000:ff:00.0", Xid: 79}} }, "xid", OK, "no Xid"},
		{"NVLink partly down", func(g *GPU) {
			g.NVLinks = []NVLink{{Link: 0, Active: true, Version: 4}, {Link: 1, Active: false}}
		}, nil, "nvlink", Fail, "1 of 2 links inactive"},
		{"NVLink CRC errors", func(g *GPU) {
			g.NVLinks = []NVLink{{Link: 0, Active: true, Version: 4, Errors: map[string]uint64{"crc_flit": 5}}}
		}, nil, "nvlink-errors", Warn, "crc_flit 5"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inv := recorded(t)
			g := &inv.GPUs[0]
			if c.fault != nil {
				c.fault(g)
			}
			var xids []XidEvent
			if c.xids != nil {
				xids = c.xids(*g)
			}
			rep := Check(inv, xids)
			fs := findings(rep, 0, c.check)
			if len(fs) != 1 {
				t.Fatalf("%d %s findings: %+v", len(fs), c.check, rep.Findings)
			}
			f := fs[0]
			if c.want >= 0 && f.Severity != c.want {
				t.Errorf("severity %s, want %s: %+v", f.Severity, c.want, f)
			}
			if !strings.Contains(f.Summary, c.text) {
				t.Errorf("summary %q lacks %q", f.Summary, c.text)
			}
			if f.Severity == Fail && rep.Healthy() {
				t.Error("a failure left the node healthy")
			}
			if f.Severity >= Warn && f.Hint == "" {
				t.Errorf("no hint for %+v", f)
			}
		})
	}
}

// The report and matrix for the recorded H200, against golden files.
func TestGoldenOnRecordedH200(t *testing.T) {
	inv := recorded(t)
	var b bytes.Buffer
	if err := BuildMatrix(inv, MatrixOptions{}).Write(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "topo.golden", b.Bytes())
	b.Reset()
	m := BuildMatrix(inv, MatrixOptions{AllNICs: true})
	m.Plain = true
	if err := m.Write(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "topo-all-nics.golden", b.Bytes())
	b.Reset()
	rep := Check(inv, nil)
	rep.XidWatched = "none (recorded inventory)"
	if err := rep.Write(&b, inv); err != nil {
		t.Fatal(err)
	}
	golden(t, "health.golden", b.Bytes())
}

// The matrix of the recorded inventory is byte for byte what nvidia-smi
// topo -m printed on the same H200, underline escapes and tabs included.
func TestTopoMatchesNvidiaSmiRecordedH200(t *testing.T) {
	want, err := os.ReadFile("testdata/h200/nvidia-smi-topo-m.txt")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := BuildMatrix(recorded(t), MatrixOptions{}).Write(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("commlab gpu topo:\n%q\nnvidia-smi topo -m:\n%q", b.String(), want)
	}
}
