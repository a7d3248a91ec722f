//go:build linux

package backend

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/gpu"
	"github.com/commlab/commlab/internal/testenv"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/scenarios"
)

// TestMain removes the commlab binary TestLearnerJobEnv's ranks run.
func TestMain(m *testing.M) { testenv.Main(m) }

func TestLocalCheck(t *testing.T) {
	gpus := func(n int) func() (int, error) { return func() (int, error) { return n, nil } }
	for _, tc := range []struct {
		name    string
		p       Local
		env     scenarios.Environment
		wantErr error
		text    string
	}{
		{"netns topology", Local{}, scenarios.Environment{Kind: "netns", Topology: "2x1"}, nil, ""},
		{"unknown topology", Local{}, scenarios.Environment{Kind: "netns", Topology: "9x9"}, errors.New(""), "9x9"},
		{"gpu node with enough GPUs", Local{GPUs: gpus(8)}, scenarios.Environment{Kind: "gpu", GPUs: 8}, nil, ""},
		{"too few GPUs", Local{GPUs: gpus(1)}, scenarios.Environment{Kind: "gpu", GPUs: 2}, ErrNeedsGPUNode, "needs 2 GPUs in one node, this host has 1"},
		{"no driver", Local{GPUs: func() (int, error) { return 0, gpu.ErrNoDriver }}, scenarios.Environment{Kind: "gpu", GPUs: 1}, ErrNeedsGPUNode, "no NVIDIA driver"},
		{"unknown kind", Local{}, scenarios.Environment{Kind: "slurm"}, errors.New(""), `unknown environment kind "slurm"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Check(tc.env)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("Check: %v", err)
			case tc.wantErr != nil && err == nil:
				t.Fatal("Check: nil, want an error")
			case tc.wantErr != nil && tc.wantErr.Error() != "" && !errors.Is(err, tc.wantErr):
				t.Errorf("Check: %v, want it to wrap %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), tc.text) {
				t.Errorf("Check: %q does not say %q", err, tc.text)
			}
		})
	}
}

// TestLocalCheckThisHost: without GPUs (CI), a gpu lab is refused with words a learner
// can act on, through the real NVML loader.
func TestLocalCheckThisHost(t *testing.T) {
	if _, err := gpu.Count(); err == nil {
		t.Skip("this host has GPUs")
	}
	err := Local{}.Check(scenarios.Environment{Kind: "gpu", GPUs: 1})
	if !errors.Is(err, ErrNeedsGPUNode) || !strings.Contains(err.Error(), "GPU node") {
		t.Errorf("Check on a host without GPUs: %v", err)
	}
}

// TestGPUFigure reads the lab's figure from outputs recorded on an H200
// (docs/gpu-validation.md): commlab gpu pcie --json, and nccl-tests tables from one GPU.
func TestGPUFigure(t *testing.T) {
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pcie, ncclLog := read("../../gpu/testdata/h200/pcie.json"), read("../../nccl/testdata/h200/nccl-info.log")
	for _, tc := range []struct {
		argv   []string
		metric string
		out    []byte
		want   float64 // GB/s; -1: an error
	}{
		{[]string{"pcie"}, "pinned-h2d", pcie, 55.425},
		{[]string{"pcie"}, "pinned-bidir", pcie, 100.941},
		{[]string{"pcie"}, "pageable-h2d", pcie, 12.167},
		{[]string{"pcie"}, "pageable-d2h", pcie, -1},                // not measured
		{[]string{"pcie"}, "pinned-h2d", ncclLog, -1},               // not JSON
		{[]string{"nccl-test", "--op", "all"}, "busbw", ncclLog, 0}, // all_reduce on one GPU: busbw 0 by nccl-tests' formula
	} {
		var log strings.Builder
		got, err := gpuFigure(&scenarios.Workload{GPU: tc.argv, Metric: tc.metric}, tc.out, &log)
		switch {
		case tc.want < 0 && err == nil:
			t.Errorf("%v %s: %v, want an error", tc.argv, tc.metric, got)
		case tc.want >= 0 && (err != nil || math.Abs(got-tc.want) > 0.001):
			t.Errorf("%v %s: %v, %v; want %v", tc.argv, tc.metric, got, err, tc.want)
		}
		if tc.want > 0 && tc.argv[0] == "pcie" && !strings.Contains(log.String(), "ceiling: 32 GT/s × 16 lanes") {
			t.Errorf("%s: the learner's log lacks the table:\n%s", tc.metric, log.String())
		}
	}
}

func TestGPULabEnv(t *testing.T) {
	host := []string{"PATH=/usr/bin", "NCCL_NVLS_ENABLE=0", "TORCH_SYMM_MEM_DISABLE_MULTICAST=1", "NVSHMEM_DISABLE_NVLS=1",
		"HOME=/root", "CUDA_VISIBLE_DEVICES=0,1", "LD_PRELOAD=/x.so", "NCCLX=1"}
	settings := "NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1"
	for _, tt := range []struct {
		name    string
		environ []string
		lab     gpu.LabGPUs
		want    string
	}{
		{"operator's settings; the lab's GPUs replace the host's list", append(host, "LD_LIBRARY_PATH=/opt/lib"),
			gpu.LabGPUs{UUIDs: []string{"GPU-a", "GPU-b"}},
			settings + " LD_LIBRARY_PATH=/opt/lib CUDA_VISIBLE_DEVICES=GPU-a,GPU-b"},
		{"driver directory appended after the operator's path", append(host, "LD_LIBRARY_PATH=/opt/lib"),
			gpu.LabGPUs{UUIDs: []string{"GPU-a"}, DriverLibDir: "/usr/local/nvidia/lib64"},
			settings + " LD_LIBRARY_PATH=/opt/lib:/usr/local/nvidia/lib64 CUDA_VISIBLE_DEVICES=GPU-a"},
		{"driver directory already on the path", append(host, "LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/opt/lib"),
			gpu.LabGPUs{UUIDs: []string{"GPU-a"}, DriverLibDir: "/usr/local/nvidia/lib64"},
			settings + " LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/opt/lib CUDA_VISIBLE_DEVICES=GPU-a"},
		{"no library path set", host,
			gpu.LabGPUs{UUIDs: []string{"GPU-a"}, DriverLibDir: "/usr/lib/x86_64-linux-gnu"},
			settings + " LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu CUDA_VISIBLE_DEVICES=GPU-a"},
	} {
		if got := strings.Join(gpuLabEnv(tt.environ, tt.lab), " "); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

// TestShellQuote: bash reads each quoted value back unchanged.
func TestShellQuote(t *testing.T) {
	for _, v := range []string{"/opt/torch/.venv/bin", "it's", `a"b$c\d`, "x y", ""} {
		out, err := exec.Command("bash", "-c", "printf %s "+shellQuote(v)).Output()
		if err != nil || string(out) != v {
			t.Errorf("shellQuote(%q) read back as %q (%v)", v, out, err)
		}
	}
}

// Node names resolve in a learner's shell: every node has the sandbox's hosts file.
func TestShellResolvesNodes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, err := Local{DataDir: t.TempDir(), Exe: "/bin/true", Log: slog.New(slog.DiscardHandler)}.Up(ctx,
		scenarios.Environment{Kind: "netns", Topology: "2x1"}, 5*time.Minute, func(session.Progress) {})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Down(context.Background())
	out := inShell(ctx, t, env, "node1", "getent hosts node2 node2-rdma0; ping -c 1 -W 2 node2 | grep -c '1 received'")
	for _, want := range []string{"node2-eth0", "node2-rdma0", "\n1\r\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q in the shell's output:\n%s", want, out)
		}
	}
}

// The learner's ~/job.env reaches the job at its next run; a refused line fails the
// run with file:line in train.log, and a symlink is not followed.
func TestLearnerJobEnv(t *testing.T) {
	testenv.RequireRoot(t, "network namespaces")
	exe := testenv.Commlab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env, err := Local{DataDir: t.TempDir(), Exe: exe, Log: slog.New(slog.DiscardHandler)}.Up(ctx,
		scenarios.Environment{Kind: "netns", Topology: "2x1"}, 5*time.Minute, func(session.Progress) {})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Down(context.Background())
	home := env.(*netnsEnv).sb.LearnerHome()
	w := &scenarios.Workload{Bench: []string{"all_reduce", "-b", "64K", "-e", "64K", "-n", "1", "-w", "0"}, Hosts: []string{"node1:1", "node2:1"}}
	job := []string{"NCCL_DEBUG=INFO", "NCCL_IB_DISABLE=1"}
	for _, tc := range []struct {
		name, file, link string
		fails            bool
		log              string
	}{
		{name: "learner's variable reaches the ranks", file: "NCCL_SOCKET_NTHREADS=2\n", log: "NCCL_SOCKET_NTHREADS set by environment to 2"},
		{name: "refused key", file: "# tuned\nLD_PRELOAD=/tmp/x.so\n", fails: true, log: "~/job.env:2:"},
		{name: "symlink not followed", link: "/etc/hostname", fails: true, log: "~/job.env:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(home, "job.env")
			os.Remove(path)
			if tc.link != "" {
				if err := os.Symlink(tc.link, path); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := env.Workload(ctx, w, job, io.Discard)
			if got := errors.Is(err, session.ErrWorkloadFailed); got != tc.fails {
				t.Errorf("run error %v, want failed=%v", err, tc.fails)
			}
			log, _ := os.ReadFile(filepath.Join(home, "train.log"))
			if !strings.Contains(string(log), tc.log) {
				t.Errorf("no %q in train.log:\n%s", tc.log, tail(log, 2000))
			}
		})
	}
}

func tail(b []byte, n int) []byte { return b[max(0, len(b)-n):] }

// inShell runs script in a learner shell on node and returns what the shell printed.
func inShell(ctx context.Context, t *testing.T, env session.Env, node, script string) []byte {
	t.Helper()
	sh, err := env.Shell(ctx, node, "")
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	if _, err := io.WriteString(sh, script+"; exit\n"); err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(io.LimitReader(sh, 1<<16))
	return out
}
