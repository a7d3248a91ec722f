package nccl

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestWorkloadValidate(t *testing.T) {
	ok := Workload{Op: "all_reduce", MinBytes: "8", MaxBytes: "128M", StepFactor: 2, Iters: 20, Warmup: 5, DataType: "float", GPUs: 1}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		mut  func(*Workload)
		want string
	}{
		{func(w *Workload) { w.Op = "allreduce" }, `op "allreduce"`},
		{func(w *Workload) { w.MaxBytes = "1T" }, `maximum size "1T"`},
		{func(w *Workload) { w.StepFactor = 0 }, "step factor 0"},
		{func(w *Workload) { w.Iters = 0 }, "iterations 0"},
		{func(w *Workload) { w.DataType = "fp8" }, `data type "fp8"`},
		{func(w *Workload) { w.GPUs = 0 }, "GPUs 0"},
	}
	for _, c := range cases {
		w := ok
		c.mut(&w)
		if err := w.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want it to name %s", err, c.want)
		}
	}
}

// nccl-tests binaries are used when every one needed is on PATH; otherwise
// the script runs under torch.distributed.run, one process per GPU.
func TestWorkloadPlan(t *testing.T) {
	w := Workload{Op: "all", MinBytes: "8", MaxBytes: "1M", StepFactor: 4, Iters: 10, Warmup: 2, DataType: "half", GPUs: 8}
	dir := t.TempDir()
	have := map[string]bool{}
	look := func(name string) (string, error) {
		if have[name] {
			return filepath.Join(dir, name), nil
		}
		return "", exec.ErrNotFound
	}
	p, err := w.Plan(look, "/tmp/s.py")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"python3", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "8", "/tmp/s.py", "--op", "all",
		"-b", "8", "-e", "1M", "-f", "4", "-n", "10", "-w", "2", "-d", "half"}
	if p.Kind != "torch.distributed script" || !reflect.DeepEqual(p.Steps, [][]string{want}) {
		t.Errorf("without nccl-tests: %+v", p)
	}
	for _, b := range Ops {
		have[b] = true
	}
	p, err = w.Plan(look, "/tmp/s.py")
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind != "nccl-tests" || len(p.Steps) != 5 || p.Steps[0][0] != filepath.Join(dir, "all_reduce_perf") ||
		p.Steps[4][0] != filepath.Join(dir, "alltoall_perf") || p.Steps[0][len(p.Steps[0])-1] != "8" {
		t.Errorf("with nccl-tests: %+v", p)
	}
	delete(have, "alltoall_perf")
	if p, _ = w.Plan(look, "/tmp/s.py"); p.Kind != "torch.distributed script" {
		t.Errorf("one binary missing: %+v", p)
	}
	w.Script = true
	for _, b := range Ops {
		have[b] = true
	}
	if p, _ = w.Plan(look, "/tmp/s.py"); p.Kind != "torch.distributed script" {
		t.Errorf("forced script: %+v", p)
	}
}

// The embedded script is the file, it is valid Python, and its busbw
// factors and byte counts are nccl-tests' (checked against BusBWFactor).
func TestScriptMatchesGo(t *testing.T) {
	file, err := os.ReadFile("nccl_tests.py")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file, Script()) {
		t.Fatal("embedded script differs from nccl_tests.py")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 here")
	}
	prog := `
import sys
sys.path.insert(0, ".")
import nccl_tests as t
for op in t.OPS:
    for n in (1, 2, 3, 8):
        print(op, n, repr(t.BUSBW[op](n)), *t.counts(op, 1 << 20, 4, n))
`
	cmd := exec.Command(py, "-c", prog)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		op, n := f[0], atoi(t, f[1])
		want, err := BusBWFactor(op, n)
		if err != nil {
			t.Fatal(err)
		}
		if got := atof(t, f[2]); got != want {
			t.Errorf("%s n=%d: script factor %v, Go %v", op, n, got, want)
		}
		send, recv, param := atoi(t, f[3]), atoi(t, f[4]), atoi(t, f[5])
		count := (1 << 20) / 4
		switch op {
		case "all_reduce", "broadcast":
			if send != count || recv != count || param != count {
				t.Errorf("%s n=%d: counts %d %d %d", op, n, send, recv, param)
			}
		case "all_gather":
			if param != send || recv != send*n {
				t.Errorf("%s n=%d: counts %d %d %d", op, n, send, recv, param)
			}
		case "reduce_scatter":
			if param != recv || send != recv*n {
				t.Errorf("%s n=%d: counts %d %d %d", op, n, send, recv, param)
			}
		case "alltoall":
			if send != recv || send != param*n {
				t.Errorf("%s n=%d: counts %d %d %d", op, n, send, recv, param)
			}
		}
		// 16-byte alignment of the per-rank part, as nccl-tests.
		if op != "all_reduce" && op != "broadcast" && (param*4)%16 != 0 {
			t.Errorf("%s n=%d: per-rank count %d not 16-byte aligned", op, n, param)
		}
	}
}

func TestBusBWFactor(t *testing.T) {
	cases := []struct {
		op   string
		n    int
		want float64
	}{
		{"all_reduce", 1, 0}, {"all_reduce", 2, 1}, {"all_reduce", 8, 1.75},
		{"all_gather", 8, 0.875}, {"reduce_scatter", 4, 0.75}, {"alltoall", 2, 0.5},
		{"broadcast", 8, 1}, {"reduce", 8, 1},
	}
	for _, c := range cases {
		got, err := BusBWFactor(c.op, c.n)
		if err != nil || got != c.want {
			t.Errorf("%s n=%d: %v %v, want %v", c.op, c.n, got, err, c.want)
		}
	}
	if _, err := BusBWFactor("gather", 2); err == nil {
		t.Error("unknown op: no error")
	}
	if _, err := BusBWFactor("all_reduce", 0); err == nil {
		t.Error("0 ranks: no error")
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	v, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func atof(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
