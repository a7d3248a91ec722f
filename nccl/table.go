package nccl

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Perf is one half (out-of-place or in-place) of an nccl-tests row.
type Perf struct {
	TimeUs float64 `json:"time_us"`
	AlgBW  float64 `json:"algbw"`
	BusBW  float64 `json:"busbw"`
	// Wrong is #wrong; -1 when the table says N/A.
	Wrong int64 `json:"wrong"`
	// NA marks a half the benchmark did not run (the script's in-place alltoall).
	NA bool `json:"na,omitempty"`
}

// Row is one size of an nccl-tests table.
type Row struct {
	Size       int64  `json:"size"`
	Count      int64  `json:"count"`
	Type       string `json:"type"`
	Redop      string `json:"redop"`
	Root       int    `json:"root"`
	OutOfPlace Perf   `json:"out_of_place"`
	InPlace    Perf   `json:"in_place"`
}

// Bench is one collective's table.
type Bench struct {
	Name     string  `json:"name"` // from "# Collective test starting: NAME"
	Rows     []Row   `json:"rows"`
	AvgBusBW float64 `json:"avg_busbw"`
	HasAvg   bool    `json:"has_avg"`
	// OutOfBounds is the "# Out of bounds values" count.
	OutOfBounds int `json:"out_of_bounds"`
}

var (
	startRe = regexp.MustCompile(`^# Collective test starting: (\S+)`)
	avgRe   = regexp.MustCompile(`^# Avg bus bandwidth\s*: ([0-9.eE+-]+|nan|inf)`)
	oobRe   = regexp.MustCompile(`^# Out of bounds values\s*: (\d+)`)
)

// ParseTables reads nccl-tests output (from the binaries or from the
// script) and returns one Bench per table. Columns are found from the
// header line, so tables of older nccl-tests without the root column parse too.
func ParseTables(r io.Reader) ([]Bench, error) {
	var out []Bench
	var cur *Bench
	var keys []string // column names before the first "time"
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if i := strings.Index(line, "# "); i > 0 && strings.HasPrefix(strings.TrimSpace(line[:i]), "[") {
			line = line[i:] // torchrun's "[default0]:" prefix
		}
		t := strings.TrimSpace(line)
		switch {
		case startRe.MatchString(t):
			out = append(out, Bench{Name: startRe.FindStringSubmatch(t)[1]})
			cur = &out[len(out)-1]
			continue
		case strings.HasPrefix(t, "#") && strings.Contains(t, "size") && strings.Contains(t, "count") && strings.Contains(t, "busbw"):
			f := strings.Fields(strings.TrimPrefix(t, "#"))
			keys = nil
			for _, c := range f {
				if c == "time" || c == "cputime" {
					break
				}
				keys = append(keys, c)
			}
			if cur == nil || len(cur.Rows) > 0 {
				out = append(out, Bench{})
				cur = &out[len(out)-1]
			}
			continue
		case avgRe.MatchString(t):
			if cur != nil {
				v, _ := strconv.ParseFloat(avgRe.FindStringSubmatch(t)[1], 64)
				cur.AvgBusBW, cur.HasAvg = v, true
			}
			continue
		case oobRe.MatchString(t):
			if cur != nil {
				cur.OutOfBounds, _ = strconv.Atoi(oobRe.FindStringSubmatch(t)[1])
			}
			continue
		}
		if cur == nil || keys == nil || t == "" || t[0] < '0' || t[0] > '9' {
			continue
		}
		row, err := parseRow(strings.Fields(t), keys)
		if err != nil {
			return out, fmt.Errorf("nccl-tests table line %d: %w", n, err)
		}
		cur.Rows = append(cur.Rows, row)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read nccl-tests output: %w", err)
	}
	var benches []Bench
	for _, b := range out {
		if len(b.Rows) > 0 {
			benches = append(benches, b)
		}
	}
	if len(benches) == 0 {
		return nil, fmt.Errorf("no nccl-tests table in the output")
	}
	return benches, nil
}

func parseRow(f, keys []string) (Row, error) {
	if len(f) < len(keys)+8 {
		return Row{}, fmt.Errorf("%d fields, want %d", len(f), len(keys)+8)
	}
	r := Row{Root: -1}
	for i, k := range keys {
		v := f[i]
		var err error
		switch k {
		case "size":
			r.Size, err = strconv.ParseInt(v, 10, 64)
		case "count":
			r.Count, err = strconv.ParseInt(v, 10, 64)
		case "type":
			r.Type = v
		case "redop":
			r.Redop = v
		case "root":
			r.Root, err = strconv.Atoi(v)
		}
		if err != nil {
			return r, fmt.Errorf("column %s %q: %w", k, v, err)
		}
	}
	var err error
	if r.OutOfPlace, err = parsePerf(f[len(keys) : len(keys)+4]); err != nil {
		return r, fmt.Errorf("out-of-place: %w", err)
	}
	if r.InPlace, err = parsePerf(f[len(keys)+4 : len(keys)+8]); err != nil {
		return r, fmt.Errorf("in-place: %w", err)
	}
	return r, nil
}

func parsePerf(f []string) (Perf, error) {
	if f[0] == "N/A" && f[1] == "N/A" {
		return Perf{Wrong: -1, NA: true}, nil
	}
	var p Perf
	var err error
	if p.TimeUs, err = strconv.ParseFloat(f[0], 64); err != nil {
		return p, fmt.Errorf("time %q: %w", f[0], err)
	}
	if p.AlgBW, err = strconv.ParseFloat(f[1], 64); err != nil {
		return p, fmt.Errorf("algbw %q: %w", f[1], err)
	}
	if p.BusBW, err = strconv.ParseFloat(f[2], 64); err != nil {
		return p, fmt.Errorf("busbw %q: %w", f[2], err)
	}
	if f[3] == "N/A" {
		p.Wrong = -1
	} else if p.Wrong, err = strconv.ParseInt(f[3], 10, 64); err != nil {
		return p, fmt.Errorf("#wrong %q: %w", f[3], err)
	}
	return p, nil
}

// BusBWFactor is nccl-tests' factor from algbw to busbw for n ranks
// (PERFORMANCE.md): all_reduce 2(n-1)/n; all_gather, reduce_scatter and
// alltoall (n-1)/n; broadcast and reduce 1.
func BusBWFactor(op string, n int) (float64, error) {
	if n < 1 {
		return 0, fmt.Errorf("ranks %d: want 1 or more", n)
	}
	switch op {
	case "all_reduce":
		return 2 * float64(n-1) / float64(n), nil
	case "all_gather", "reduce_scatter", "alltoall":
		return float64(n-1) / float64(n), nil
	case "broadcast", "reduce":
		return 1, nil
	}
	return 0, fmt.Errorf("op %q has no busbw factor", op)
}

// AvgBusBW reads the first "# Avg bus bandwidth    : 12.3456" footer of nccl-tests
// output (or commlab bench's), in GB/s.
func AvgBusBW(out []byte) (float64, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "# Avg bus bandwidth"); ok {
			_, val, _ := strings.Cut(rest, ":")
			f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
			if err != nil {
				return 0, fmt.Errorf("bad Avg bus bandwidth line %q", line)
			}
			return f, nil
		}
	}
	return 0, errors.New("the workload printed no Avg bus bandwidth line")
}
