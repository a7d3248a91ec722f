package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"
)

// Placement says where a run's ranks go, as opposed to what they do.
type Placement struct {
	Hosts    string // --hosts node1:2,node2:2
	Sandbox  string // --sandbox: node X is the namespace cl-<sandbox>-X
	Launcher string // --launcher auto, local or netns
	Timeout  int    // --timeout seconds, 0 for the default
}

// Args declares nccl-tests' flags (and commlab's placement flags) on a flag set and
// returns it with a function that turns the parsed flags and the positional arguments
// (the collective) into options. The CLI and the labs both read argv through it, so a
// scenario's workload means exactly what the same command line means in a shell.
func Args() (*pflag.FlagSet, func(args []string) (Options, Placement, error)) {
	o := DefaultOptions()
	var minB, maxB, stepB string
	var p Placement
	f := pflag.NewFlagSet("bench", pflag.ContinueOnError)
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
	f.StringVar(&p.Hosts, "hosts", "", "ranks per lab node, e.g. node1:2,node2:2 (ranks are numbered node by node)")
	f.StringVar(&p.Sandbox, "sandbox", "", "lab sandbox: node X runs in network namespace cl-<sandbox>-X")
	f.StringVar(&p.Launcher, "launcher", "auto", "auto, local (plain processes; node names are labels) or netns")
	f.StringVar(&o.Trace, "trace", "", "write every rank's timeline to this file (Chrome trace JSON, open in Perfetto)")
	f.IntVar(&o.Train, "train", 0, "first run this many steps of a data-parallel training loop (gradients all-reduced; rank 0 prints the loss)")
	f.IntVar(&o.ComputeMS, "compute-ms", 0, "with --train: each step's backward pass keeps the emulated GPU busy this many milliseconds")
	f.IntVar(&o.Buckets, "buckets", 1, "with --train: all-reduce the gradients in this many buckets, each as soon as the backward pass has produced it (1: after the whole pass)")
	f.IntVar(&p.Timeout, "timeout", 0, "seconds for bootstrap, connection setup and each collective before failing (default 60; env COMMLAB_BENCH_TIMEOUT)")

	finish := func(args []string) (Options, Placement, error) {
		if len(args) == 0 {
			return o, p, errors.New("name a collective: all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall or sendrecv")
		}
		if len(args) > 1 {
			return o, p, fmt.Errorf("one collective at a time, got %q", args)
		}
		c, err := ParseCollective(args[0])
		if err != nil {
			return o, p, err
		}
		o.Coll = c
		for _, s := range []struct {
			flag, v string
			dst     *int64
		}{{"-b", minB, &o.MinBytes}, {"-e", maxB, &o.MaxBytes}, {"-i", stepB, &o.StepBytes}} {
			if s.v == "" {
				continue
			}
			n, err := ParseSize(s.v)
			if err != nil {
				return o, p, fmt.Errorf("%s: %w", s.flag, err)
			}
			*s.dst = n
		}
		if f.Changed("minbytes") && !f.Changed("maxbytes") && o.MaxBytes < o.MinBytes {
			o.MaxBytes = o.MinBytes
		}
		if p.Hosts != "" {
			if o.Hosts, err = ParseHosts(p.Hosts); err != nil {
				return o, p, err
			}
		}
		if o.Trace != "" && !filepath.IsAbs(o.Trace) {
			wd, err := os.Getwd()
			if err != nil {
				return o, p, fmt.Errorf("--trace %s: %w", o.Trace, err)
			}
			o.Trace = filepath.Join(wd, o.Trace)
		}
		if o.Trace != "" {
			// Checked now, not when the run ends and the trace is written.
			if st, err := os.Stat(filepath.Dir(o.Trace)); err != nil || !st.IsDir() {
				return o, p, fmt.Errorf("--trace %s: directory %s does not exist", o.Trace, filepath.Dir(o.Trace))
			}
			if writable(filepath.Dir(o.Trace)) != nil {
				return o, p, fmt.Errorf("--trace %s: directory %s is not writable", o.Trace, filepath.Dir(o.Trace))
			}
		}
		if p.Timeout < 0 || p.Timeout > 24*3600 {
			return o, p, fmt.Errorf("--timeout %d: want 1 to 86400 seconds (0: the default)", p.Timeout)
		}
		return o, p, o.Validate()
	}
	return f, finish
}

// ParseArgs reads a command line such as "all_reduce -b 1M -e 8M --hosts node1:1,node2:1".
func ParseArgs(argv []string) (Options, Placement, error) {
	f, finish := Args()
	if err := f.Parse(argv); err != nil {
		return Options{}, Placement{}, fmt.Errorf("bench %q: %w", argv, err)
	}
	return finish(f.Args())
}
