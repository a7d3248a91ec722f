//go:build linux && cgo

package gpu

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// MeasurePCIe runs the embedded PyTorch script on one GPU and reads the
// link's generation and width through NVML while the copies run, because
// idle GPUs train their links down to save power.
func (n *NVML) MeasurePCIe(ctx context.Context, opt PCIeOptions) (*PCIeResult, error) {
	handles, err := n.devices()
	if err != nil {
		return nil, err
	}
	if opt.GPU < 0 || opt.GPU >= len(handles) {
		return nil, fmt.Errorf("GPU %d: this node has GPUs 0 to %d", opt.GPU, len(handles)-1)
	}
	h := handles[opt.GPU]
	g, err := n.readGPU(opt.GPU, h, SnapshotOptions{})
	if err != nil {
		return nil, err
	}
	res := &PCIeResult{GPU: opt.GPU, Name: g.Name, BusID: g.BusID,
		IdleGen: g.PCIe.CurGen, IdleWidth: g.PCIe.CurWidth, MaxGen: g.PCIe.MaxGen, MaxWidth: g.PCIe.MaxWidth,
		Gen: g.PCIe.CurGen, Width: g.PCIe.CurWidth}

	dir, err := os.MkdirTemp("", "commlab-pcie-")
	if err != nil {
		return nil, fmt.Errorf("measure PCIe: %w", err)
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "pcie_bw.py")
	if err := os.WriteFile(script, pcieScript, 0o644); err != nil {
		return nil, fmt.Errorf("measure PCIe: write script: %w", err)
	}
	timeout := opt.Timeout
	if timeout <= 0 {
		timeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	python := opt.Python
	if python == "" {
		python = "python3"
	}
	args := []string{script, "--device", "0"}
	if opt.Sizes != "" {
		args = append(args, "--sizes", opt.Sizes)
	}
	if opt.Iters > 0 {
		args = append(args, "--iters", fmt.Sprint(opt.Iters))
	}
	if opt.Pageable {
		args = append(args, "--pageable")
	}
	cmd := exec.CommandContext(ctx, python, args...)
	// The UUID pins CUDA to the GPU NVML calls opt.GPU, whatever CUDA's own
	// ordering is.
	cmd.Env = append(os.Environ(), "CUDA_VISIBLE_DEVICES="+g.UUID, "PYTHONUNBUFFERED=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				gen, r1 := h.GetCurrPcieLinkGeneration()
				width, r2 := h.GetCurrPcieLinkWidth()
				if r1 == nvml.SUCCESS && r2 == nvml.SUCCESS {
					res.Samples++
					res.Gen = max(res.Gen, gen)
					res.Width = max(res.Width, width)
				}
			}
		}
	}()
	runErr := cmd.Run()
	close(stop)
	wg.Wait()

	info, runs, perr := ParseCopyOutput(&stdout)
	if runErr != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("bandwidth script ran past %s: %w", timeout, ctx.Err())
		}
		if perr != nil && strings.Contains(perr.Error(), "bandwidth script:") {
			return nil, perr
		}
		return nil, fmt.Errorf("run %s %s: %w\n%s", python, script, runErr, tail(stderr.String(), 2000))
	}
	if perr != nil {
		return nil, perr
	}
	res.Script, res.Runs = info, runs
	if res.CeilingGBps, res.Formula, err = PCIeCeiling(res.Gen, res.Width); err != nil {
		return nil, fmt.Errorf("PCIe ceiling of GPU %d: %w", opt.GPU, err)
	}
	if c, _, err := PCIeCeiling(res.MaxGen, res.MaxWidth); err == nil {
		res.MaxCeilingGBps = c
	}
	return res, nil
}
