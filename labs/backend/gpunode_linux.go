package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/commlab/commlab/gpu"
	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/nccl"
	"github.com/commlab/commlab/scenarios"
)

// gpuEnv is a gpu lab: a one-node sandbox (its own network namespace, cgroup and
// learner shell, as in netns labs) whose processes use the host's GPUs through
// /dev/nvidia*, which namespaces do not hide. Faults on the node's cgroup
// (cpu-squeeze, numa-misbind) and env-force reach its workloads as they reach ranks.
type gpuEnv struct {
	*netnsEnv
	// python is the interpreter with PyTorch that commlab's own PATH finds (often a
	// virtual environment): the workload and the learner's shell use it.
	python string
	// inherited is the GPU settings (gpuLabEnv) given to the workload and the
	// learner's shell, which otherwise start with a clean environment.
	inherited []string
}

// inheritedPrefixes name the variables a GPU node's own environment sets for every GPU
// program: NCCL, PyTorch and NVSHMEM settings (a shared host may require multicast
// off: NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1),
// CUDA's, and the library path.
var inheritedPrefixes = []string{"NCCL_", "TORCH_", "NVSHMEM_", "CUDA_", "LD_LIBRARY_PATH="}

// gpuLabEnv is what a GPU lab's programs get of environ (KEY=VALUE, commlab's own):
// the operator's GPU settings (inheritedPrefixes), CUDA_VISIBLE_DEVICES naming the
// lab's GPUs and no others, and the driver's library directory at the end of
// LD_LIBRARY_PATH (after the operator's), so CUDA finds libcuda.so.1 wherever NVML
// was found.
func gpuLabEnv(environ []string, lab gpu.LabGPUs) []string {
	var out []string
	libPath := ""
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "LD_LIBRARY_PATH="); ok {
			libPath = v
			continue
		}
		if strings.HasPrefix(kv, "CUDA_VISIBLE_DEVICES=") {
			continue
		}
		for _, p := range inheritedPrefixes {
			if strings.HasPrefix(kv, p) {
				out = append(out, kv)
				break
			}
		}
	}
	if d := lab.DriverLibDir; d != "" && !slices.Contains(filepath.SplitList(libPath), d) {
		libPath = strings.TrimPrefix(libPath+string(filepath.ListSeparator)+d, string(filepath.ListSeparator))
	}
	if libPath != "" {
		out = append(out, "LD_LIBRARY_PATH="+libPath)
	}
	if len(lab.UUIDs) > 0 {
		out = append(out, "CUDA_VISIBLE_DEVICES="+strings.Join(lab.UUIDs, ","))
	}
	return out
}

var _ session.Env = (*gpuEnv)(nil)

// Workload runs "commlab gpu" with w.GPU (pcie or nccl-test) in the node and returns
// the figure w.Metric names: nccl-tests' average bus bandwidth, or the best copy rate
// of one memory kind and direction. The output also goes to the learner's ~/train.log.
func (e *gpuEnv) Workload(ctx context.Context, w *scenarios.Workload, env []string, out io.Writer) (float64, error) {
	node := e.Nodes()[0]
	t := e.Target(node)
	pcie := w.GPU[0] == "pcie"
	argv := append(append([]string{e.exe, "gpu"}, w.GPU...), "--python", e.python)
	if pcie {
		argv = append(argv, "--json")
	}
	cmd, err := e.sb.Exec(ctx, node, argv...)
	if err != nil {
		return 0, err
	}
	cmd.Workload = true
	forced, err := injector.EnvFor(t)
	if err != nil {
		return 0, err
	}
	// The operator's settings, then the job's, then what faults hide on the node.
	cmd.Env = append(append(append(cmd.Env, e.inherited...), env...), forced...)
	if ns, ok := injector.ShmNamespace(t); ok {
		cmd.MountNS = ns
	}
	logf, err := e.sb.OpenLearnerFile("train.log")
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "==> %s commlab gpu %s\n", time.Now().Format(time.RFC3339), strings.Join(w.GPU, " "))
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, io.MultiWriter(out, logf)
	if !pcie {
		cmd.Stdout = io.MultiWriter(out, logf, &stdout)
	}
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%w: commlab gpu %s: %v", session.ErrWorkloadFailed, w.GPU[0], err)
	}
	return gpuFigure(w, stdout.Bytes(), io.MultiWriter(out, logf))
}

// gpuFigure reads the figure w.Metric names from what "commlab gpu" printed: the first
// nccl-tests average bus bandwidth, or for pcie (--json) the best rate of one memory
// kind and direction, writing the readable table to log.
func gpuFigure(w *scenarios.Workload, stdout []byte, log io.Writer) (float64, error) {
	if w.GPU[0] != "pcie" {
		return nccl.AvgBusBW(stdout)
	}
	var res gpu.PCIeResult
	if err := json.Unmarshal(stdout, &res); err != nil {
		return 0, fmt.Errorf("read commlab gpu pcie --json: %w", err)
	}
	if err := res.Write(log); err != nil {
		return 0, err
	}
	mode, dir, _ := strings.Cut(w.Metric, "-")
	bw := res.Best(mode, dir)
	if bw == 0 {
		return 0, fmt.Errorf("commlab gpu pcie measured no %s copy %s (metric %s)", mode, dir, w.Metric)
	}
	return bw, nil
}

// Shell puts the Python with PyTorch and commlab first on the learner's PATH, so that
// python3 and commlab gpu find the same interpreter as the workload, and sets the
// operator's GPU settings as the workload gets them.
func (e *gpuEnv) Shell(ctx context.Context, node, rc string) (session.PTY, error) {
	for _, kv := range e.inherited {
		k, v, _ := strings.Cut(kv, "=")
		rc += fmt.Sprintf("export %s=%s\n", k, shellQuote(v))
	}
	return e.netnsEnv.Shell(ctx, node, rc+fmt.Sprintf("export PATH=%s:\"$PATH\"\n", shellQuote(e.learnerPath())))
}

// learnerPath is what a GPU lab puts before the node's PATH: the Python with PyTorch
// and the commlab binary the chapters call (`commlab gpu pcie`).
func (e *gpuEnv) learnerPath() string {
	return filepath.Dir(e.python) + string(filepath.ListSeparator) + filepath.Dir(e.exe)
}

// shellQuote quotes s for bash: 'it'\”s'.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
