package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs/backend"
	"github.com/commlab/commlab/labs/netns"
	"github.com/commlab/commlab/labs/slurm"
	"github.com/commlab/commlab/labs/topology"
)

func newLabCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Bring lab clusters up and down, and open shells in them, from the terminal",
		Long: `lab manages network-namespace lab clusters (sandboxes) without the web server.

  commlab lab run ch01-tour     run a whole lab in this terminal (shells, answer, grade)
  commlab lab up 4x2            build a 4-node, 2-rail cluster and keep it until Ctrl-C
  commlab lab shell ID node1    open a learner shell on node1 of sandbox ID
  commlab lab down ID           remove sandbox ID
  commlab lab list              list the sandboxes recorded in the data directory
  commlab lab plan FILE|NAME    check a topology and print its address plan
  commlab lab sweep             remove sandboxes whose owner died or whose TTL passed

Built-in topologies: ` + strings.Join(topology.BuiltinNames(), ", ") + `. Everything but plan needs root.`,
	}
	cmd.AddCommand(newLabRunCmd(g), newLabUpCmd(g), newLabShellCmd(g), newLabDownCmd(g), newLabListCmd(g), newLabPlanCmd(), newLabSweepCmd(g))
	return cmd
}

func newLabListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the sandboxes recorded in the data directory",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			states, err := netns.ListStates(g.dataDir)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SANDBOX\tTOPOLOGY\tSLOT\tCREATED\tEXPIRES\tOWNER")
			for _, st := range states {
				owner := "detached"
				switch {
				case st.Owner.PID != 0 && st.Owner.Alive():
					owner = fmt.Sprintf("pid %d", st.Owner.PID)
				case st.Owner.PID != 0:
					owner = fmt.Sprintf("pid %d (gone: sweep will remove it)", st.Owner.PID)
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", st.ID, st.Topology.Name, st.Index,
					st.Created.Local().Format(time.DateTime), st.Expires.Local().Format(time.DateTime), owner)
			}
			return w.Flush()
		},
	}
}

func newLabPlanCmd() *cobra.Command {
	var index int
	cmd := &cobra.Command{
		Use:   "plan TOPOLOGY",
		Short: "Check a topology (built-in name or YAML file) and print its address plan",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := topology.Load(args[0])
			if err != nil {
				return err
			}
			p, err := t.Plan(index)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\nslot %d: %s\n\n%s", t.Name, t.Description, index, p.Slice, p.Table())
			return nil
		},
	}
	cmd.Flags().IntVar(&index, "index", 0, fmt.Sprintf("sandbox slot to lay the plan out in (0-%d)", topology.MaxSandboxes-1))
	return cmd
}

func newLabSweepCmd(g *globals) *cobra.Command {
	var (
		grace time.Duration
		job   string
	)
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "Remove sandboxes whose owner process is gone or whose TTL passed, and unrecorded leftovers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if job != "" {
				return sweepSlurmJob(cmd, job)
			}
			if grace <= 0 {
				grace = -1 // no grace at all
			}
			removed, err := netns.SweepWith(cmd.Context(), g.dataDir, netns.SweepOptions{UnrecordedGrace: grace})
			for _, id := range removed {
				fmt.Fprintf(cmd.OutOrStdout(), "removed sandbox %s\n", id)
			}
			if len(removed) == 0 && err == nil {
				fmt.Fprintln(cmd.OutOrStdout(), "nothing to remove")
			}
			return err
		},
	}
	cmd.Flags().StringVar(&job, "slurm-job", "", "only the sandbox of this Slurm job on this node: revert its faults and remove it now (the epilog runs this)")
	cmd.Flags().DurationVar(&grace, "grace", netns.DefaultUnrecordedGrace, "leave cl- objects that no sandbox records alone while younger than this (0: remove them now)")
	return cmd
}

// revertFaultsOf reverts every journaled fault on sandbox id.
func revertFaultsOf(ctx context.Context, dataDir, id string) error {
	in, err := backend.OpenInjector(injector.Options{DataDir: dataDir})
	if err != nil {
		return err
	}
	faults, err := in.List()
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range faults {
		if e.Target.Sandbox == id {
			if err := in.Revert(ctx, e.ID); err != nil {
				errs = append(errs, fmt.Errorf("revert fault %s on %s: %w", e.ID, e.Target, err))
			}
		}
	}
	return errors.Join(errs...)
}

// sweepSlurmJob reverts every fault the agents of a Slurm job journaled on this
// node and removes the job's sandboxes and data directory, whatever state the
// agents died in. The Slurm epilog runs it as root after every lab job.
func sweepSlurmJob(cmd *cobra.Command, job string) error {
	if _, err := strconv.ParseUint(job, 10, 32); err != nil {
		return fmt.Errorf("--slurm-job %q: want a Slurm job id", job)
	}
	dir, id := slurm.JobDataDir(job), slurm.SandboxID(job)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(cmd.OutOrStdout(), "job %s left nothing on this node\n", job)
		return nil
	}
	errs := []error{revertFaultsOf(cmd.Context(), dir, id)}
	removed, err := slurm.RemoveJobNetNS(cmd.Context(), job)
	errs = append(errs, err)
	for _, r := range removed {
		fmt.Fprintf(cmd.OutOrStdout(), "removed netns %s\n", r)
	}
	if err := errors.Join(errs...); err != nil {
		return err // keep the journal for the next sweep
	}
	return os.RemoveAll(dir)
}
