//go:build !linux

package main

import (
	"github.com/spf13/cobra"

	"github.com/commlab/commlab/labs"
)

// Off Linux the commands that build or enter sandboxes are listed but refuse.

func newLabUpCmd(*globals) *cobra.Command {
	return needsLinuxCmd("up TOPOLOGY", "Build a lab cluster from a built-in topology or a YAML file")
}

func newLabShellCmd(*globals) *cobra.Command {
	return needsLinuxCmd("shell SANDBOX NODE", "Open a learner shell on a node of a sandbox")
}

func newLabDownCmd(*globals) *cobra.Command {
	return needsLinuxCmd("down SANDBOX...", "Remove sandboxes: processes, namespaces, cgroup, files")
}

func needsLinuxCmd(use, short string) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error { return labs.ErrNeedsLinux },
	}
}
