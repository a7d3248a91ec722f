package nccl

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// script is the torch.distributed benchmark shipped with commlab; see its docstring.
//
//go:embed nccl_tests.py
var script []byte

// Script returns the embedded workload script (nccl/nccl_tests.py).
func Script() []byte { return bytes.Clone(script) }

// Ops are the collectives the workload runs, with nccl-tests' binary names.
var Ops = map[string]string{
	"all_reduce":     "all_reduce_perf",
	"all_gather":     "all_gather_perf",
	"reduce_scatter": "reduce_scatter_perf",
	"broadcast":      "broadcast_perf",
	"alltoall":       "alltoall_perf",
}

// opOrder is the order "all" runs them in.
var opOrder = []string{"all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall"}

// Workload is an NCCL benchmark on the GPUs of one node.
type Workload struct {
	Op         string // a key of Ops, or "all"
	MinBytes   string // nccl-tests -b, e.g. "8"
	MaxBytes   string // nccl-tests -e, e.g. "128M"
	StepFactor int    // nccl-tests -f
	Iters      int    // nccl-tests -n
	Warmup     int    // nccl-tests -w
	DataType   string // nccl-tests -d: float, half, bfloat16, ...
	GPUs       int    // ranks, one per GPU
	// Python runs the script (with -m torch.distributed.run); "" means python3.
	Python string
	// Script forces the PyTorch script even when nccl-tests is on PATH.
	Script bool
}

var sizeRe = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?[KkMmGg]?$`)

var dataTypes = map[string]bool{"float": true, "half": true, "bfloat16": true, "double": true, "int32": true, "int8": true, "uint8": true, "int64": true}

// Validate checks the parameters, naming the bad one.
func (w Workload) Validate() error {
	if _, ok := Ops[w.Op]; !ok && w.Op != "all" {
		return fmt.Errorf("op %q: want all_reduce, all_gather, reduce_scatter, broadcast, alltoall or all", w.Op)
	}
	for name, v := range map[string]string{"minimum size": w.MinBytes, "maximum size": w.MaxBytes} {
		if !sizeRe.MatchString(v) {
			return fmt.Errorf("%s %q: want bytes with an optional K, M or G suffix", name, v)
		}
	}
	if w.StepFactor < 1 {
		return fmt.Errorf("step factor %d: want 1 or more", w.StepFactor)
	}
	if w.Iters < 1 || w.Warmup < 0 {
		return fmt.Errorf("iterations %d, warm-up %d: want at least 1 and 0", w.Iters, w.Warmup)
	}
	if !dataTypes[w.DataType] {
		return fmt.Errorf("data type %q: want float, half, bfloat16, double, int32, int8, uint8 or int64", w.DataType)
	}
	if w.GPUs < 1 {
		return fmt.Errorf("GPUs %d: want 1 or more", w.GPUs)
	}
	return nil
}

// Plan is how a workload will run.
type Plan struct {
	// Kind is "nccl-tests" or "torch.distributed script".
	Kind string
	// Steps are the commands, run one after the other (nccl-tests has one
	// binary per collective).
	Steps [][]string
}

// Plan decides how to run: the nccl-tests binaries when every one needed is
// on PATH (lookPath is exec.LookPath in production), otherwise the script
// written at scriptPath and started with torch.distributed.run, one process
// per GPU.
func (w Workload) Plan(lookPath func(string) (string, error), scriptPath string) (Plan, error) {
	if err := w.Validate(); err != nil {
		return Plan{}, err
	}
	ops := []string{w.Op}
	if w.Op == "all" {
		ops = opOrder
	}
	common := []string{"-b", w.MinBytes, "-e", w.MaxBytes, "-f", fmt.Sprint(w.StepFactor),
		"-n", fmt.Sprint(w.Iters), "-w", fmt.Sprint(w.Warmup), "-d", w.DataType}
	if !w.Script {
		var steps [][]string
		for _, op := range ops {
			bin, err := lookPath(Ops[op])
			if err != nil {
				steps = nil
				break
			}
			// One process driving every GPU (-g), as nccl-tests does on one node.
			steps = append(steps, append(append([]string{bin}, common...), "-g", fmt.Sprint(w.GPUs)))
		}
		if steps != nil {
			return Plan{Kind: "nccl-tests", Steps: steps}, nil
		}
	}
	python := w.Python
	if python == "" {
		python = "python3"
	}
	argv := []string{python, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", fmt.Sprint(w.GPUs),
		scriptPath, "--op", w.Op}
	return Plan{Kind: "torch.distributed script", Steps: [][]string{append(argv, common...)}}, nil
}

// WriteScript writes the embedded script into dir and returns its path.
func WriteScript(dir string) (string, error) {
	p := filepath.Join(dir, "nccl_tests.py")
	if err := os.WriteFile(p, script, 0o644); err != nil {
		return "", fmt.Errorf("write workload script: %w", err)
	}
	return p, nil
}

// Run plans and runs the workload, writing the processes' output (the table
// and any NCCL_DEBUG lines) to stdout and stderr. The script goes to a
// temporary directory removed afterwards. env is added to the environment.
func (w Workload) Run(ctx context.Context, env []string, stdout, stderr *os.File) (Plan, error) {
	dir, err := os.MkdirTemp("", "commlab-nccl-")
	if err != nil {
		return Plan{}, fmt.Errorf("run NCCL workload: %w", err)
	}
	defer os.RemoveAll(dir)
	sp, err := WriteScript(dir)
	if err != nil {
		return Plan{}, err
	}
	plan, err := w.Plan(exec.LookPath, sp)
	if err != nil {
		return plan, err
	}
	for _, argv := range plan.Steps {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdout, cmd.Stderr = stdout, stderr
		if err := cmd.Run(); err != nil {
			if ctx.Err() != nil {
				return plan, fmt.Errorf("%s: %w", strings.Join(argv, " "), ctx.Err())
			}
			return plan, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
		}
	}
	return plan, nil
}
