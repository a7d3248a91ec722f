package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/commlab/commlab/bench"
)

func newBenchCmd(_ *globals) *cobra.Command {
	flags, finish := bench.Args()
	cmd := &cobra.Command{
		Use:   "bench COLLECTIVE [flags]",
		Short: "Run an nccl-tests-like collective benchmark on CPU ranks (emulated NCCL transports)",
		Long: `Run a collective benchmark whose output reads like nccl-tests and NCCL_DEBUG=INFO.
COLLECTIVE is one of all_reduce, all_gather, reduce_scatter, broadcast, reduce,
alltoall, sendrecv (the _perf suffix is accepted). Ranks are real processes:
-g N (× -t) ranks on this node, or --hosts node1:2,node2:2 to place ranks in lab
nodes (network namespaces cl-<sandbox>-<node>). NCCL_* variables select the
transports; see bench/README.md. This is commlab's emulation, not NVIDIA NCCL.`,
		Example: `  commlab bench all_reduce -b 8 -e 128M -f 2 -g 2
  NCCL_DEBUG=INFO NCCL_SOCKET_IFNAME=rdma0 commlab bench all_reduce -b 1M -e 64M -f 2 --sandbox s1 --hosts node1:2,node2:2`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, p, err := finish(args)
			if err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find the commlab binary: %w", err)
			}
			l := &bench.Launcher{Exe: exe, Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()}
			if p.Timeout > 0 {
				l.Env = append(l.Env, "COMMLAB_BENCH_TIMEOUT="+strconv.Itoa(p.Timeout))
			}
			switch p.Launcher {
			case "auto":
				if err := onlyThisNode(os.Getenv("COMMLAB_NODE"), p.Sandbox, o.Hosts); err != nil {
					return err
				}
				if p.Hosts != "" && (p.Sandbox != "" || strings.HasPrefix(o.Hosts[0].Node, "cl-")) {
					l.Starter = bench.NetnsStarter{Sandbox: p.Sandbox}
				} else {
					l.Starter = bench.LocalStarter{}
				}
			case "local":
				l.Starter = bench.LocalStarter{}
			case "netns":
				l.Starter = bench.NetnsStarter{Sandbox: p.Sandbox}
			default:
				return fmt.Errorf("--launcher %q: want auto, local or netns", p.Launcher)
			}
			return l.Run(cmd.Context(), o)
		},
	}
	cmd.Flags().AddFlagSet(flags)
	cmd.AddCommand(newBenchRankCmd())
	return cmd
}

func newBenchRankCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "rank",
		Short:  "Run one rank (started by `commlab bench`; reads COMMLAB_BENCH_* variables)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			re, err := bench.RankEnvFromOS(os.Getenv)
			if err != nil {
				return err
			}
			var o bench.Options
			if err := json.Unmarshal([]byte(os.Getenv(bench.EnvOpts)), &o); err != nil {
				return fmt.Errorf("%s: %w", bench.EnvOpts, err)
			}
			if re.Rank == 0 && re.ID == "" {
				if f := os.NewFile(3, "unique-id"); f != nil {
					re.IDOut = f
					defer f.Close()
				}
			}
			return bench.RunRank(cmd.Context(), o, re, cmd.OutOrStdout())
		},
	}
}

// onlyThisNode refuses, in a learner's terminal (COMMLAB_NODE names its lab node),
// --hosts that name other nodes: a learner cannot start processes there, and the
// local launcher would quietly run every rank on this node under borrowed names.
func onlyThisNode(here, sandbox string, hosts []bench.HostSpec) error {
	if here == "" || sandbox != "" {
		return nil
	}
	for _, h := range hosts {
		if h.Node != here {
			return fmt.Errorf("--hosts names %s, but this terminal is lab node %s: ranks can start only here (-g N), "+
				"and the lab's own job runs across the nodes (its log is train.log); --launcher local runs them all here under those names", h.Node, here)
		}
	}
	return nil
}
