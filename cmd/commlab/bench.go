package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/commlab/commlab/bench"
)

func newBenchCmd(_ *globals) *cobra.Command {
	cmd, parsed := benchCommand()
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		o, lf, err := parsed(cmd, args)
		if err != nil {
			return err
		}
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find the commlab binary: %w", err)
		}
		l := &bench.Launcher{Exe: exe, Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()}
		if lf.timeout > 0 {
			l.Env = append(l.Env, "COMMLAB_BENCH_TIMEOUT="+strconv.Itoa(lf.timeout))
		}
		switch lf.launcher {
		case "auto":
			if lf.hosts != "" && (lf.sandbox != "" || strings.HasPrefix(o.Hosts[0].Node, "cl-")) {
				l.Starter = bench.NetnsStarter{Sandbox: lf.sandbox}
			} else {
				l.Starter = bench.LocalStarter{}
			}
		case "local":
			l.Starter = bench.LocalStarter{}
		case "netns":
			l.Starter = bench.NetnsStarter{Sandbox: lf.sandbox}
		default:
			return fmt.Errorf("--launcher %q: want auto, local or netns", lf.launcher)
		}
		return l.Run(cmd.Context(), o)
	}
	cmd.AddCommand(newBenchRankCmd())
	return cmd
}

// launchFlags are the flags that say where ranks run rather than what they do.
type launchFlags struct {
	hosts, sandbox, launcher string
	timeout                  int
}

// benchCommand declares the bench command's flags and returns a function that turns
// parsed flags and arguments into options. Labs use it to read a scenario's argv.
func benchCommand() (*cobra.Command, func(*cobra.Command, []string) (bench.Options, launchFlags, error)) {
	o := bench.DefaultOptions()
	var minB, maxB, stepB string
	var lf launchFlags
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
	}
	parse := func(cmd *cobra.Command, args []string) (bench.Options, launchFlags, error) {
		if len(args) == 0 {
			return o, lf, errors.New("name a collective: all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall or sendrecv")
		}
		c, err := bench.ParseCollective(args[0])
		if err != nil {
			return o, lf, err
		}
		o.Coll = c
		for _, s := range []struct {
			flag, v string
			dst     *int64
		}{{"-b", minB, &o.MinBytes}, {"-e", maxB, &o.MaxBytes}, {"-i", stepB, &o.StepBytes}} {
			if s.v == "" {
				continue
			}
			n, err := bench.ParseSize(s.v)
			if err != nil {
				return o, lf, fmt.Errorf("%s: %w", s.flag, err)
			}
			*s.dst = n
		}
		if cmd.Flags().Changed("minbytes") && !cmd.Flags().Changed("maxbytes") && o.MaxBytes < o.MinBytes {
			o.MaxBytes = o.MinBytes
		}
		if lf.hosts != "" {
			if o.Hosts, err = bench.ParseHosts(lf.hosts); err != nil {
				return o, lf, err
			}
		}
		if o.Trace != "" {
			if o.Trace, err = absPath(o.Trace); err != nil {
				return o, lf, err
			}
		}
		return o, lf, o.Validate()
	}
	f := cmd.Flags()
	f.StringVarP(&minB, "minbytes", "b", "", "minimum size in bytes (K, M, G suffixes; default 32M)")
	f.StringVarP(&maxB, "maxbytes", "e", "", "maximum size in bytes (default 32M)")
	f.Int64VarP(&o.StepFactor, "stepfactor", "f", o.StepFactor, "multiply the size by this factor between sizes")
	f.StringVarP(&stepB, "stepbytes", "i", "", "add this many bytes between sizes when -f is 1 (default 1M)")
	f.IntVarP(&o.NThreads, "nthreads", "t", o.NThreads, "threads per process in nccl-tests; here multiplies -g")
	f.IntVarP(&o.NGpus, "ngpus", "g", o.NGpus, "ranks on this node when --hosts is not given")
	f.IntVarP(&o.Iters, "iters", "n", o.Iters, "timed iterations per size")
	f.IntVarP(&o.Warmup, "warmup_iters", "w", o.Warmup, "warmup iterations")
	f.IntVarP(&o.Check, "check", "c", o.Check, "check results (1) or not (0)")
	f.StringVarP(&o.Op, "op", "o", o.Op, "reduction: sum, max, min or all")
	f.StringVarP(&o.DType, "datatype", "d", o.DType, "data type: float, int32 or all")
	f.IntVarP(&o.Root, "root", "r", o.Root, "root rank of broadcast and reduce")
	f.IntVarP(&o.Average, "average", "a", o.Average, "time reported: 0 rank 0, 1 mean, 2 min, 3 max over ranks")
	f.StringVar(&lf.hosts, "hosts", "", "ranks per lab node, e.g. node1:2,node2:2 (ranks are numbered node by node)")
	f.StringVar(&lf.sandbox, "sandbox", "", "lab sandbox: node X runs in network namespace cl-<sandbox>-X")
	f.StringVar(&lf.launcher, "launcher", "auto", "auto, local (plain processes; node names are labels) or netns")
	f.StringVar(&o.Trace, "trace", "", "write every rank's timeline to this file (Chrome trace JSON, open in Perfetto)")
	f.IntVar(&lf.timeout, "timeout", 0, "seconds for bootstrap, connection setup and each collective before failing (default 60; env COMMLAB_BENCH_TIMEOUT)")
	return cmd, parse
}

// benchOptions reads a bench argv (what follows "commlab bench") into options.
func benchOptions(argv []string) (bench.Options, error) {
	cmd, parse := benchCommand()
	if err := cmd.ParseFlags(argv); err != nil {
		return bench.Options{}, fmt.Errorf("bench %s: %w", strings.Join(argv, " "), err)
	}
	o, _, err := parse(cmd, cmd.Flags().Args())
	return o, err
}

func absPath(p string) (string, error) {
	if strings.HasPrefix(p, "/") {
		return p, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("--trace %s: %w", p, err)
	}
	return wd + "/" + p, nil
}

// newBenchRankCmd is the body of one rank process, started by the launcher.
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
