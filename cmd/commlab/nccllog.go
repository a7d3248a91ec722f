package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/commlab/commlab/nccl"
	"github.com/spf13/cobra"
)

func newNCCLLogCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nccl-log",
		Short: "Read NCCL_DEBUG logs and PyTorch NCCL errors",
	}
	var asJSON bool
	var maxBytes int64
	explain := &cobra.Command{
		Use:   "explain FILE",
		Short: "Diagnose a paste: symptom, likely causes with why, next commands, and the lines it rests on",
		Long: "FILE is anything copied from a failing job: NCCL_DEBUG output with or without the host:pid:tid prefix,\n" +
			"PyTorch tracebacks and watchdog messages, nccl-tests output, dmesg/NVRM Xid lines, ibstat, ibv_devinfo,\n" +
			"in any mix; \"-\" reads standard input. The verdict model is documented in nccl/VERDICT.md; --json prints\n" +
			"it as it is (the NCCL lines' own summary under \"log\").",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r io.Reader = cmd.InOrStdin()
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return fmt.Errorf("nccl-log explain: %w", err)
				}
				defer f.Close()
				r = f
			}
			v, err := nccl.DiagnoseReader(r, maxBytes)
			if err != nil {
				return fmt.Errorf("nccl-log explain %s: %w", args[0], err)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(v)
			}
			if err := v.WriteText(out); err != nil {
				return err
			}
			if v.Input.Binary != "" {
				return nil
			}
			fmt.Fprintln(out, "\nwhat NCCL's own lines say:")
			return v.Log.Explain(out)
		},
	}
	explain.Flags().BoolVar(&asJSON, "json", false, "print the verdict as JSON (model "+nccl.VerdictModel+")")
	explain.Flags().Int64Var(&maxBytes, "max-bytes", nccl.DefaultMaxInput, "read at most this many bytes of FILE")
	cmd.AddCommand(explain)
	return cmd
}
