package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/commlab/commlab/gpu"
	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs/backend"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/labs/walkthrough"
	"github.com/commlab/commlab/nccl"
	"github.com/commlab/commlab/scenarios"
)

// checkRow is one line of the GPU check's table.
type checkRow struct {
	Check  string        `json:"check"`
	Result string        `json:"result"` // pass, fail or skip
	Took   time.Duration `json:"took_ns"`
	Figure string        `json:"figure"`
}

func newGPUCheckCmd() *cobra.Command {
	var (
		outDir string
		only   []string
	)
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Prove this GPU node: every gpu command and every GPU-node lab end to end, in one table",
		Long: "Runs gpu inventory, topo, health, pcie and nccl-test (NCCL_DEBUG=INFO), nccl-log explain on\n" +
			"what nccl-test logged, then every GPU-node lab through the lab lifecycle a learner uses: the\n" +
			"lab starts, its reference solution is typed into the learner's terminals, the scenario's own\n" +
			"diagnosis is graded on the cited output, and the lab is stopped with nothing left behind.\n" +
			"Labs that need more GPUs than this node has are skipped, not failed. Every output is kept\n" +
			"in --out. Needs root (labs build namespaces and cgroups). Exits 1 if anything failed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			nv, err := openNVML(cmd)
			if err != nil {
				return err
			}
			nv.Close()
			n, err := gpu.Count()
			if err != nil {
				return err
			}
			if os.Geteuid() != 0 {
				return errors.New("gpu check runs labs, which build namespaces and cgroups: run it as root")
			}
			if outDir == "" {
				if outDir, err = os.MkdirTemp("", "commlab-gpu-check-"); err != nil {
					return err
				}
			} else if err := os.MkdirAll(outDir, 0o755); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "commlab gpu check: %d GPU(s); outputs in %s\n", n, outDir)
			rows := gpuCommandChecks(cmd.Context(), outDir, cmd.ErrOrStderr())
			labRows, err := gpuLabChecks(cmd.Context(), outDir, n, only, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			rows = append(rows, labRows...)
			if err := writeCheckTable(cmd.OutOrStdout(), rows); err != nil {
				return err
			}
			if b, err := json.MarshalIndent(rows, "", "  "); err == nil {
				_ = os.WriteFile(filepath.Join(outDir, "check.json"), b, 0o644)
			}
			for _, r := range rows {
				if r.Result == "fail" {
					return errors.New("gpu check: some checks failed (outputs in " + outDir + ")")
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&outDir, "out", "", "directory for every output (default: a new one under $TMPDIR)")
	cmd.Flags().StringSliceVar(&only, "lab", nil, "run only these GPU-node labs (default: all)")
	return cmd
}

// gpuCommandChecks runs each gpu command as a user would, keeping its output.
func gpuCommandChecks(ctx context.Context, outDir string, progress io.Writer) []checkRow {
	exe, err := os.Executable()
	if err != nil {
		return []checkRow{{Check: "commlab binary", Result: "fail", Figure: err.Error()}}
	}
	ncclLog := filepath.Join(outDir, "nccl-test.log")
	steps := []struct {
		name   string
		args   []string
		env    []string
		figure func(stdout []byte) (string, error)
	}{
		{"gpu inventory", []string{"gpu", "inventory", "--json"}, nil, func(b []byte) (string, error) {
			var inv gpu.Inventory
			if err := json.Unmarshal(b, &inv); err != nil || len(inv.GPUs) == 0 {
				return "", fmt.Errorf("no GPU in the inventory (%v)", err)
			}
			return fmt.Sprintf("%d × %s, driver %s", len(inv.GPUs), inv.GPUs[0].Name, inv.Driver), nil
		}},
		{"gpu topo", []string{"gpu", "topo"}, nil, nil},
		{"gpu health", []string{"gpu", "health"}, nil, nil},
		{"gpu pcie", []string{"gpu", "pcie", "--sizes", "256M", "--iters", "10", "--json"}, nil, func(b []byte) (string, error) {
			var r gpu.PCIeResult
			if err := json.Unmarshal(b, &r); err != nil {
				return "", err
			}
			return fmt.Sprintf("pinned H2D %.1f GB/s, ceiling %.1f GB/s (Gen%d x%d)", r.Best("pinned", "h2d"), r.CeilingGBps, r.Gen, r.Width), nil
		}},
		{"gpu nccl-test", []string{"gpu", "nccl-test", "-b", "1M", "-e", "64M", "-f", "4", "-n", "10", "-w", "2"},
			[]string{"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,NET,ENV"}, func(b []byte) (string, error) {
				if err := os.WriteFile(ncclLog, b, 0o644); err != nil {
					return "", err
				}
				bw, err := nccl.AvgBusBW(b)
				if err == nil && bw == 0 {
					return "avg busbw 0.00 GB/s (one rank: no bytes cross between GPUs)", nil
				}
				return fmt.Sprintf("avg busbw %.2f GB/s", bw), err
			}},
		{"nccl-log explain", []string{"nccl-log", "explain", ncclLog}, nil, func(b []byte) (string, error) {
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(strings.ToLower(line), "verdict") {
					return strings.TrimSpace(line), nil
				}
			}
			return firstLine(b), nil
		}},
	}
	var rows []checkRow
	for _, st := range steps {
		fmt.Fprintf(progress, "== %s\n", st.name)
		began := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		c := exec.CommandContext(cctx, exe, st.args...)
		c.Env = append(os.Environ(), st.env...)
		out, err := c.CombinedOutput()
		cancel()
		name := strings.ReplaceAll(st.name, " ", "-") + ".out"
		_ = os.WriteFile(filepath.Join(outDir, name), out, 0o644)
		row := checkRow{Check: st.name, Result: "pass", Took: time.Since(began)}
		if st.figure != nil {
			fig, ferr := st.figure(stdoutOnly(out))
			if err == nil {
				err = ferr
			}
			row.Figure = fig
		}
		if err != nil {
			row.Result, row.Figure = "fail", fmt.Sprintf("%v (see %s)", err, name)
		}
		rows = append(rows, row)
	}
	return rows
}

// stdoutOnly drops commlab's own "commlab: ..." notes from combined output, so JSON
// and tables parse.
func stdoutOnly(b []byte) []byte {
	var keep []string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "commlab: ") {
			keep = append(keep, line)
		}
	}
	return []byte(strings.Join(keep, "\n"))
}

func firstLine(b []byte) string {
	line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return line
}

// gpuLabChecks walks through every GPU-node lab (or those in only) on this node.
func gpuLabChecks(ctx context.Context, outDir string, gpus int, only []string, progress io.Writer) ([]checkRow, error) {
	ct, probs := loadContent("")
	if len(probs) > 0 {
		return nil, fmt.Errorf("content: %s", strings.Join(probs, "; "))
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var rows []checkRow
	for _, sc := range ct.scenarios.All() {
		if sc.Environment.Kind != "gpu" || len(only) > 0 && !slices.Contains(only, sc.ID) {
			continue
		}
		row := checkRow{Check: "lab " + sc.ID}
		if sc.Environment.GPUs > gpus {
			row.Result, row.Figure = "skip", fmt.Sprintf("needs %d GPUs in one node, this node has %d", sc.Environment.GPUs, gpus)
			rows = append(rows, row)
			continue
		}
		fmt.Fprintf(progress, "== lab %s\n", sc.ID)
		rep, err := walkLab(ctx, exe, filepath.Join(outDir, sc.ID), sc)
		row.Took = rep.Took
		switch {
		case err != nil:
			row.Result, row.Figure = "fail", err.Error()
		case !rep.Result.Passed:
			row.Result, row.Figure = "fail", fmt.Sprintf("graded %.2f, not passed: %+v", rep.Result.Score, rep.Result.Criteria)
		default:
			row.Result = "pass"
			row.Figure = fmt.Sprintf("ready in %.0f s; score %.2f", rep.Ready.Seconds(), rep.Result.Score)
			for _, c := range rep.Result.Criteria {
				if c.Earned < c.Weight {
					row.Figure += fmt.Sprintf(" (%s %.2f/%.2f: %s)", c.Name, c.Earned, c.Weight, c.Detail)
				}
			}
			if w := sc.Workload; w != nil && rep.Workload > 0 {
				row.Figure += fmt.Sprintf("; %s %.2f GB/s with the fault", w.Metric, rep.Workload)
				if rep.Baseline > 0 {
					row.Figure += fmt.Sprintf(", %.2f healthy", rep.Baseline)
				}
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// walkLab runs one lab's walk-through with its own data directory and journal, keeps
// what the learner's terminals printed, and fails if a fault is left behind.
func walkLab(ctx context.Context, exe, dir string, sc *scenarios.Scenario) (walkthrough.Report, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return walkthrough.Report{}, err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	inj, err := backend.OpenInjector(injector.Options{DataDir: dir, Logger: log})
	if err != nil {
		return walkthrough.Report{}, err
	}
	cfg := session.Config{Provider: backend.Local{DataDir: dir, Exe: exe, Log: log}, Faults: backend.Faults{In: inj},
		DataDir: dir, TTL: 20 * time.Minute, Log: log}
	rep, err := walkthrough.Run(ctx, cfg, sc.Draw(uint64(time.Now().UnixNano())>>1), walkthrough.Timeouts{})
	var transcript strings.Builder
	for _, st := range rep.Steps {
		fmt.Fprintf(&transcript, "learner@%s:~$ %s\n%s\n[exit %d]\n", st.Node, st.Line, st.Output, st.Exit)
	}
	_ = os.WriteFile(filepath.Join(dir, "transcript.txt"), []byte(transcript.String()), 0o644)
	fmt.Fprint(os.Stderr, transcript.String())
	if left, lerr := inj.List(); lerr == nil && len(left) > 0 {
		err = errors.Join(err, fmt.Errorf("%d fault(s) left in the journal after the lab", len(left)))
	}
	return rep, err
}

// writeCheckTable prints the rows as one aligned table.
func writeCheckTable(w io.Writer, rows []checkRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "check\tresult\ttime\tfigure")
	for _, r := range rows {
		took := "-"
		if r.Took > 0 {
			took = fmt.Sprintf("%.1f s", r.Took.Seconds())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Check, r.Result, took, r.Figure)
	}
	return tw.Flush()
}
