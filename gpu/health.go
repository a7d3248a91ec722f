package gpu

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Severity ranks a finding.
type Severity int

// Severities, from good to bad. Only Fail makes a node unhealthy.
const (
	OK Severity = iota
	Info
	Warn
	Fail
)

func (s Severity) String() string {
	switch s {
	case OK:
		return "ok"
	case Info:
		return "info"
	case Warn:
		return "warn"
	default:
		return "FAIL"
	}
}

// MarshalText makes severities readable in JSON.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Finding is the result of one health rule on one GPU.
type Finding struct {
	GPU      int      `json:"gpu"` // -1 for the node
	Check    string   `json:"check"`
	Severity Severity `json:"severity"`
	Summary  string   `json:"summary"`
	// Hint says what the finding means and what to check next.
	Hint string `json:"hint,omitempty"`
}

// Report is the outcome of the health rules.
type Report struct {
	Findings []Finding `json:"findings"`
	// XidWatched says how Xid events were looked for, e.g. "NVML events for
	// 2s; kernel log".
	XidWatched string `json:"xid_watched"`
}

// Healthy says whether no finding is a failure.
func (r Report) Healthy() bool { return r.Count(Fail) == 0 }

// Count returns how many findings have severity s.
func (r Report) Count(s Severity) int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == s {
			n++
		}
	}
	return n
}

// XidEvent is one Xid error a GPU reported.
type XidEvent struct {
	BusID  string `json:"bus_id"` // sysfs form, 0000:18:00.0
	Xid    uint64 `json:"xid"`
	Source string `json:"source"` // "nvml" (during the watch) or "kernel log"
	Text   string `json:"text,omitempty"`
}

// Clock event reasons (nvml.ClocksEventReason*), named here so the rules
// read without NVML.
const (
	reasonIdle          = 0x1
	reasonAppClocks     = 0x2
	reasonSwPowerCap    = 0x4
	reasonHwSlowdown    = 0x8
	reasonSyncBoost     = 0x10
	reasonSwThermal     = 0x20
	reasonHwThermal     = 0x40
	reasonHwPowerBrake  = 0x80
	reasonDisplayClocks = 0x100
)

var reasonNames = []struct {
	bit  uint64
	name string
}{
	{reasonIdle, "idle"},
	{reasonAppClocks, "applications clocks setting"},
	{reasonSwPowerCap, "software power cap"},
	{reasonHwSlowdown, "HW slowdown"},
	{reasonSyncBoost, "sync boost"},
	{reasonSwThermal, "software thermal slowdown"},
	{reasonHwThermal, "HW thermal slowdown"},
	{reasonHwPowerBrake, "HW power brake slowdown"},
	{reasonDisplayClocks, "display clocks setting"},
}

// ReasonNames spells out a clocks-event reason mask.
func ReasonNames(mask uint64) []string {
	var out []string
	for _, r := range reasonNames {
		if mask&r.bit != 0 {
			out = append(out, r.name)
		}
	}
	if len(out) == 0 {
		out = []string{"none"}
	}
	return out
}

// Check runs the health rules on an inventory and the Xid events seen.
//
// Failures: a PCIe link narrower than its maximum width; a PCIe generation
// below its maximum while the GPU is busy; an NVLink down while others are up
// (on that GPU or on the node); uncorrected ECC errors since the driver
// loaded; a row-remapping failure; HW slowdown, HW thermal or power-brake
// clock reasons; an Xid other than those applications cause (13, 31, 43, 45).
// Warnings: PCIe replays, NVLink error counters, ECC off, pending page
// retirement or row remap, software thermal slowdown, application Xids.
func Check(inv *Inventory, xids []XidEvent) Report {
	var r Report
	if len(inv.GPUs) == 0 {
		r.Findings = append(r.Findings, Finding{GPU: -1, Check: "gpus", Severity: Fail,
			Summary: "NVML sees no GPU",
			Hint:    "check `nvidia-smi -L`, the driver (`lsmod | grep nvidia`) and that the container was given the GPUs"})
		return r
	}
	anyNVLinkUp := false
	for _, g := range inv.GPUs {
		for _, l := range g.NVLinks {
			anyNVLinkUp = anyNVLinkUp || l.Active
		}
	}
	for _, g := range inv.GPUs {
		r.Findings = append(r.Findings, checkPCIe(g)...)
		r.Findings = append(r.Findings, checkNVLink(g, anyNVLinkUp, len(inv.GPUs))...)
		r.Findings = append(r.Findings, checkECC(g)...)
		r.Findings = append(r.Findings, checkClocks(g))
		r.Findings = append(r.Findings, checkXid(g, xids))
	}
	return r
}

func checkPCIe(g GPU) []Finding {
	p := g.PCIe
	var out []Finding
	link := Finding{GPU: g.Index, Check: "pcie-link"}
	switch {
	case p.MaxWidth == 0 || p.MaxGen == 0:
		link.Severity = Info
		link.Summary = "PCIe link not reported by NVML"
	case p.CurWidth < p.MaxWidth:
		link.Severity = Fail
		link.Summary = fmt.Sprintf("PCIe link is x%d, its maximum is x%d (Gen%d now, max Gen%d)", p.CurWidth, p.MaxWidth, p.CurGen, p.MaxGen)
		link.Hint = "a link trained narrower than the slot: reseat the GPU or riser, check the slot and cable; `lspci -vv` shows LnkSta against LnkCap"
	case p.CurGen < p.MaxGen && busy(g):
		link.Severity = Fail
		link.Summary = fmt.Sprintf("PCIe link is Gen%d x%d while the GPU is busy, its maximum is Gen%d", p.CurGen, p.CurWidth, p.MaxGen)
		link.Hint = "a link below its generation under load halves host<->GPU bandwidth per step; check BIOS PCIe speed settings, risers and `lspci -vv` LnkSta; measure with `commlab gpu pcie`"
	case p.CurGen < p.MaxGen:
		link.Severity = Info
		link.Summary = fmt.Sprintf("PCIe link is Gen%d x%d at idle (P%d), its maximum is Gen%d x%d", p.CurGen, p.CurWidth, g.Pstate, p.MaxGen, p.MaxWidth)
		link.Hint = "GPUs lower the link generation when idle to save power; `commlab gpu pcie` reads it again under load"
	default:
		link.Severity = OK
		link.Summary = fmt.Sprintf("PCIe Gen%d x%d (max Gen%d x%d)", p.CurGen, p.CurWidth, p.MaxGen, p.MaxWidth)
	}
	out = append(out, link)
	if p.GPUMaxGen > p.MaxGen && p.MaxGen > 0 {
		out = append(out, Finding{GPU: g.Index, Check: "pcie-slot", Severity: Warn,
			Summary: fmt.Sprintf("the GPU supports PCIe Gen%d but this slot or host allows Gen%d", p.GPUMaxGen, p.MaxGen),
			Hint:    "the platform caps the link: check the slot's generation and the BIOS setting"})
	}
	rep := Finding{GPU: g.Index, Check: "pcie-replay", Severity: OK, Summary: "no PCIe replays"}
	if p.Replays > 0 {
		rep.Severity = Warn
		rep.Summary = fmt.Sprintf("%d PCIe replays since the driver loaded", p.Replays)
		rep.Hint = "replays are link-level retransmissions after bad packets; a count that keeps rising points at signal integrity (riser, slot, cable): read it again under load"
	}
	out = append(out, rep)
	return out
}

// busy says whether the GPU is working, so a low link generation is not
// power saving: some utilisation, or clocks not held down for idleness.
// The performance state alone does not tell: an H200 with persistence mode
// on idles in P0 (recorded in testdata/h200).
func busy(g GPU) bool {
	if g.UtilGPU > 0 {
		return true
	}
	return g.Clocks.Reasons&reasonIdle == 0 && g.Pstate >= 0 && g.Pstate <= 2
}

func checkNVLink(g GPU, anyUp bool, nGPU int) []Finding {
	f := Finding{GPU: g.Index, Check: "nvlink"}
	if len(g.NVLinks) == 0 {
		f.Severity = OK
		f.Summary = "no NVLink reported by NVML (a PCIe-only GPU, or links not exposed, as in a VM)"
		return []Finding{f}
	}
	var up, down []int
	errs := map[string]uint64{}
	var version uint32
	for _, l := range g.NVLinks {
		if l.Active {
			up = append(up, l.Link)
			version = max(version, l.Version)
		} else {
			down = append(down, l.Link)
		}
		for k, v := range l.Errors {
			errs[k] += v
		}
	}
	switch {
	case len(down) > 0 && (len(up) > 0 || anyUp):
		f.Severity = Fail
		f.Summary = fmt.Sprintf("NVLink down: %d of %d links inactive (links %s)", len(down), len(g.NVLinks), intList(down))
		f.Hint = "NCCL routes around a dead link through fewer NVLinks or PCIe and busbw drops; check `nvidia-smi nvlink -s`, the fabric manager (`systemctl status nvidia-fabricmanager`) and Xid 74"
	case len(up) == 0 && nGPU > 1:
		f.Severity = Fail
		f.Summary = fmt.Sprintf("all %d NVLinks inactive on a node with %d GPUs", len(g.NVLinks), nGPU)
		f.Hint = "on NVSwitch systems the fabric manager must be running for links to train: `systemctl status nvidia-fabricmanager`, `nvidia-smi -q | grep -A2 Fabric`"
	case len(up) == 0:
		f.Severity = Info
		f.Summary = fmt.Sprintf("all %d NVLinks inactive; this GPU is alone on the node, so there is no NVLink peer", len(g.NVLinks))
	default:
		f.Severity = OK
		f.Summary = fmt.Sprintf("%d/%d NVLinks up (NVLink %d)", len(up), len(g.NVLinks), version)
	}
	out := []Finding{f}
	var nonzero []string
	for _, k := range []string{"replay", "recovery", "crc_flit", "crc_data"} {
		if errs[k] > 0 {
			nonzero = append(nonzero, fmt.Sprintf("%s %d", k, errs[k]))
		}
	}
	if len(nonzero) > 0 {
		out = append(out, Finding{GPU: g.Index, Check: "nvlink-errors", Severity: Warn,
			Summary: "NVLink error counters: " + strings.Join(nonzero, ", "),
			Hint:    "CRC and replay errors that keep rising mean a marginal link; recovery errors mean the link retrained. Read them again after load (`nvidia-smi nvlink -e`)"})
	}
	return out
}

func checkECC(g GPU) []Finding {
	e := g.ECC
	var out []Finding
	f := Finding{GPU: g.Index, Check: "ecc"}
	switch {
	case !e.Supported:
		f.Severity = Info
		f.Summary = "ECC not reported"
	case !e.Enabled:
		f.Severity = Warn
		f.Summary = "ECC is off"
		if e.PendingEnabled {
			f.Summary += " (on after the next reset)"
		}
		f.Hint = "datacenter GPUs run with ECC on; without it memory errors go unnoticed"
	case e.VolatileUncorrected > 0:
		f.Severity = Fail
		f.Summary = fmt.Sprintf("%d uncorrected ECC errors since the driver loaded", e.VolatileUncorrected)
		f.Hint = "uncorrectable memory errors kill the jobs on this GPU (Xid 48/94/95); drain the node and reset the GPU, then check remapped rows"
	case e.AggregateUncorrected > 0:
		f.Severity = Warn
		f.Summary = fmt.Sprintf("ECC on; %d uncorrected errors over the GPU's life, none since the driver loaded", e.AggregateUncorrected)
	default:
		f.Severity = OK
		f.Summary = fmt.Sprintf("ECC on; no uncorrected errors (corrected: %d since load)", e.VolatileCorrected)
	}
	out = append(out, f)
	m := Finding{GPU: g.Index, Check: "memory-repair"}
	switch {
	case e.RemapSupported && e.RemapFailure:
		m.Severity = Fail
		m.Summary = "row remapping failed"
		m.Hint = "the GPU ran out of spare rows: it needs replacing (RMA)"
	case e.RemapSupported && e.RemapPending:
		m.Severity = Warn
		m.Summary = fmt.Sprintf("a row remap is pending (%d correctable, %d uncorrectable rows remapped)", e.RemapCorrectable, e.RemapUncorrectable)
		m.Hint = "the remap takes effect at the next GPU reset; drain and reset"
	case e.RemapSupported:
		m.Severity = OK
		m.Summary = fmt.Sprintf("%d rows remapped (%d correctable, %d uncorrectable), none pending", e.RemapCorrectable+e.RemapUncorrectable, e.RemapCorrectable, e.RemapUncorrectable)
	case e.RetiredSupported && e.RetiredPending:
		m.Severity = Warn
		m.Summary = fmt.Sprintf("page retirement pending (%d SBE, %d DBE pages retired)", e.RetiredSBE, e.RetiredDBE)
		m.Hint = "retirement takes effect at the next GPU reset or reboot"
	case e.RetiredSupported:
		m.Severity = OK
		m.Summary = fmt.Sprintf("%d pages retired (%d SBE, %d DBE), none pending", e.RetiredSBE+e.RetiredDBE, e.RetiredSBE, e.RetiredDBE)
	default:
		m.Severity = Info
		m.Summary = "neither row remapping nor page retirement reported"
	}
	out = append(out, m)
	return out
}

func checkClocks(g GPU) Finding {
	c := g.Clocks
	f := Finding{GPU: g.Index, Check: "clocks", Severity: OK}
	f.Summary = fmt.Sprintf("SM %d/%d MHz, memory %d/%d MHz, P%d; reasons: %s",
		c.SMMHz, c.MaxSMMHz, c.MemMHz, c.MaxMemMHz, g.Pstate, strings.Join(ReasonNames(c.Reasons), ", "))
	switch {
	case c.Reasons&(reasonHwSlowdown|reasonHwThermal|reasonHwPowerBrake) != 0:
		f.Severity = Fail
		f.Hint = "hardware slowdown cuts clocks hard: check temperatures and cooling (`nvidia-smi -q -d TEMPERATURE,PERFORMANCE`), the power supply and the power-brake signal"
	case c.Reasons&reasonSwThermal != 0:
		f.Severity = Warn
		f.Hint = "the driver is holding clocks down for temperature: check airflow and `nvidia-smi -q -d TEMPERATURE`"
	}
	return f
}

// xidApplication are Xids applications usually cause (bad kernels, faults,
// preemption), not the GPU or node.
var xidApplication = map[uint64]bool{13: true, 31: true, 43: true, 45: true}

// xidMeaning explains the Xids an SRE meets most, after NVIDIA's Xid catalogue.
var xidMeaning = map[uint64]string{
	13:  "graphics engine exception: usually the application (illegal instruction, out-of-range access)",
	31:  "GPU memory page fault: usually the application (bad pointer)",
	43:  "GPU stopped processing: a user application faulted",
	45:  "preemptive cleanup after an earlier error or a killed process",
	48:  "double-bit ECC error: drain, reset the GPU, check remapped rows",
	61:  "internal micro-controller breakpoint/warning: reset the GPU; if it recurs, RMA",
	62:  "internal micro-controller halt: reset the GPU",
	63:  "ECC page retirement or row remap recorded: reset to apply",
	64:  "ECC page retirement or row remap failed: the GPU needs service",
	74:  "NVLink error: check `nvidia-smi nvlink -e`, the fabric manager and the link's partner",
	79:  "GPU has fallen off the bus: PCIe link lost (power, riser, slot, overheating); the node needs a reboot",
	92:  "high single-bit ECC error rate",
	94:  "contained ECC error: the affected application was stopped; reset when convenient",
	95:  "uncontained ECC error: every application on the GPU was stopped; reset the GPU",
	119: "GSP RPC timeout: the GPU's firmware stopped answering; reset the GPU",
	120: "GSP error: reset the GPU",
}

// XidMeaning says what an Xid means and what to do, "" when unknown.
func XidMeaning(x uint64) string { return xidMeaning[x] }

func checkXid(g GPU, xids []XidEvent) Finding {
	f := Finding{GPU: g.Index, Check: "xid", Severity: OK, Summary: "no Xid events"}
	var mine []XidEvent
	for _, x := range xids {
		if NormBusID(x.BusID) == g.BusID || sameBus(x.BusID, g.BusID) {
			mine = append(mine, x)
		}
	}
	if len(mine) == 0 {
		return f
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].Xid < mine[j].Xid })
	var parts, hints []string
	seen := map[uint64]bool{}
	f.Severity = Warn
	for _, x := range mine {
		if !xidApplication[x.Xid] {
			f.Severity = Fail
		}
		if seen[x.Xid] {
			continue
		}
		seen[x.Xid] = true
		parts = append(parts, fmt.Sprintf("Xid %d (%s)", x.Xid, x.Source))
		if m := xidMeaning[x.Xid]; m != "" {
			hints = append(hints, fmt.Sprintf("Xid %d: %s", x.Xid, m))
		}
	}
	f.Summary = fmt.Sprintf("%d Xid events: %s", len(mine), strings.Join(parts, ", "))
	f.Hint = strings.Join(hints, "; ")
	return f
}

// sameBus compares a kernel-log address, which has no function number
// ("0000:18:00"), with a full one.
func sameBus(short, full string) bool {
	short = strings.ToLower(short)
	return short != "" && strings.HasPrefix(full, short) && len(short) >= 10
}

func intList(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// Write prints the report: one block per GPU, one line per rule, hints
// indented under the lines that need them, and a verdict.
func (r Report) Write(w io.Writer, inv *Inventory) error {
	var b strings.Builder
	fmt.Fprintf(&b, "node %s: driver %s, NVML %s, CUDA %s, %d GPU(s)\n", inv.Host, inv.Driver, inv.NVML, cudaText(inv.CUDADriver), len(inv.GPUs))
	for _, g := range inv.GPUs {
		fmt.Fprintf(&b, "\nGPU%d %s  %s  %s\n", g.Index, g.Name, g.BusID, g.UUID)
		for _, f := range r.Findings {
			if f.GPU != g.Index {
				continue
			}
			fmt.Fprintf(&b, "  %-5s %-14s %s\n", f.Severity, f.Check, f.Summary)
			if f.Hint != "" && f.Severity != OK {
				fmt.Fprintf(&b, "  %-5s %-14s -> %s\n", "", "", f.Hint)
			}
		}
		if len(g.Unsupported) > 0 {
			fmt.Fprintf(&b, "  not reported by NVML: %s\n", strings.Join(g.Unsupported, "; "))
		}
	}
	for _, f := range r.Findings {
		if f.GPU < 0 {
			fmt.Fprintf(&b, "  %-5s %-14s %s\n", f.Severity, f.Check, f.Summary)
			if f.Hint != "" {
				fmt.Fprintf(&b, "  %-5s %-14s -> %s\n", "", "", f.Hint)
			}
		}
	}
	if r.XidWatched != "" {
		fmt.Fprintf(&b, "\nXid sources: %s\n", r.XidWatched)
	}
	verdict := "healthy"
	if !r.Healthy() {
		verdict = "UNHEALTHY"
	}
	fmt.Fprintf(&b, "result: %s (%d failures, %d warnings, %d notes)\n", verdict, r.Count(Fail), r.Count(Warn), r.Count(Info))
	_, err := io.WriteString(w, b.String())
	return err
}

func cudaText(v int) string {
	if v <= 0 {
		return "unknown"
	}
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}
