//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	units "github.com/docker/go-units"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/commlab/commlab/labs"
	"github.com/commlab/commlab/labs/cgroup"
	"github.com/commlab/commlab/labs/netns"
	"github.com/commlab/commlab/labs/topology"
)

func newLabUpCmd(g *globals) *cobra.Command {
	var (
		id       string
		ttl      time.Duration
		detach   bool
		pids     int64
		memory   string
		cpus     float64
		homeSize string
	)
	cmd := &cobra.Command{
		Use:   "up TOPOLOGY",
		Short: "Build a lab cluster from a built-in topology or a YAML file",
		Long: `up builds a sandbox and prints its nodes and addresses. It then stays in the
foreground and removes the sandbox on Ctrl-C, when the TTL passes, or when
'commlab lab down ID' removed it from another terminal. With --detach it returns
at once and the sandbox lives until 'lab down', its TTL, or a sweep after the TTL.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ttl < netns.MinTTL || ttl > netns.MaxTTL {
				return fmt.Errorf("--ttl %v: want %v to %v", ttl, netns.MinTTL, netns.MaxTTL)
			}
			if pids <= 0 {
				return fmt.Errorf("--pids %d: want %d to %d", pids, netns.MinPids, netns.MaxPids)
			}
			if cmd.Flags().Changed("cpus") && cpus <= 0 {
				return fmt.Errorf("--cpus %g: want more than 0 (leave it out for 3/4 of the host's)", cpus)
			}
			t, err := topology.Load(args[0])
			if err != nil {
				return err
			}
			limits := cgroup.Limits{Pids: pids, CPUs: cpus}
			if memory != "" {
				if limits.Memory, err = units.RAMInBytes(memory); err != nil || limits.Memory <= 0 {
					return fmt.Errorf("--memory %q: want a size such as 2GiB", memory)
				}
			}
			var home int64
			if homeSize != "" {
				if home, err = units.RAMInBytes(homeSize); err != nil || home <= 0 {
					return fmt.Errorf("--home-size %q: want a size such as 64MiB", homeSize)
				}
			}
			sb, err := netns.New(t, netns.Options{DataDir: g.dataDir, ID: id, TTL: ttl, Limits: limits, HomeSize: home, Detached: detach})
			if err != nil {
				return fmt.Errorf("lab up: %w", err)
			}
			// The sandbox lives as long as upCtx: until Ctrl-C here, unless detached.
			upCtx := ctx
			if detach {
				upCtx = context.WithoutCancel(ctx)
			}
			t0 := time.Now()
			if err := sb.Up(upCtx); errors.Is(err, netns.ErrBusy) {
				return fmt.Errorf("%w ('commlab lab sweep' frees those of dead sandboxes)", err)
			} else if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			st := sb.State()
			fmt.Fprintf(out, "sandbox %s up in %v: topology %s, slice %s, learner uid %d, expires %s\n\n",
				sb.ID(), time.Since(t0).Round(time.Millisecond), t.Name, sb.Plan().Slice, st.LearnerUID, st.Expires.Local().Format(time.DateTime))
			fmt.Fprint(out, sb.Plan().Table())
			fmt.Fprintf(out, "\nshell:  commlab lab shell %s %s\ndown:   commlab lab down %s\n", sb.ID(), t.Nodes[0].Name, sb.ID())
			if detach {
				return nil
			}
			fmt.Fprintln(out, "\nPress Ctrl-C to remove it.")
			return waitSandbox(ctx, g.dataDir, sb, out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&id, "id", "", "sandbox id (1-12 of a-z, 0-9); default random")
	f.DurationVar(&ttl, "ttl", netns.DefaultTTL, "remove the sandbox after this long")
	f.BoolVar(&detach, "detach", false, "return at once and leave the sandbox running until down, TTL or sweep")
	f.Int64Var(&pids, "pids", netns.DefaultPids, "most processes and threads in the sandbox")
	f.StringVar(&memory, "memory", "", "most memory for the sandbox's processes, e.g. 2GiB (default 2GiB)")
	f.Float64Var(&cpus, "cpus", 0, "CPU bandwidth for the sandbox in CPUs (default 3/4 of the host's)")
	f.StringVar(&homeSize, "home-size", "", "size of the learner's /home and /tmp, e.g. 64MiB (default 64MiB)")
	return cmd
}

// waitSandbox keeps a foreground sandbox until Ctrl-C, its TTL, or its
// removal by another process (its state file disappears), then makes sure
// it is gone.
func waitSandbox(ctx context.Context, dataDir string, sb *netns.Sandbox, out io.Writer) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := sb.Down(dctx); err != nil {
				return err
			}
			fmt.Fprintf(out, "sandbox %s removed\n", sb.ID())
			return nil
		case <-sb.Done():
			fmt.Fprintf(out, "sandbox %s removed (TTL)\n", sb.ID())
			return nil
		case <-tick.C:
			if _, err := netns.ReadState(dataDir, sb.ID()); errors.Is(err, netns.ErrNoSandbox) {
				fmt.Fprintf(out, "sandbox %s was removed elsewhere\n", sb.ID())
				dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				return sb.Down(dctx)
			}
		}
	}
}

func newLabShellCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "shell SANDBOX NODE",
		Short: "Open a learner shell on a node of a sandbox",
		Long: `shell opens the shell a learner gets: an unprivileged user with only
CAP_NET_ADMIN and CAP_NET_RAW, inside the node. Exit the shell to return.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			sb, err := netns.Open(g.dataDir, args[0])
			if err != nil {
				return err
			}
			opts := labs.ShellOptions{}
			in := int(os.Stdin.Fd())
			if ws, err := unix.IoctlGetWinsize(in, unix.TIOCGWINSZ); err == nil {
				opts.Rows, opts.Cols = ws.Row, ws.Col
			}
			term, err := sb.Shell(ctx, args[1], opts)
			if err != nil {
				return err
			}
			defer term.Close()
			if restore, err := makeRaw(in); err == nil {
				defer restore()
			}
			winch := make(chan os.Signal, 1)
			signal.Notify(winch, syscall.SIGWINCH)
			defer signal.Stop(winch)
			go func() {
				for range winch {
					if ws, err := unix.IoctlGetWinsize(in, unix.TIOCGWINSZ); err == nil {
						_ = term.Resize(ws.Row, ws.Col)
					}
				}
			}()
			go func() { _, _ = io.Copy(term, os.Stdin) }()
			_, _ = io.Copy(cmd.OutOrStdout(), term)
			_ = term.Wait()
			return nil
		},
	}
}

// makeRaw puts the terminal on fd in raw mode (keys go to the lab shell as
// typed, Ctrl-C included) and returns how to restore it.
func makeRaw(fd int) (func(), error) {
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, err
	}
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }, nil
}

func newLabDownCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "down SANDBOX...",
		Short: "Remove sandboxes: processes, namespaces, cgroup, files",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var errs []error
			for _, id := range args {
				sb, err := netns.Open(g.dataDir, id)
				if err != nil {
					if errors.Is(err, netns.ErrNoSandbox) {
						err = fmt.Errorf("%w (if pieces of it remain, 'commlab lab sweep' removes them)", err)
					}
					errs = append(errs, err)
					continue
				}
				// Its faults go first, from the journal too, so `faults` stops
				// listing them now rather than after the next sweep.
				if err := revertFaultsOf(cmd.Context(), g.dataDir, id); err != nil {
					errs = append(errs, err)
				}
				if err := sb.Down(cmd.Context()); err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "sandbox %s removed\n", id)
			}
			return errors.Join(errs...)
		},
	}
}
