package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs/netns"
)

// This file holds the fault injector's commands: inject, faults, revert, sweep,
// and the hidden injector-helper (the injector starts its helper processes with it;
// the injector package intercepts them before cobra runs).

// faultRegistry is the registry of every fault kind commlab ships.
func faultRegistry() *injector.Registry {
	reg, err := injector.NewRegistry(injector.Builtin()...)
	if err != nil {
		panic(err) // the built-in kinds are fixed at compile time; tests cover them
	}
	return reg
}

// needRoot explains why a fault command cannot run without root.
func faultNeedRoot(what string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s needs root: faults change namespaces, tc, nftables and cgroups (run it with sudo)", what)
	}
	return nil
}

func newInjectCmd(g *globals) *cobra.Command {
	reg := faultRegistry()
	var (
		t       injector.Target
		kind    string
		ttl     time.Duration
		asJS    bool
		allowHW bool
	)
	params := map[string]*string{}
	cmd := &cobra.Command{
		Use:   "inject --sandbox S --node N --kind KIND [parameters]",
		Short: "Inject a fault into a node of a lab sandbox (journaled, reverted by its TTL)",
		Long: `Inject a fault into a node of a lab sandbox. The fault is written to the journal
(<data>/injector/journal) before the host is touched, and reverted by 'commlab revert',
by the watchdog of 'commlab serve' when its TTL passes, or by 'commlab sweep'.

Kinds and their parameters: commlab faults --kinds. Example:
  commlab inject --sandbox s1 --node node1 --kind nic-rate --nic rdma0 --rate 100mbit --ttl 10m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if kind == "" {
				return errors.New("--kind is required (see commlab faults --kinds)")
			}
			if err := faultNeedRoot("inject"); err != nil {
				return err
			}
			given := map[string]string{}
			for name, v := range params {
				if cmd.Flags().Changed(name) {
					given[name] = *v
				}
			}
			f, err := reg.Parse(kind, given)
			if err != nil {
				return err
			}
			if t.Cgroup == "" && t.Sandbox != "" && t.Node != "" {
				t.Cgroup = "commlab/" + t.Sandbox + "/" + t.Node // labs/netns's layout
			}
			in, err := injector.Open(injector.Options{DataDir: g.dataDir, Registry: reg, AllowHardware: allowHW})
			if err != nil {
				return err
			}
			e, err := in.Apply(cmd.Context(), t, f, ttl)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJS {
				return faultJSON(out, e)
			}
			fmt.Fprintf(out, "%s  %s on %s until %s (in %s)\n", e.ID, e.Kind, e.Target, e.Deadline.Local().Format(time.DateTime), ttl)
			for _, c := range e.Command {
				fmt.Fprintf(out, "  equivalent: %s\n", c)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&allowHW, "allow-hardware-faults", false, "allow hardware kinds (pcie-speed); unsafe on a machine others use")
	fl.StringVar(&t.Sandbox, "sandbox", "", "sandbox id")
	fl.StringVar(&t.Node, "node", "", "node of the sandbox")
	fl.StringVar(&t.NetNS, "netns", "", "the node's namespace under /run/netns (default cl-<sandbox>-<node>)")
	fl.StringVar(&t.Cgroup, "cgroup", "", "the node's workload cgroup (default commlab/<sandbox>/<node>)")
	fl.StringVar(&t.EtcDir, "etc-dir", "", "directory the node's workloads see as /etc (env-force)")
	fl.StringVar(&kind, "kind", "", "fault kind (commlab faults --kinds lists them)")
	fl.DurationVar(&ttl, "ttl", 10*time.Minute, "the fault is reverted when this much time has passed")
	fl.BoolVar(&asJS, "json", false, "print the journal entry as JSON")
	for _, name := range reg.ParamNames() {
		params[name] = new(string)
		fl.StringVar(params[name], name, "", "parameter of "+strings.Join(faultKindsWith(reg, name), ", "))
	}
	return cmd
}

// faultKindsWith lists the kinds that have parameter name.
func faultKindsWith(reg *injector.Registry, name string) []string {
	var out []string
	for _, k := range reg.Kinds() {
		ps, _ := reg.Params(k.Name)
		for _, p := range ps {
			if p.Name == name {
				out = append(out, k.Name)
			}
		}
	}
	return out
}

func newFaultsCmd(g *globals) *cobra.Command {
	var asJS, kinds bool
	cmd := &cobra.Command{
		Use:   "faults",
		Short: "List the active faults (age, deadline), or with --kinds the fault kinds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			reg := faultRegistry()
			out := cmd.OutOrStdout()
			if kinds {
				return faultListKinds(cmd, reg, asJS)
			}
			in, err := injector.Open(injector.Options{DataDir: g.dataDir, Registry: reg})
			if err != nil {
				return err
			}
			list, err := in.List()
			if err != nil {
				return err
			}
			if asJS {
				if list == nil {
					list = []injector.Entry{}
				}
				return faultJSON(out, list)
			}
			if len(list) == 0 {
				fmt.Fprintln(out, "no active faults")
				return nil
			}
			now := time.Now()
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tKIND\tTARGET\tPARAMETERS\tAGE\tDEADLINE\tSTATE")
			for _, e := range list {
				state := "active"
				switch {
				case !e.Applied:
					state = "partial (revert it)"
				case e.Expired(now):
					state = "expired (the watchdog or a sweep reverts it)"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.Kind, e.Target, faultParamsText(e.Params),
					now.Sub(e.Created).Round(time.Second), faultDeadlineText(e.Deadline, now), state)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJS, "json", false, "print JSON")
	cmd.Flags().BoolVar(&kinds, "kinds", false, "list the fault kinds, their parameters and whether this host supports them")
	return cmd
}

func faultListKinds(cmd *cobra.Command, reg *injector.Registry, asJS bool) error {
	out := cmd.OutOrStdout()
	var feats *injector.Features
	if os.Geteuid() == 0 {
		f := injector.Probe(cmd.Context())
		feats = &f
	}
	type kindInfo struct {
		Name      string           `json:"name"`
		Summary   string           `json:"summary"`
		Params    []injector.Param `json:"params"`
		Supported *bool            `json:"supported,omitempty"`
		Missing   string           `json:"missing,omitempty"`
		Mechanism string           `json:"mechanism,omitempty"`
	}
	var infos []kindInfo
	for _, k := range reg.Kinds() {
		ps, _ := reg.Params(k.Name)
		ki := kindInfo{Name: k.Name, Summary: k.Summary, Params: ps}
		if feats != nil {
			ok := true
			for _, n := range k.Needs {
				if err := feats.Has(n); err != nil {
					ok, ki.Missing = false, err.Error()
					break
				}
			}
			ki.Supported = &ok
			ki.Mechanism = injector.Mechanism(k.Name, *feats)
		}
		infos = append(infos, ki)
	}
	if asJS {
		return faultJSON(out, infos)
	}
	for _, ki := range infos {
		state := "(run as root to probe this host)"
		if ki.Supported != nil {
			state = "supported here"
			if !*ki.Supported {
				state = "NOT supported here: " + ki.Missing
			}
		}
		fmt.Fprintf(out, "%s: %s\n  %s\n", ki.Name, ki.Summary, state)
		if ki.Mechanism != "" {
			fmt.Fprintf(out, "  mechanism here: %s\n", ki.Mechanism)
		}
		for _, p := range ki.Params {
			extra := ""
			if p.Required {
				extra = " (required)"
			} else if p.Default != "" {
				extra = " (default " + p.Default + ")"
			}
			fmt.Fprintf(out, "  --%s%s: %s\n", p.Name, extra, p.Doc)
		}
	}
	return nil
}

func newRevertCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "revert ID...",
		Short: "Revert active faults by id (see commlab faults)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			if err := faultNeedRoot("revert"); err != nil {
				return err
			}
			in, err := injector.Open(injector.Options{DataDir: g.dataDir, Registry: faultRegistry()})
			if err != nil {
				return err
			}
			var errs []error
			for _, id := range ids {
				if err := in.Revert(cmd.Context(), id); err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "reverted %s\n", id)
			}
			return errors.Join(errs...)
		},
	}
}

func newSweepCmd(g *globals) *cobra.Command {
	var expired bool
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "Revert every journaled fault, then remove sandboxes whose owner is gone",
		Long: `Revert every fault in the journal, whatever state a crash left it in, then remove every
lab sandbox (cl-* namespaces, nftables tables, commlab/ cgroups, run-time files) whose owner
process is gone or whose TTL passed. Both are idempotent, so a sweep can run any number of
times; 'commlab serve' does the same at start-up. With --expired only faults past their
deadline are reverted and sandboxes are left alone. 'commlab lab sweep --grace 0' also removes
unrecorded cl- objects at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := faultNeedRoot("sweep"); err != nil {
				return err
			}
			in, err := injector.Open(injector.Options{DataDir: g.dataDir, Registry: faultRegistry()})
			if err != nil {
				return err
			}
			sweep := in.Sweep
			if expired {
				sweep = in.RevertExpired
			}
			ids, err := sweep(cmd.Context())
			for _, id := range ids {
				fmt.Fprintf(cmd.OutOrStdout(), "reverted %s\n", id)
			}
			if err == nil && len(ids) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no fault to revert")
			}
			if err != nil || expired {
				return err
			}
			removed, err := netns.Sweep(cmd.Context(), g.dataDir)
			for _, id := range removed {
				fmt.Fprintf(cmd.OutOrStdout(), "removed sandbox %s\n", id)
			}
			if err == nil && len(removed) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no sandbox to remove")
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&expired, "expired", false, "only faults whose deadline has passed")
	return cmd
}

// newInjectorHelperCmd runs the injector's helper processes (the nic-flap driver, the delay wire);
// the injector starts it, people do not.
func newInjectorHelperCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "injector-helper",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := injector.RunHelper(cmd.Context(), args, cmd.ErrOrStderr()); code != 0 {
				return fmt.Errorf("injector-helper %s: exit %d", strings.Join(args, " "), code)
			}
			return nil
		},
	}
}

func faultParamsText(p map[string]string) string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + p[k]
	}
	return strings.Join(parts, " ")
}

func faultDeadlineText(d, now time.Time) string {
	if left := d.Sub(now).Round(time.Second); left > 0 {
		return "in " + left.String()
	}
	return fmt.Sprintf("%s ago", now.Sub(d).Round(time.Second))
}

func faultJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
