package gpu

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// pcieScript measures copy bandwidth with PyTorch; see its docstring.
//
//go:embed pcie_bw.py
var pcieScript []byte

// PCIeScript returns the embedded bandwidth script (gpu/pcie_bw.py).
func PCIeScript() []byte { return bytes.Clone(pcieScript) }

// lane is the raw rate of one lane and the share of it that carries data
// after line encoding.
type lane struct {
	gts      float64
	encoding string
	eff      float64
}

var pcieLanes = map[int]lane{
	1: {2.5, "8b/10b", 8.0 / 10},
	2: {5, "8b/10b", 8.0 / 10},
	3: {8, "128b/130b", 128.0 / 130},
	4: {16, "128b/130b", 128.0 / 130},
	5: {32, "128b/130b", 128.0 / 130},
	// Gen6 signals PAM4 in 256-byte FLITs of which 242 carry data (the rest
	// is FEC and CRC); counted the same way.
	6: {64, "FLIT 242B/256B", 242.0 / 256},
}

// PCIeCeiling is the most data a link can carry per direction, in GB/s
// (1e9 bytes/s): per-lane GT/s × lanes × encoding efficiency / 8 bits. It
// also returns the formula, for reports.
func PCIeCeiling(gen, width int) (float64, string, error) {
	l, ok := pcieLanes[gen]
	if !ok {
		return 0, "", fmt.Errorf("PCIe generation %d: want 1 to 6", gen)
	}
	if width <= 0 || width > 32 {
		return 0, "", fmt.Errorf("PCIe width x%d: want x1 to x32", width)
	}
	gbps := l.gts * float64(width) * l.eff / 8
	return gbps, fmt.Sprintf("%g GT/s × %d lanes × %s / 8 = %.1f GB/s per direction", l.gts, width, l.encoding, gbps), nil
}

// CopyRun is one measurement of the script.
type CopyRun struct {
	Mode    string  `json:"mode"` // pinned or pageable
	Dir     string  `json:"dir"`  // h2d, d2h or bidir
	Bytes   int64   `json:"bytes"`
	Iters   int     `json:"iters"`
	Seconds float64 `json:"seconds"`
	GBps    float64 `json:"gbps"`
}

// ScriptInfo is what the script says about where it ran.
type ScriptInfo struct {
	Python string `json:"python"`
	Torch  string `json:"torch"`
	CUDA   string `json:"cuda"`
	Name   string `json:"name"`
	Device int    `json:"device"`
}

// ParseCopyOutput reads the script's JSON lines. Lines that are not JSON
// (warnings a library prints) are skipped; an {"error": ...} line is returned
// as an error.
func ParseCopyOutput(r io.Reader) (ScriptInfo, []CopyRun, error) {
	var info ScriptInfo
	var runs []CopyRun
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(t, "{") {
			continue
		}
		var rec struct {
			Info  *ScriptInfo `json:"info"`
			Error string      `json:"error"`
			CopyRun
		}
		if err := json.Unmarshal([]byte(t), &rec); err != nil {
			return info, runs, fmt.Errorf("bandwidth script output line %d: %w", line, err)
		}
		switch {
		case rec.Error != "":
			return info, runs, fmt.Errorf("bandwidth script: %s", rec.Error)
		case rec.Info != nil:
			info = *rec.Info
		case rec.Dir != "":
			runs = append(runs, rec.CopyRun)
		}
	}
	if err := sc.Err(); err != nil {
		return info, runs, fmt.Errorf("read bandwidth script output: %w", err)
	}
	if len(runs) == 0 {
		return info, runs, fmt.Errorf("bandwidth script printed no measurement")
	}
	return info, runs, nil
}

// PCIeResult sets measured copy bandwidth against the link NVML reports.
type PCIeResult struct {
	GPU   int    `json:"gpu"`
	Name  string `json:"name"`
	BusID string `json:"bus_id"`
	// IdleGen/IdleWidth were read before the copies, Gen/Width are the
	// highest read while they ran, MaxGen/MaxWidth what the link can reach.
	IdleGen   int `json:"idle_gen"`
	IdleWidth int `json:"idle_width"`
	Gen       int `json:"gen"`
	Width     int `json:"width"`
	MaxGen    int `json:"max_gen"`
	MaxWidth  int `json:"max_width"`
	Samples   int `json:"samples"` // NVML link readings taken during the copies
	// CeilingGBps is the ceiling of the link as it ran; MaxCeilingGBps of the
	// link at its maximum.
	CeilingGBps    float64    `json:"ceiling_gbps"`
	MaxCeilingGBps float64    `json:"max_ceiling_gbps"`
	Formula        string     `json:"formula"`
	Script         ScriptInfo `json:"script"`
	Runs           []CopyRun  `json:"runs"`
}

// Best returns the highest bandwidth measured for a mode and direction.
func (r *PCIeResult) Best(mode, dir string) float64 {
	best := 0.0
	for _, c := range r.Runs {
		if c.Mode == mode && c.Dir == dir && c.GBps > best {
			best = c.GBps
		}
	}
	return best
}

// PCIeOptions configure MeasurePCIe.
type PCIeOptions struct {
	GPU      int           // NVML index
	Python   string        // interpreter with PyTorch; "" means python3
	Sizes    string        // e.g. "16M,64M,256M,1G"; "" means the script's default
	Iters    int           // 0 means the script's default
	Pageable bool          // also measure pageable host memory
	Timeout  time.Duration // 0 means 3 minutes
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// Write prints the measurement against the ceiling.
func (r *PCIeResult) Write(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "GPU%d %s  %s\n", r.GPU, r.Name, r.BusID)
	fmt.Fprintf(&b, "link (NVML): Gen%d x%d during the copies (%d readings); Gen%d x%d before them; maximum Gen%d x%d\n",
		r.Gen, r.Width, r.Samples, r.IdleGen, r.IdleWidth, r.MaxGen, r.MaxWidth)
	fmt.Fprintf(&b, "ceiling: %s\n", r.Formula)
	if r.MaxCeilingGBps > r.CeilingGBps+0.05 {
		fmt.Fprintf(&b, "         the link can reach Gen%d x%d = %.1f GB/s: it ran below its maximum\n", r.MaxGen, r.MaxWidth, r.MaxCeilingGBps)
	}
	fmt.Fprintf(&b, "measured with PyTorch %s, CUDA %s, Python %s (CUDA events around copy_(non_blocking=True)):\n",
		r.Script.Torch, r.Script.CUDA, r.Script.Python)
	fmt.Fprintf(&b, "  %-9s %-6s %10s %10s %10s\n", "memory", "dir", "size", "GB/s", "of ceiling")
	runs := append([]CopyRun(nil), r.Runs...)
	sort.SliceStable(runs, func(i, j int) bool {
		if runs[i].Mode != runs[j].Mode {
			return runs[i].Mode > runs[j].Mode // pinned first
		}
		return runs[i].Dir < runs[j].Dir
	})
	for _, c := range runs {
		ceil := r.CeilingGBps
		if c.Dir == "bidir" {
			ceil *= 2
		}
		fmt.Fprintf(&b, "  %-9s %-6s %10s %10.1f %9.0f%%\n", c.Mode, c.Dir, sizeText(c.Bytes), c.GBps, 100*c.GBps/ceil)
	}
	h2d, d2h, bi := r.Best("pinned", "h2d"), r.Best("pinned", "d2h"), r.Best("pinned", "bidir")
	fmt.Fprintf(&b, "best pinned: host->device %.1f GB/s (%.0f%% of %.1f), device->host %.1f GB/s (%.0f%%), both at once %.1f GB/s (%.0f%% of %.1f)\n",
		h2d, 100*h2d/r.CeilingGBps, r.CeilingGBps, d2h, 100*d2h/r.CeilingGBps, bi, 50*bi/r.CeilingGBps, 2*r.CeilingGBps)
	b.WriteString("practical fraction: every 256-byte payload travels with about 20-26 bytes of TLP header, sequence number and CRC, plus\n" +
		"flow-control and ACK packets, so well-behaved pinned copies reach roughly 80-90% of the ceiling. Much less points at\n" +
		"a link trained below its maximum, pageable (unpinned) buffers, a buffer on the far NUMA node, or an IOMMU in the path.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func sizeText(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
