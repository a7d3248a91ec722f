// Package server is commlab's HTTP front: the gin router, server-rendered course pages,
// accounts and sessions, progress, health and metrics. Durable state lives behind
// store.Store; course content comes from a course.Library.
package server

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/exam"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/scenarios"
	"github.com/commlab/commlab/server/auth"
	"github.com/commlab/commlab/server/store"
	"github.com/commlab/commlab/web"
)

// Config is the server's configuration. The zero value of every optional field works.
type Config struct {
	// SecureCookies marks cookies Secure; set it when serving over HTTPS.
	SecureCookies bool
	// SessionTTL is how long a login lasts (default 14 days).
	SessionTTL time.Duration
	// MaxFormBytes bounds a request body (default 64 KiB).
	MaxFormBytes int64
	// LoginRate and LoginBurst limit login and registration attempts per client IP
	// (default 1 every 2 s, burst 10).
	LoginRate  float64
	LoginBurst int
	// MetricsToken, when set, lets a scraper read /metrics with
	// "Authorization: Bearer <token>"; without it only an admin's session can.
	MetricsToken string
	// Advertise is this replica's URL as the other replicas reach it
	// (http://host:port). Set, it records the labs it starts in the store and
	// forwards requests for the others' labs to them; empty, the server serves
	// alone and forwards nothing.
	Advertise string
	// TrustedProxies are the addresses or CIDRs of reverse proxies (nginx) whose
	// X-Forwarded-For names the client, for the login rate limit and the logs; empty,
	// the client is the peer address and the header is ignored.
	TrustedProxies []string
}

func (c *Config) defaults() {
	if c.SessionTTL == 0 {
		c.SessionTTL = 14 * 24 * time.Hour
	}
	if c.MaxFormBytes == 0 {
		c.MaxFormBytes = 64 << 10
	}
	if c.LoginRate == 0 {
		c.LoginRate = 0.5
	}
	if c.LoginBurst == 0 {
		c.LoginBurst = 10
	}
}

// Deps are the server's collaborators.
type Deps struct {
	Library *course.Library
	Store   store.Store
	// Secret keys the CSRF tokens and the learners' variant seeds (32 random bytes,
	// kept across restarts in the data directory, mode 0600).
	Secret []byte
	// Scenarios and Labs serve the labs; nil Labs means labs are off (pages say why).
	Scenarios *scenarios.Catalog
	Labs      Labs
	// LabsOff, when Labs is nil, says why (e.g. "labs need root", labs.ErrNeedsLinux).
	LabsOff error
	Log     *slog.Logger
	// CertKey signs certificates; nil turns certificates and exams off.
	CertKey ed25519.PrivateKey
	// Exams are the certification exams; nil turns exams off.
	Exams *exam.Set
}

// Labs is what the server needs of the lab manager (session.Manager), so lab pages
// and websockets can be tested without root.
type Labs interface {
	Check(s *scenarios.Scenario) error
	// StartAs starts a lab of the given id (session.NewID) with a TTL of its
	// own (a workshop's; 0 keeps the manager's).
	StartAs(id string, learner int64, v *scenarios.Variant, ttl time.Duration) (*session.Lab, error)
	Get(learner int64, id string) (*session.Lab, error)
	Current(learner int64) (*session.Lab, bool)
	// All lists every lab the manager knows, ended ones included.
	All() []*session.Lab
}

// Server serves commlab over HTTP.
type Server struct {
	cfg     Config
	lib     *course.Library
	store   store.Store
	cats    *scenarios.Catalog
	labs    Labs
	labsOff error
	terms   *termCounter
	csrf    *auth.CSRF
	secret  []byte // keys variant seeds
	limiter *auth.Limiter
	log     *slog.Logger
	pages   map[string]*template.Template
	hlCSS   []byte
	cache   *pageCache
	metrics *metrics
	router  *gin.Engine
	ca      *authority
	exams   *exam.Set
	live    *liveHub
	bus     *liveBus
	xlabs   examLabs
	// replicas is nil unless Config.Advertise is set.
	replicas *replicas
	// rowCommands caches the last commands of the labs whose dashboard rows
	// other replicas ask for.
	rowCommands commandCache
	// draining is closed by Drain: no lab starts any more.
	draining  chan struct{}
	drainOnce sync.Once
}

// New builds a server.
func New(cfg Config, d Deps) (*Server, error) {
	cfg.defaults()
	pages, err := web.Pages(nil)
	if err != nil {
		return nil, err
	}
	css, err := course.HighlightCSS()
	if err != nil {
		return nil, fmt.Errorf("highlight css: %w", err)
	}
	csrf, err := auth.NewCSRF(d.Secret)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:      cfg,
		lib:      d.Library,
		store:    d.Store,
		cats:     d.Scenarios,
		labs:     d.Labs,
		labsOff:  d.LabsOff,
		terms:    &termCounter{n: map[int64]int{}},
		csrf:     csrf,
		secret:   d.Secret,
		limiter:  auth.NewLimiter(rate.Limit(cfg.LoginRate), cfg.LoginBurst, 10*time.Minute),
		log:      d.Log,
		pages:    pages,
		hlCSS:    []byte(css),
		cache:    &pageCache{},
		metrics:  newMetrics(),
		ca:       newAuthority(d.CertKey, d.Store),
		exams:    d.Exams,
		live:     newLiveHub(),
		xlabs:    examLabs{byLab: map[string]*examLab{}},
		draining: make(chan struct{}),
	}
	if cfg.Advertise != "" {
		if s.replicas, err = newReplicas(cfg.Advertise, d.Store); err != nil {
			return nil, err
		}
	}
	s.bus = &liveBus{hub: s.live, log: d.Log}
	if pg, ok := d.Store.(*store.Postgres); ok {
		s.bus.pool = pg.Pool()
	}
	s.router = s.routes()
	if err := s.router.SetTrustedProxies(cfg.TrustedProxies); err != nil {
		return nil, fmt.Errorf("trusted proxies %v: %w", cfg.TrustedProxies, err)
	}
	return s, nil
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return s.router }

// Serve serves on ln until ctx is done, then shuts down gracefully, giving in-flight
// requests up to 10 seconds.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.router,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       120 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	if s.replicas != nil {
		// The labs of this replica's previous run ended with it.
		if err := s.replicas.endAll(ctx); err != nil {
			return err
		}
		go s.sweepLabOwners(ctx)
	}
	go s.sweepSessions(ctx)
	go s.sweepAttempts(ctx)
	go s.bus.listen(ctx)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.log.Info("shutting down", "grace", "10s")
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := hs.Shutdown(shutCtx)
	// The labs end with the process: their commands stay with the attempts, and
	// the other replicas stop counting them.
	s.keepExamCommands(shutCtx)
	if s.replicas != nil {
		s.replicas.down.Store(true)
		if err := s.replicas.endAll(shutCtx); err != nil {
			s.log.Warn("labs' end not recorded", "err", err)
		}
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// errDraining refuses a lab start on a server that is stopping.
var errDraining = httpError{http.StatusServiceUnavailable, "err.draining", ""}

// Drain readies the server to stop without losing a lab: it starts no new lab
// (errDraining; behind a proxy the learner's next try may reach another
// replica) and tells the learners at their terminals that it is stopping.
// The channel it returns is closed once none of its labs runs; the labs end as
// ever (answered, stopped, their time up).
func (s *Server) Drain() <-chan struct{} {
	s.drainOnce.Do(func() { close(s.draining) })
	idle := make(chan struct{})
	go func() {
		defer close(idle)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for s.labsRunning() {
			<-t.C
		}
	}()
	return idle
}

// isDraining reports whether Drain was called.
func (s *Server) isDraining() bool {
	select {
	case <-s.draining:
		return true
	default:
		return false
	}
}

// labsRunning reports whether a lab of this server is starting or running.
func (s *Server) labsRunning() bool {
	if s.labs == nil {
		return false
	}
	for _, l := range s.labs.All() {
		if l.Running() {
			return true
		}
	}
	return false
}

// sweepSessions deletes expired sessions every hour.
func (s *Server) sweepSessions(ctx context.Context) {
	every(ctx, time.Hour, func() {
		if n, err := s.store.DeleteExpiredSessions(ctx); err != nil {
			s.log.Warn("delete expired sessions", "err", err)
		} else if n > 0 {
			s.log.Info("deleted expired sessions", "count", n)
		}
	})
}

// every calls f every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
