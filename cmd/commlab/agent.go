package main

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs/backend"
	"github.com/commlab/commlab/labs/slurm"
)

func newAgentCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "agent",
		Short: "Run the node side of a lab inside its Slurm job (started by the lab's job script)",
		Long: `agent runs in a lab's Slurm job step, one on each node. It reads its lab from the
environment the server handed to sbatch (COMMLAB_AGENT_URL, COMMLAB_AGENT_TOKEN,
COMMLAB_LAB, COMMLAB_NODES, and Slurm's SLURM_JOB_ID and SLURM_NODEID; for a wss://
server, COMMLAB_AGENT_CA or COMMLAB_AGENT_PIN say how to verify it), builds the
node's sandbox (network namespace cls-<job>-<node>; its NICs are macvlan children
of the site's lab NICs, COMMLAB_LAB_NICS, addressed in the lab's slice,
COMMLAB_ADDR_INDEX), dials the server and serves its requests, reconnecting after
a drop. When the step is signalled (scancel, time
limit) it reverts the faults it applied and removes the sandbox; the epilog
('commlab lab sweep --slurm-job') removes what a killed agent left.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := slurm.AgentFromEnv(os.Getenv)
			if err != nil {
				return err
			}
			in, err := backend.OpenInjector(injector.Options{DataDir: slurm.JobDataDir(a.Job)})
			if err != nil {
				return err
			}
			a.Injector = in
			a.Log = slog.Default()
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
			defer stop()
			go in.Watch(ctx, time.Second)
			return a.Run(ctx)
		},
	}
}
