// Command commlab teaches multi-GPU communication: it serves the course, runs labs
// in real environments, injects faults and grades diagnoses.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/commlab/commlab/labs"
	"github.com/commlab/commlab/server/store"
)

// globals are the flags every subcommand shares.
type globals struct {
	dataDir  string
	store    string
	logLevel string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "commlab:", err)
		if errors.Is(err, labs.ErrNeedsLinux) {
			os.Exit(2) // this build cannot do it at all, unlike a failed attempt
		}
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "commlab",
		Short:         "Learn to diagnose and fix multi-GPU communication (NCCL, RDMA, PCIe, NVLink)",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return g.setupLogging()
		},
	}
	root.PersistentFlags().StringVar(&g.dataDir, "data", envOr("COMMLAB_DATA", "data"), "data directory (database, journal, recordings); env COMMLAB_DATA")
	root.PersistentFlags().StringVar(&g.store, "store", os.Getenv("COMMLAB_STORE"), "database: a PostgreSQL URL (postgres://user@host/db) or an SQLite file; default DATA/commlab.db; env COMMLAB_STORE")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", envOr("COMMLAB_LOG_LEVEL", "info"), "log level: debug, info, warn, error")
	root.AddCommand(
		newVersionCmd(),
		newContentCmd(g),
		newServeCmd(g),
		newBenchCmd(g),
		newUserCmd(g),
		newCertCmd(g),
		newLabCmd(g),
		newGPUCmd(g),
		newNCCLLogCmd(),
		newInjectCmd(g), newFaultsCmd(g), newRevertCmd(g), newSweepCmd(g), newInjectorHelperCmd(),
		newAgentCmd(),
	)
	return root
}

// openStore opens the database --store names, by default the SQLite file
// commlab.db in the data directory.
func (g *globals) openStore(ctx context.Context) (store.DB, error) {
	if g.store == "" {
		return store.OpenSQLite(ctx, filepath.Join(g.dataDir, "commlab.db"))
	}
	return store.Open(ctx, g.store)
}

func (g *globals) setupLogging() error {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", g.logLevel)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})))
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
