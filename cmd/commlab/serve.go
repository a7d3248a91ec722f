package main

import (
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/server"
	"github.com/commlab/commlab/server/auth"
	"github.com/commlab/commlab/server/store"
)

func newServeCmd(g *globals) *cobra.Command {
	var (
		addr    string
		content string
		cfg     server.Config
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the course and labs over HTTP",
		Long: `serve starts the web server: course pages, accounts, progress, /healthz and
/metrics. State lives in the data directory (--data): commlab.db (SQLite) and
secret.key (CSRF and signing key). With --content DIR the course is read from DIR
and reloaded when a file changes, for authors; otherwise the embedded course is used.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			log := slog.Default()
			ct, probs := loadContent(content)
			if len(probs) > 0 {
				return fmt.Errorf("the course has %d problem(s); fix them and run 'commlab content check':\n%s", len(probs), strings.Join(probs, "\n"))
			}
			fsys, _ := contentFS(content)
			lib, err := course.NewLibrary(fsys, course.Options{LabExists: func(id string) bool { _, ok := ct.scenarios.Get(id); return ok }})
			if err != nil {
				return err
			}
			if content != "" {
				if err := lib.Watch(ctx, content, log); err != nil {
					return err
				}
			}
			st, err := store.OpenSQLite(ctx, filepath.Join(g.dataDir, "commlab.db"))
			if err != nil {
				return err
			}
			defer st.Close()
			key, err := auth.LoadOrCreateKey(filepath.Join(g.dataDir, "secret.key"))
			if err != nil {
				return err
			}
			srv, err := server.New(cfg, server.Deps{Library: lib, Store: st, Secret: key, Log: log})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("listen on %s: %w", addr, err)
			}
			log.Info("serving", "url", "http://"+displayAddr(ln.Addr()), "data", g.dataDir)
			return srv.Serve(ctx, ln)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", ":8080", "address to listen on")
	cmd.Flags().StringVar(&content, "content", "", "serve the course from this directory and reload on change (for authors)")
	cmd.Flags().BoolVar(&cfg.SecureCookies, "secure-cookies", false, "mark cookies Secure (set when serving behind HTTPS)")
	return cmd
}

func displayAddr(a net.Addr) string {
	if tcp, ok := a.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		return fmt.Sprintf("localhost:%d", tcp.Port)
	}
	return a.String()
}
