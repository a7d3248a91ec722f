package backend

import (
	"errors"
	"strings"
	"testing"

	"github.com/commlab/commlab/gpu"
	"github.com/commlab/commlab/scenarios"
)

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
