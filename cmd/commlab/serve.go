package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs"
	"github.com/commlab/commlab/labs/backend"
	"github.com/commlab/commlab/labs/netns"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/labs/slurm"
	"github.com/commlab/commlab/server"
	"github.com/commlab/commlab/server/auth"
	"github.com/commlab/commlab/server/store"
)

func newServeCmd(g *globals) *cobra.Command {
	var (
		addr    string
		content string
		cfg     server.Config
		allowHW bool
		charts  int
		config  string
		drain   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the course and labs over HTTP",
		Long: `serve starts the web server: course pages, accounts, progress, /healthz and
/metrics. State lives in the data directory (--data): commlab.db (SQLite; or
a PostgreSQL database with --store postgres://...),
secret.key (mode 0600: keys CSRF tokens and the learners' variant seeds) and
cert.key (mode 0600: the ed25519 key that signs exam certificates; its public half
is served at /cert/key.pem). With --content DIR the course is read from DIR
and reloaded when a file changes, for authors; otherwise the embedded course is used.

Limits: 1 running lab and 8 terminals per learner; 128 sandbox slots per host
(shared with 'lab up'; a start on a full host is refused at once); per lab 2048
tasks, 2 GiB, 3/4 of the CPUs and a 64 MiB /home; terminal input 256 KiB a frame
and 64 KiB/s; logins 1 per 2 s per address (burst 10); 2 password hashes at once.

With --config FILE (YAML) whose cluster section is set, labs run as Slurm jobs
on the cluster's compute nodes, one 'commlab agent' per node (docs/slurm.md);
without it every lab runs on this host.

/metrics is served to an admin's session, or with "Authorization: Bearer TOKEN"
when COMMLAB_METRICS_TOKEN=TOKEN is set in the server's environment.

Replicas: several serve processes with one PostgreSQL --store (and the same
secret.key and cert.key) can serve behind one address. A lab runs on the replica
that started it; with --advertise URL (the address the other replicas reach this
one at) each replica records the labs it starts and forwards requests for the
others' labs, terminal websockets included, to their replica. Without it the
server serves alone and forwards nothing.

With --drain D a replica stops without losing a lab: at SIGTERM (or SIGINT) it
starts no new lab (the learner is asked to try again, which behind the proxy
may reach another replica), tells the learners at its terminals, and serves on
until its labs have ended (answered, stopped or timed out) or D has passed;
then it stops as without --drain, ending the labs left. A second signal stops
it at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			log := slog.Default()
			if charts < 0 {
				return fmt.Errorf("--chart-runs %d: want 0 (no limit) or more", charts)
			}
			if drain < 0 {
				return fmt.Errorf("--drain %s: want 0 (stop at once) or more", drain)
			}
			var signals <-chan os.Signal
			if drain > 0 {
				var stop context.CancelFunc
				ctx, stop, signals = outliveSignal(ctx)
				defer stop()
			}
			var cluster *slurm.Config
			if config != "" {
				var err error
				if cluster, err = slurm.LoadConfig(config); err != nil {
					return err
				}
			}
			cfg.MetricsToken = os.Getenv("COMMLAB_METRICS_TOKEN")
			if cfg.Advertise != "" && !store.IsPostgresURL(g.store) {
				return errors.New("--advertise is for replicas that share one PostgreSQL database: give --store postgres://...")
			}
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
			st, err := g.openStore(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			key, err := auth.LoadOrCreateKey(filepath.Join(g.dataDir, "secret.key"))
			if err != nil {
				return err
			}
			deps := server.Deps{Library: lib, Store: st, Secret: key, Log: log, Scenarios: ct.scenarios}
			deps.Exams = ct.exams
			if deps.CertKey, err = loadCertKey(g); err != nil {
				return err
			}
			var labs *session.Manager
			var off error
			if cluster != nil {
				if labs, err = slurm.Labs(ctx, cluster, g.dataDir, log); err != nil {
					return err
				}
			} else {
				labs, off = startLabs(ctx, g.dataDir, allowHW, charts, log)
			}
			if labs != nil { // a nil *Manager must not become a non-nil interface
				deps.Labs = labs
				defer labs.Shutdown()
			}
			deps.LabsOff = off
			srv, err := server.New(cfg, deps)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("listen on %s: %w", addr, err)
			}
			log.Info("serving", "url", "http://"+displayAddr(ln.Addr()), "data", g.dataDir)
			if drain > 0 {
				serveCtx, stop := context.WithCancel(ctx)
				defer stop()
				go drainOnSignal(serveCtx, stop, signals, srv, drain, log)
				ctx = serveCtx
			}
			return srv.Serve(ctx, ln)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", ":8080", "address to listen on")
	cmd.Flags().StringVar(&content, "content", "", "serve the course from this directory and reload on change (for authors)")
	cmd.Flags().BoolVar(&cfg.SecureCookies, "secure-cookies", false, "mark cookies Secure (set when serving behind HTTPS)")
	cmd.Flags().StringVar(&config, "config", "", "server configuration file (YAML); a cluster section runs labs as Slurm jobs (docs/slurm.md)")
	cmd.Flags().StringVar(&cfg.Advertise, "advertise", "", "this replica's URL as the other replicas reach it (http://host:port): forward requests for labs between replicas (needs a PostgreSQL --store)")
	cmd.Flags().BoolVar(&allowHW, "allow-hardware-faults", false, "let labs apply hardware fault kinds (pcie-speed); unsafe on a machine others use")
	cmd.Flags().StringSliceVar(&cfg.TrustedProxies, "trusted-proxy", nil, "address or CIDR of a reverse proxy (nginx) whose X-Forwarded-For names the client, for the login rate limit (repeatable); without it every learner behind the proxy shares its address")
	cmd.Flags().DurationVar(&drain, "drain", 0, "at SIGTERM start no new lab and serve on until this replica's labs end, at most this long (e.g. 45m); a second signal stops at once; 0: stop at once, ending the labs")
	cmd.Flags().IntVar(&charts, "chart-runs", session.HostCharts(), "how many labs' chart workloads may run at once on this host (the rest wait their turn), so that a class's labs leave CPU to the learners' shells and the server; 0: no limit")
	return cmd
}

// outliveSignal returns a context that the first SIGTERM or SIGINT does not
// end (main's context does), its cancel, and those signals from now on. They
// stay caught until the process exits: one more while it stops changes nothing.
func outliveSignal(parent context.Context) (context.Context, context.CancelFunc, <-chan os.Signal) {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	return ctx, cancel, sig
}

// drainOnSignal drains srv at the first signal, then calls stop once its labs
// have ended, limit has passed, or a second signal came.
func drainOnSignal(ctx context.Context, stop context.CancelFunc, signals <-chan os.Signal, srv *server.Server, limit time.Duration, log *slog.Logger) {
	select {
	case <-signals:
	case <-ctx.Done():
		return
	}
	log.Info("draining: no new labs; stopping when the running ones end", "limit", limit)
	select {
	case <-srv.Drain():
		log.Info("drained: no lab runs")
	case <-time.After(limit):
		log.Warn("drain time is up: the labs still running end now", "limit", limit)
	case s := <-signals:
		log.Warn("second signal: stopping now", "signal", s)
	}
	stop()
}

// startLabs sweeps what a crashed run left behind, starts the fault watchdog and
// returns the lab manager; without root it returns why labs are off instead.
func startLabs(ctx context.Context, dataDir string, allowHW bool, charts int, log *slog.Logger) (*session.Manager, error) {
	if runtime.GOOS != "linux" {
		log.Warn("labs are off", "why", labs.ErrNeedsLinux)
		return nil, labs.ErrNeedsLinux
	}
	if os.Geteuid() != 0 {
		why := errors.New("labs create network namespaces, nftables tables and cgroups, so commlab must run as root (sudo make run)")
		log.Warn("labs are off", "why", why)
		return nil, why
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the commlab binary: %w", err)
	}
	inj, err := backend.OpenInjector(injector.Options{DataDir: dataDir, Logger: log, AllowHardware: allowHW})
	if err != nil {
		return nil, err
	}
	if ids, err := inj.Sweep(ctx); err != nil {
		log.Warn("revert faults left by an earlier run", "err", err)
	} else if len(ids) > 0 {
		log.Info("reverted faults left by an earlier run", "faults", ids)
	}
	if ids, err := netns.Sweep(ctx, dataDir); err != nil {
		log.Warn("remove sandboxes left by an earlier run", "err", err)
	} else if len(ids) > 0 {
		log.Info("removed sandboxes left by an earlier run", "sandboxes", ids)
	}
	go inj.Watch(ctx, time.Second)
	return session.NewManager(ctx, session.Config{
		Provider: backend.Local{DataDir: dataDir, Exe: exe, Log: log},
		Faults:   backend.Faults{In: inj},
		DataDir:  dataDir,
		Turns:    &session.Turns{Charts: charts}, // every lab's workload runs on this host
		Log:      log,
	}), nil
}

func displayAddr(a net.Addr) string {
	if tcp, ok := a.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		return fmt.Sprintf("localhost:%d", tcp.Port)
	}
	return a.String()
}
