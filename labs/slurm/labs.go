package slurm

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs/session"
)

// Labs is `commlab serve`'s lab manager on a Slurm cluster: every lab is a
// job of c, its agents reach the hub that Labs serves on c's agent listener
// until ctx ends.
func Labs(ctx context.Context, c *Config, dataDir string, log *slog.Logger) (*session.Manager, error) {
	if log == nil {
		log = slog.Default()
	}
	reg, err := injector.NewRegistry(injector.Builtin()...)
	if err != nil {
		return nil, err
	}
	hub := NewHub(log)
	u, err := url.Parse(c.AgentURL)
	if err != nil {
		return nil, fmt.Errorf("cluster: agent_url %q: %w", c.AgentURL, err)
	}
	// With tls, the agents get how to trust the listener in their environment.
	var tlsConf *tls.Config
	var agentEnv map[string]string
	if c.TLS != nil {
		if tlsConf, agentEnv, err = c.TLS.listener(); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
	}
	ln, err := net.Listen("tcp", c.Listen())
	if err != nil {
		return nil, fmt.Errorf("cluster: listen for agents on %s: %w", c.Listen(), err)
	}
	mux := http.NewServeMux()
	mux.Handle(cmpPath(u.Path), hub)
	if tlsConf != nil {
		ln = tls.NewListener(ln, tlsConf)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("slurm agent listener", "err", err)
		}
	}()
	context.AfterFunc(ctx, func() { hs.Close() })
	log.Info("slurm labs", "partition", c.Partition, "agents", c.AgentURL, "listen", ln.Addr().String())
	return session.NewManager(ctx, session.Config{
		Provider: &Provider{Config: c, Hub: hub, AgentEnv: agentEnv},
		Faults:   Faults{Registry: reg},
		DataDir:  dataDir,
		Log:      log,
	}), nil
}

func cmpPath(p string) string {
	if p == "" {
		return "/agent"
	}
	return p
}

// Faults is session.Faults for Slurm labs: which kinds exist and what they
// change. The faults themselves go through the nodes' agents (Env is a
// session.NodeFaults), whose injectors check the node's kernel as they apply;
// hardware kinds are refused on a shared cluster.
type Faults struct{ Registry *injector.Registry }

var _ session.Faults = Faults{}

var errOnNodes = errors.New("a Slurm lab's faults are applied by its nodes' agents, not on the server")

// Apply implements session.Faults; it is never called for a Slurm lab.
func (Faults) Apply(context.Context, injector.Target, string, map[string]string, time.Duration) (string, string, error) {
	return "", "", errOnNodes
}

// Revert implements session.Faults; it is never called for a Slurm lab.
func (Faults) Revert(context.Context, string) error { return errOnNodes }

// ChangesLogin implements session.Faults.
func (f Faults) ChangesLogin(kind string) bool {
	k, err := f.Registry.Kind(kind)
	return err == nil && k.Login
}

// Supports implements session.Faults: a built-in kind that leaves hardware alone.
func (f Faults) Supports(_ context.Context, kind string) error {
	k, err := f.Registry.Kind(kind)
	if err != nil {
		return err
	}
	if k.Hardware {
		return fmt.Errorf("%w: %s changes real hardware, which Slurm labs never do on a shared cluster", injector.ErrHardwareOff, kind)
	}
	return nil
}
