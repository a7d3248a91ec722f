package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/websocket"

	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/scenarios"
	"github.com/commlab/commlab/server/store"
)

// Several replicas (commlab serve processes on one PostgreSQL database) can
// serve behind one address. A lab belongs to the replica that started it: its
// sandbox, shells and workload run on that replica's host. The store records
// each lab's owner by its advertised URL, and a replica that gets a request for
// a lab it does not run forwards the request there, websockets included. The
// hop grants nothing: the owner checks the session cookie, the CSRF token and
// the lab's learner as for any request. The store also knows which labs still
// run: a replica claims a lab there before it builds it, so one running lab per
// learner holds across replicas.

// hopHeader marks a request one replica forwarded to another. The receiver
// serves it itself or says there is no such lab; it never forwards it again,
// so replicas that disagree about an owner cannot bounce a request around.
const hopHeader = "X-Commlab-Hop"

// ownerKeep is how long a lab's owner stays recorded: longer than labs live.
const ownerKeep = 24 * time.Hour

var errOwnerGone = httpError{http.StatusBadGateway, "err.labowner", ""}

// replicas is what a replica knows of the others: nil when it serves alone.
type replicas struct {
	self   string // this replica's advertised URL, as the others reach it
	owners store.LabOwners
	// hop carries forwarded requests. A dead owner fails fast; a grading (the
	// slowest answer) has gradeTimeout.
	hop http.RoundTripper
	// down is set when this replica shuts down, having recorded the end of
	// all its labs (the store may be closed while their teardowns finish).
	down atomic.Bool
	// starting holds the ids of the labs this replica has claimed or is
	// claiming and its manager does not know yet.
	starting sync.Map
}

func newReplicas(advertise string, st store.Store) (*replicas, error) {
	self, err := advertisedURL(advertise)
	if err != nil {
		return nil, err
	}
	owners, ok := st.(store.LabOwners)
	if !ok {
		return nil, fmt.Errorf("advertise %s: the store %T cannot record lab owners", self, st)
	}
	return &replicas{self: self, owners: owners, hop: &http.Transport{
		Proxy:                 nil, // replicas reach each other directly, never through $HTTP_PROXY
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ResponseHeaderTimeout: gradeTimeout + 30*time.Second,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       90 * time.Second,
	}}, nil
}

// advertisedURL checks a replica's address: http(s)://host:port, no path.
func advertisedURL(s string) (string, error) {
	u, err := url.Parse(strings.TrimSuffix(s, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
		return "", fmt.Errorf("advertise %q: want the URL the other replicas reach this one at, e.g. http://10.0.0.5:8080", s)
	}
	return u.String(), nil
}

// startLab starts lab (its learner, and an exam lab's attempt and task) from
// v; ttl 0 is the manager's. A draining server refuses (errDraining). With replicas the lab is claimed in the store
// before it is built, so that of a learner's starts on several replicas at
// once one wins (session.ErrBusy for the others); the claim ends with the lab,
// or at once if the lab does not start.
func (s *Server) startLab(ctx context.Context, lab store.LabOwner, v *scenarios.Variant, ttl time.Duration) (*session.Lab, error) {
	if s.isDraining() {
		return nil, errDraining
	}
	lab.LabID, lab.Scenario = session.NewID(), v.Scenario.ID
	r := s.replicas
	if r == nil {
		return s.labs.StartAs(lab.LabID, lab.LearnerID, v, ttl)
	}
	r.starting.Store(lab.LabID, true)
	defer r.starting.Delete(lab.LabID)
	if err := s.claim(ctx, &lab); err != nil {
		return nil, err
	}
	l, err := s.labs.StartAs(lab.LabID, lab.LearnerID, v, ttl)
	if err != nil {
		if err := r.owners.EndLab(context.WithoutCancel(ctx), lab.LabID); err != nil {
			s.log.Warn("lab claim not released", "lab", lab.LabID, "err", err)
		}
		return nil, err
	}
	go func() {
		<-l.Ended()
		if r.down.Load() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.owners.EndLab(ctx, l.ID); err != nil {
			s.log.Warn("lab end not recorded", "lab", l.ID, "err", err)
		}
	}()
	return l, nil
}

// claim records this replica as lab's owner, unless the learner runs a lab
// (session.ErrBusy). A running lab that is in fact gone (ended here, or on a
// replica that does not answer) is marked ended, and the claim tried again.
func (s *Server) claim(ctx context.Context, lab *store.LabOwner) error {
	r := s.replicas
	lab.Replica = r.self
	for range 2 {
		err := r.owners.ClaimLab(ctx, lab)
		if !errors.Is(err, store.ErrExists) {
			return err
		}
		if gone, err := s.endGoneLabs(ctx, lab.LearnerID); err != nil || !gone {
			return cmp.Or(err, session.ErrBusy)
		}
	}
	return session.ErrBusy
}

// endGoneLabs marks ended the learner's labs that the store takes for running
// but are gone: this replica's that are neither starting nor running, and
// those of a replica that does not answer (its other labs with them). It says
// false, marking nothing, while one of them still runs.
func (s *Server) endGoneLabs(ctx context.Context, learner int64) (bool, error) {
	r := s.replicas
	running, err := r.owners.RunningLabs(ctx, learner)
	if err != nil {
		return false, err
	}
	var gone []func() error
	for _, o := range running {
		switch {
		case o.Replica == r.self:
			if _, starting := r.starting.Load(o.LabID); starting {
				return false, nil
			}
			if l, err := s.labs.Get(learner, o.LabID); err == nil && l.Running() {
				return false, nil
			}
			gone = append(gone, func() error { return r.owners.EndLab(ctx, o.LabID) })
		case r.answers(ctx, o.Replica):
			return false, nil
		default:
			gone = append(gone, func() error { return r.owners.EndReplicaLabs(ctx, o.Replica) })
		}
	}
	for _, end := range gone {
		if err := end(); err != nil {
			return false, err
		}
	}
	return len(gone) > 0, nil
}

// answers says whether the replica at base answers its /healthz within 2 s
// (with any status: a replica whose store is down still runs its labs).
func (r *replicas) answers(ctx context.Context, base string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
	if err != nil {
		return false
	}
	resp, err := r.hop.RoundTrip(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// labsElsewhere lists the learner's labs that the store takes for running on
// other replicas (none without replicas): this replica's manager knows its own.
func (s *Server) labsElsewhere(ctx context.Context, learner int64) ([]store.LabOwner, error) {
	r := s.replicas
	if r == nil {
		return nil, nil
	}
	running, err := r.owners.RunningLabs(ctx, learner)
	return slices.DeleteFunc(running, func(o store.LabOwner) bool { return o.Replica == r.self }), err
}

// examLabElsewhere is the lab of an attempt's task that another replica runs,
// if one does.
func (s *Server) examLabElsewhere(ctx context.Context, learner, attempt int64, task int) (*store.LabOwner, error) {
	others, err := s.labsElsewhere(ctx, learner)
	for _, o := range others {
		if o.Attempt == attempt && o.Task == task {
			return &o, err
		}
	}
	return nil, err
}

// forwardLab sends a request for a lab that another replica runs to that
// replica: the lab's own routes, and an exam task's lab routes (open, diagnose)
// when the task's lab runs there. It runs before the body is read (the owner
// reads it) and after the session is loaded: only the lab's own learner is
// forwarded, anyone else gets this replica's "no such lab".
func (s *Server) forwardLab(c *gin.Context) {
	r := s.replicas
	u := userOf(c)
	if r == nil || u == nil || hopped(c) {
		c.Next()
		return
	}
	var owner string
	var err error
	switch path := c.FullPath(); {
	case strings.HasPrefix(path, "/lab/:sid"):
		owner, err = s.labOwnerElsewhere(c.Request.Context(), u.ID, c.Param("sid"))
	case strings.HasPrefix(path, "/attempt/:aid/lab/:n"):
		owner, err = s.examOwnerElsewhere(c, u.ID)
	}
	switch {
	case err != nil:
		s.fail(c, err)
		c.Abort()
	case owner == "":
		c.Next()
	default:
		s.proxyTo(c, owner)
		c.Abort()
	}
}

// labOwnerElsewhere is the replica that runs the learner's lab id, or "" if
// this one does or no replica does (someone else's lab is nobody's here).
func (s *Server) labOwnerElsewhere(ctx context.Context, learner int64, id string) (string, error) {
	if s.labs != nil {
		if _, err := s.labs.Get(learner, id); err == nil {
			return "", nil
		}
	}
	o, err := s.replicas.owners.LabOwner(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "", nil
	case err != nil:
		return "", err
	case o.LearnerID != learner || o.Replica == s.replicas.self:
		return "", nil // someone else's lab, or one this replica has forgotten: "no such lab"
	}
	return o.Replica, nil
}

// examOwnerElsewhere is the replica that runs the lab of the path's attempt
// and task for the learner, or "" if none but this one does. The owner
// checks the attempt as for any request. An owner that does not answer is
// gone, and its labs with it: the task's lab can start here again.
func (s *Server) examOwnerElsewhere(c *gin.Context, learner int64) (string, error) {
	attempt, err1 := strconv.ParseInt(c.Param("aid"), 10, 64)
	task, err2 := strconv.Atoi(c.Param("n"))
	if err1 != nil || err2 != nil || s.xlabs.running(attempt, task) != nil {
		return "", nil
	}
	ctx := c.Request.Context()
	o, err := s.examLabElsewhere(ctx, learner, attempt, task)
	switch {
	case o == nil || err != nil:
		return "", err
	case !s.replicas.answers(ctx, o.Replica):
		return "", s.replicas.owners.EndReplicaLabs(ctx, o.Replica)
	}
	return o.Replica, nil
}

// proxyTo hands the request to the replica at owner and copies back its
// answer, or says the owner cannot be reached.
func (s *Server) proxyTo(c *gin.Context, owner string) {
	target, err := url.Parse(owner)
	if err != nil {
		s.fail(c, err)
		return
	}
	p := &httputil.ReverseProxy{
		Transport: s.replicas.hop,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host // the owner checks a websocket's Origin against it
			pr.Out.Header.Set(hopHeader, s.replicas.self)
		},
		// The owner's headers replace this replica's (two CSPs would both apply).
		ModifyResponse: func(*http.Response) error {
			clear(c.Writer.Header())
			return nil
		},
		ErrorHandler: func(_ http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the learner left
			}
			s.log.Warn("lab owner unreachable", "owner", owner, "path", r.URL.Path, "err", err)
			s.ownerGone(c)
		},
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	p.ServeHTTP(c.Writer, c.Request)
}

// ownerGone tells the learner that the lab's replica cannot be reached: as a
// page or JSON, and on a websocket as the notice that ends it, so the terminal
// shows it and neither the terminal nor the chart keeps reconnecting.
func (s *Server) ownerGone(c *gin.Context) {
	if !websocket.IsWebSocketUpgrade(c.Request) {
		s.fail(c, errOwnerGone)
		return
	}
	ws, err := upgradeWS(c, wsChartReadLimit)
	if err != nil {
		return
	}
	defer ws.Close()
	_ = ws.SetWriteDeadline(time.Now().Add(wsWriteTimeout))
	if strings.HasSuffix(c.FullPath(), "/metrics/ws") {
		_ = ws.WriteJSON(session.Sample{Type: "ended", T: float64(time.Now().UnixMilli()) / 1000})
		return
	}
	b, _ := json.Marshal(gin.H{"type": "closed", "text": errOwnerGone.message(langOf(c))})
	_ = ws.WriteMessage(websocket.TextMessage, b)
}

// endAll records that this replica's labs ended: at its start (those of its
// previous run) and at its shutdown.
func (r *replicas) endAll(ctx context.Context) error {
	return r.owners.EndReplicaLabs(ctx, r.self)
}

// sweepLabOwners forgets, every hour, the owners of labs started over a day ago.
func (s *Server) sweepLabOwners(ctx context.Context) {
	every(ctx, time.Hour, func() {
		if _, err := s.replicas.owners.DeleteLabOwners(ctx, time.Now().Add(-ownerKeep)); err != nil {
			s.log.Warn("delete old lab owners", "err", err)
		}
	})
}
