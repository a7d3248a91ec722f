package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// floatStr formats v in width columns the way nccl-tests' getFloatStr does:
// fewer decimals as the value grows, scientific notation when it no longer fits.
func floatStr(v float64, width int) string {
	power := 0
	for val := uint64(1); v >= float64(val) && power < 40; val *= 10 {
		power++
	}
	switch {
	case power < width-2:
		return fmt.Sprintf("%*.2f", width, v)
	case power < width-1:
		return fmt.Sprintf("%*.1f", width, v)
	case power < width+1:
		return fmt.Sprintf("%*.0f", width, v)
	case width >= 7:
		return fmt.Sprintf("%*.1e", width, v)
	}
	return fmt.Sprintf("%*.0e", width, v)
}

// cg formats like C's %g (6 significant digits, trailing zeros dropped).
func cg(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// Header is what nccl-tests prints before the table.
type Header struct {
	Program                 string // e.g. all_reduce_perf
	NCCL                    string // the emulated version, e.g. 2.28.9+commlab-emulation
	NThreads, NGpus         int
	MinBytes, MaxBytes      int64
	Step                    int64
	StepIsFactor            bool
	Warmup, Iters, AggIters int
	Check                   int
	Devices                 []DeviceLine
}

// DeviceLine is one "#  Rank ..." line.
type DeviceLine struct {
	Rank, Group, Pid, Device int
	Host                     string
}

// Row is one line of the table: a size measured out of place and in place.
type Row struct {
	Bytes, Count int64
	Type, RedOp  string
	Root         int
	Out, In      Result
}

// Result is one half of a row.
type Result struct {
	TimeUs, AlgBw, BusBw float64
	Wrong                int64 // -1: not checked (N/A)
}

// WriteHeader prints the nccl-tests header and column titles.
func WriteHeader(w io.Writer, h Header) {
	fmt.Fprintf(w, "# commlab bench %s: nccl-tests output format; ranks are CPU processes, NCCL %s is emulated\n", h.Program, h.NCCL)
	kind := "bytes"
	if h.StepIsFactor {
		kind = "factor"
	}
	fmt.Fprintf(w, "# nThread %d nGpus %d minBytes %d maxBytes %d step: %d(%s) warmup iters: %d iters: %d agg iters: %d validation: %d graph: 0\n",
		h.NThreads, h.NGpus, h.MinBytes, h.MaxBytes, h.Step, kind, h.Warmup, h.Iters, h.AggIters, h.Check)
	fmt.Fprintf(w, "#\n# Using devices\n")
	for _, d := range h.Devices {
		fmt.Fprintf(w, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [0x%02x] %s\n", d.Rank, d.Group, d.Pid, d.Host, d.Device, 0, "commlab CPU rank (emulated GPU)")
	}
	fmt.Fprintf(w, "#\n")
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "", "", "")
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count", "type", "redop", "root",
		"time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong")
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)", "(elements)", "", "", "",
		"(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "")
}

// WriteRow prints one table line.
func WriteRow(w io.Writer, r Row) {
	var b strings.Builder
	fmt.Fprintf(&b, "%12d  %12d  %8s  %6s  %6d", r.Bytes, r.Count, r.Type, r.RedOp, r.Root)
	for _, x := range []Result{r.Out, r.In} {
		wrong := "N/A"
		if x.Wrong >= 0 {
			wrong = cg(float64(x.Wrong))
		}
		fmt.Fprintf(&b, "  %7s  %6s  %6s  %5s", floatStr(x.TimeUs, 7), floatStr(x.AlgBw, 6), floatStr(x.BusBw, 6), wrong)
	}
	b.WriteByte('\n')
	io.WriteString(w, b.String())
}

// WriteFooter prints the summary lines.
func WriteFooter(w io.Writer, wrong int64, avgBusBw float64) {
	status := "OK"
	if wrong > 0 {
		status = "FAILED"
	}
	fmt.Fprintf(w, "# %-20s : %d %s\n", "Out of bounds values", wrong, status)
	fmt.Fprintf(w, "# %-20s : %s \n", "Avg bus bandwidth", cg(avgBusBw))
	fmt.Fprintf(w, "#\n")
}
