package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/server/auth"
	"github.com/commlab/commlab/server/store"
)

// An instructor's dashboard and actions reach the labs of every replica. An
// action on the workshop's labs runs on this replica's labs, then goes, as the
// same request with the hop header, once to each other replica that runs a lab
// of the members concerned: one request a replica rather than one a lab, and
// the receiver runs the action's own code on its own labs. The receiver checks
// the instructor's session, role and CSRF token as for any request and answers
// with what it did (labResult); this replica answers the instructor. The
// dashboard asks those replicas for the rows of the learners whose labs they
// run; the instructor's view of a learner (page, terminals) goes to the lab's
// replica, and a member's own workshop page and feed ask it for their lab.

// askTimeout bounds a live view's question to another replica (an action
// waits as long as its labs take).
const askTimeout = 5 * time.Second

// labResult is what an instructor action did to the running labs it reached.
type labResult struct {
	Done     int      `json:"done"`
	Problems []string `json:"problems"`
}

func (r *labResult) add(o labResult) {
	r.Done += o.Done
	r.Problems = append(r.Problems, o.Problems...)
}

// hopped says whether another replica forwarded this request.
func hopped(c *gin.Context) bool { return c.GetHeader(hopHeader) != "" }

// actOnLabs runs act on this replica's running labs of the workshop (learner 0:
// every member's, else that learner's), then on the other replicas'. In a
// forwarded request it acts here only, answers the result and says false, as it
// does after answering an error.
func (s *Server) actOnLabs(c *gin.Context, w *store.Workshop, learner int64, act func(ctx context.Context, labs map[int64]*session.Lab) labResult) (labResult, bool) {
	ctx := c.Request.Context()
	labs, err := s.workshopLabsOf(ctx, w, learner)
	if err != nil {
		s.fail(c, err)
		return labResult{}, false
	}
	res := act(ctx, labs)
	if hopped(c) {
		c.JSON(http.StatusOK, res)
		return res, false
	}
	others, err := s.otherReplicas(ctx, w, learner)
	if err != nil {
		s.fail(c, err)
		return labResult{}, false
	}
	for _, base := range others {
		var o labResult
		if err := s.askReplica(c, base, c.Request.URL.Path, &o); err != nil {
			res.Problems = append(res.Problems, err.Error())
			continue
		}
		res.add(o)
	}
	return res, true
}

// otherReplicas are the replicas besides this one that run a lab of the
// workshop's member (learner 0: of any member); none without replicas.
func (s *Server) otherReplicas(ctx context.Context, w *store.Workshop, learner int64) ([]string, error) {
	r := s.replicas
	if r == nil {
		return nil, nil
	}
	var running []store.LabOwner
	var err error
	if learner != 0 {
		running, err = r.owners.RunningLabs(ctx, learner)
	} else {
		running, err = r.owners.WorkshopLabs(ctx, w.ID)
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, o := range running {
		if o.Replica != r.self && !slices.Contains(out, o.Replica) {
			out = append(out, o.Replica)
		}
	}
	return out, nil
}

// askReplica sends this request (a POST with its form) to path on the replica
// at base as a forwarded request, with the instructor's cookies and CSRF
// header, and decodes its JSON answer into v.
func (s *Server) askReplica(c *gin.Context, base, path string, v any) error {
	ctx := c.Request.Context()
	method, body := http.MethodGet, io.Reader(nil)
	if c.Request.Method == http.MethodPost {
		method, body = http.MethodPost, strings.NewReader(c.Request.PostForm.Encode())
	} else {
		// A live view's snapshot waits this long at most for a replica that hangs.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, askTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		return err
	}
	req.Host = c.Request.Host
	for _, h := range []string{"Cookie", auth.CSRFHeader} {
		if v := c.GetHeader(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set(hopHeader, s.replicas.self)
	resp, err := s.replicas.hop.RoundTrip(req)
	if err != nil {
		s.log.Warn("replica unreachable", "replica", base, "path", path, "err", err)
		return fmt.Errorf("%s: %s", base, errOwnerGone.message(langOf(c)))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", base, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = resp.Status
		}
		return fmt.Errorf("%s: %s", base, e.Error)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", base, err)
	}
	return nil
}

// memberLab is the member's running lab of the workshop, nil if none: this
// replica's, or one another replica runs, which it asks (one query and a
// request a replica that runs a lab of the member).
func (s *Server) memberLab(c *gin.Context, w *store.Workshop, member int64) *liveLab {
	if l := s.runningLabIn(w, member); l != nil {
		return newLiveLab(l)
	}
	if hopped(c) {
		return nil
	}
	others, err := s.otherReplicas(c.Request.Context(), w, member)
	if err != nil {
		s.log.Warn("workshop lab elsewhere", "workshop", w.ID, "learner", member, "err", err)
		return nil
	}
	for _, base := range others {
		var l *liveLab
		if err := s.askReplica(c, base, fmt.Sprintf("/workshops/%d/live/lab", w.ID), &l); err != nil {
			s.log.Warn("workshop lab elsewhere", "workshop", w.ID, "learner", member, "err", err)
			continue
		}
		if l != nil {
			return l
		}
	}
	return nil
}

// workshopOwnLab answers another replica: the member's running lab of the
// workshop here, or null.
func (s *Server) workshopOwnLab(c *gin.Context) {
	var l *liveLab
	if sl := s.runningLabIn(workshopOf(c), userOf(c).ID); sl != nil {
		l = newLiveLab(sl)
	}
	c.JSON(http.StatusOK, l)
}

// forwardToLearnersLab sends the instructor's view of a learner (their page and
// terminals) to the replica that runs the learner's lab when this one does not.
func (s *Server) forwardToLearnersLab(c *gin.Context) {
	w := workshopOf(c)
	uid, _ := strconv.ParseInt(c.Param("uid"), 10, 64)
	if s.replicas == nil || hopped(c) || s.runningLabIn(w, uid) != nil {
		c.Next()
		return
	}
	others, err := s.otherReplicas(c.Request.Context(), w, uid)
	if err != nil {
		s.fail(c, err)
		return
	}
	if len(others) == 0 {
		c.Next()
		return
	}
	s.proxyTo(c, others[len(others)-1]) // the newest lab's replica
	c.Abort()
}

// workshopLiveRows answers another replica's dashboard: the rows of the members
// whose lab of the workshop runs here.
func (s *Server) workshopLiveRows(c *gin.Context) {
	w := workshopOf(c)
	members, err := s.workshopDB().Roster(c.Request.Context(), w)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.rowCommands.forgetEnded()
	rows := []dashLearner{}
	for _, m := range members {
		if s.runningLabIn(w, m.ID) != nil {
			rows = append(rows, s.dashLearner(w, m, langOf(c), &s.rowCommands, time.Now()))
		}
	}
	c.JSON(http.StatusOK, rows)
}

// elsewhereRows puts into d the rows that the other replicas running labs of
// the workshop's members give for them: one query and one request a replica
// whatever the cohort's size. A replica that does not answer leaves its
// learners' rows as this replica sees them (no running lab).
func (s *Server) elsewhereRows(c *gin.Context, w *store.Workshop, d *dashboard) error {
	others, err := s.otherReplicas(c.Request.Context(), w, 0)
	if err != nil {
		return err
	}
	for _, base := range others {
		var rows []dashLearner
		if err := s.askReplica(c, base, fmt.Sprintf("/workshops/%d/live/rows", w.ID), &rows); err != nil {
			s.log.Warn("dashboard rows", "workshop", w.ID, "err", err)
			continue
		}
		for _, r := range rows {
			if i := slices.IndexFunc(d.Learners, func(l dashLearner) bool { return l.ID == r.ID }); i >= 0 {
				d.Learners[i] = r
			}
		}
	}
	return nil
}
