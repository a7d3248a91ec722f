package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/commlab/commlab/grader"
	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs/backend"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/scenarios"
	"github.com/commlab/commlab/web"
)

func newLabRunCmd(g *globals) *cobra.Command {
	var seed uint64
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "run SCENARIO",
		Short: "Run a whole lab in this terminal: environment, fault, shells, diagnosis, grade, debrief",
		Long: `run does in a terminal what the lab page does in a browser: it brings the lab's
environment up, measures a healthy baseline, injects the scenario's fault, and then
takes commands:

  shell NODE       open the learner shell on NODE (Ctrl-] comes back here)
  history          list the commands you ran, numbered NODE#N, to cite as evidence
  hint N           open hint N (its cost is taken off the score)
  answer ...       submit a diagnosis and grade it, e.g.
                   answer class=nic-rate-limited node=node2 nic=rdma0 evidence=node2#1
                   (a lab that asks for figures lists them: add estimate.ID=N)
  classes          list the fault classes
  quit             stop the lab

The lab is torn down after grading, on quit, on Ctrl-C and when its TTL passes.
Without --seed a random variant is drawn; the seed is printed so a run can be
repeated. Needs root.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if os.Geteuid() != 0 {
				return errors.New("labs create network namespaces, nftables tables and cgroups: run as root")
			}
			ct, probs := loadContent("")
			if len(probs) > 0 {
				return fmt.Errorf("content has problems:\n%s", strings.Join(probs, "\n"))
			}
			sc, ok := ct.scenarios.Get(args[0])
			if !ok {
				var ids []string
				for _, s := range ct.scenarios.All() {
					ids = append(ids, s.ID)
				}
				return fmt.Errorf("no scenario %q (have: %s)", args[0], strings.Join(ids, ", "))
			}
			if !cmd.Flags().Changed("seed") {
				var b [8]byte
				_, _ = rand.Read(b[:])
				seed = binary.LittleEndian.Uint64(b[:]) >> 1
			}
			return runLab(cmd.Context(), g, sc, seed, ttl, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	cmd.Flags().Uint64Var(&seed, "seed", 0, "variant seed (the same seed gives the same variant)")
	cmd.Flags().DurationVar(&ttl, "ttl", 45*time.Minute, "how long the lab may run")
	return cmd
}

func runLab(ctx context.Context, g *globals, sc *scenarios.Scenario, seed uint64, ttl time.Duration, in io.Reader, out io.Writer) error {
	log := slog.Default()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	inj, err := backend.OpenInjector(injector.Options{DataDir: g.dataDir, Logger: log})
	if err != nil {
		return err
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go inj.Watch(wctx, time.Second)

	fmt.Fprintf(out, "== %s (%s), variant seed %d\n", sc.Title, sc.ID, seed)
	l := session.Start(ctx, session.Config{
		Provider: backend.Local{DataDir: g.dataDir, Exe: exe, Log: log},
		Faults:   backend.Faults{In: inj}, DataDir: g.dataDir, TTL: ttl, Log: log,
	}, 0, sc.Draw(seed))
	defer func() {
		l.Stop()
		fmt.Fprintln(out, "tearing the lab down…")
		l.Wait()
	}()

	last := ""
	for {
		st := l.Status()
		if st.Step != last {
			fmt.Fprintf(out, "[%d/%d] %s\n", st.Progress["done"], st.Progress["total"], web.T("zh", st.Step))
			last = st.Step
		}
		if st.State == session.Ready {
			break
		}
		if st.State != session.Starting {
			return fmt.Errorf("the lab did not start: %s", st.Failure)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	fmt.Fprintf(out, "\n== 任务 / task (lab ends at %s)\n%s\n\nnodes: %s — type 'shell %s' to start.\n",
		l.Status().Expires.Format("15:04"), l.Variant.Task(), strings.Join(l.Status().Nodes, ", "), l.Status().Nodes[0])
	for _, e := range l.Variant.Scenario.Estimates {
		fmt.Fprintf(out, "figure to report: answer ... estimate.%s=N  (%s, in %s)\n", e.ID, e.Describe, e.Unit)
	}

	br := bufio.NewReader(in)
	for {
		fmt.Fprint(out, "lab> ")
		line, err := br.ReadString('\n')
		if err != nil && line == "" {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "shell":
			if len(f) != 2 {
				fmt.Fprintln(out, "usage: shell NODE")
				continue
			}
			if err := attach(ctx, l, f[1], br, out); err != nil {
				fmt.Fprintln(out, "shell:", err)
			}
		case "history":
			ts, err := l.Transcripts()
			if err != nil {
				fmt.Fprintln(out, err)
				continue
			}
			for _, t := range ts {
				for _, c := range t.Commands {
					fmt.Fprintf(out, "%s#%d  %s  (exit %d)\n", t.Terminal, c.Seq, c.Line, c.Exit)
				}
			}
		case "hint":
			n, err := strconv.Atoi(strings.Join(f[1:], ""))
			if err != nil {
				fmt.Fprintf(out, "usage: hint N (1 to %d)\n", len(sc.Hints))
				continue
			}
			h, err := l.Hint(n - 1)
			if err != nil {
				fmt.Fprintln(out, err)
				continue
			}
			fmt.Fprintf(out, "hint %d (costs %.0f%%): %s\n", n, h.Cost*100, h.Text)
		case "classes":
			for _, c := range scenarios.Taxonomy {
				fmt.Fprintf(out, "%-24s %s (location: %s)\n", c.ID, c.ZH, strings.Join(c.Where, ", "))
			}
		case "answer":
			d, err := grader.ParseDiagnosis(strings.Join(f[1:], " "))
			if err != nil {
				fmt.Fprintln(out, err)
				continue
			}
			fmt.Fprintln(out, "grading (the workload is measured again if the lab checks a fix)…")
			res, err := l.Grade(ctx, d)
			if err != nil {
				return err
			}
			printResult(out, l, res)
			return nil
		case "quit", "exit":
			return nil
		default:
			fmt.Fprintln(out, "commands: shell NODE, history, hint N, answer ..., classes, quit")
		}
	}
}

// attach connects this terminal to a node's shell until Ctrl-] or the shell ends. It
// reads the keyboard through br, the same reader as the menu, so nothing typed ahead
// is lost between the two.
func attach(ctx context.Context, l *session.Lab, node string, br *bufio.Reader, out io.Writer) error {
	t, ok := l.Terminal(node)
	if !ok {
		return fmt.Errorf("no shell on %q (nodes: %s)", node, strings.Join(l.Status().Nodes, ", "))
	}
	fd := int(os.Stdin.Fd())
	if term.IsTerminal(fd) {
		old, err := term.MakeRaw(fd)
		if err != nil {
			return err
		}
		defer term.Restore(fd, old)
		if w, h, err := term.GetSize(fd); err == nil {
			_ = t.Resize(uint16(h), uint16(w))
		}
	}
	fmt.Fprintf(out, "-- %s (Ctrl-] to come back) --\r\n", node)
	scroll, ch, detach := t.Attach()
	defer detach()
	_, _ = out.Write(scroll)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			b, err := br.ReadByte()
			if err != nil || b == ctrlRightBracket {
				return
			}
			// Send what is already typed in one write, up to a Ctrl-].
			more, _ := br.Peek(br.Buffered())
			if i := bytes.IndexByte(more, ctrlRightBracket); i >= 0 {
				more = more[:i]
			}
			chunk := append([]byte{b}, more...)
			_, _ = br.Discard(len(more))
			if _, err := t.Write(chunk); err != nil {
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			fmt.Fprint(out, "\r\n")
			return nil
		case p, ok := <-ch:
			if !ok {
				return errors.New("the shell ended")
			}
			_, _ = out.Write(p)
		}
	}
}

// ctrlRightBracket (Ctrl-]) leaves a shell, as in telnet.
const ctrlRightBracket = 0x1d

func printResult(out io.Writer, l *session.Lab, res grader.Result) {
	verdict := "NOT PASSED"
	if res.Passed {
		verdict = "PASSED"
	}
	fmt.Fprintf(out, "\n== result: %s, score %.0f%%\n", verdict, res.Score*100)
	for _, c := range res.Criteria {
		fmt.Fprintf(out, "  %-12s %5.2f / %4.2f  %s\n", c.Name, c.Earned, c.Weight, c.Detail)
	}
	fmt.Fprintf(out, "\n== debrief\n%s\n\n== injected (equivalent commands)\n", l.Variant.Debrief())
	for _, c := range l.Injected() {
		fmt.Fprintln(out, "  "+c)
	}
}
