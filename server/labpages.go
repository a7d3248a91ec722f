package server

import (
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/websocket"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/grader"
	"github.com/commlab/commlab/labs/netns"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/scenarios"
	"github.com/commlab/commlab/web"
)

// Terminal limits.
const (
	maxTerminalsPerUser = 8
	idleWarnAfter       = 25 * time.Minute
	idleCloseAfter      = 30 * time.Minute
)

var (
	errNoLab    = httpError{http.StatusNotFound, "err.nolab", "no such lab"}
	errLabsOff  = httpError{http.StatusServiceUnavailable, "err.labsoff", ""}
	errLabBusy  = httpError{http.StatusConflict, "err.labbusy", ""}
	errTooMany  = httpError{http.StatusTooManyRequests, "err.toomanyterms", strconv.Itoa(maxTerminalsPerUser)}
	errNotReady = httpError{http.StatusConflict, "err.labnotready", ""}
)

func (s *Server) labRoutes(r *gin.Engine) {
	r.GET("/labs/:scenario", s.labIntro)
	r.POST("/labs/:scenario/start", s.requireUser, s.labStart)
	lab := r.Group("/lab/:sid", s.requireUser, s.loadLab)
	lab.GET("", s.labPage)
	lab.GET("/state", s.labState)
	lab.GET("/commands", s.labCommands)
	lab.GET("/term/:node/ws", s.labTerminal)
	lab.GET("/metrics/ws", s.labMetrics)
	lab.POST("/hint/:n", s.labHint)
	lab.POST("/submit", s.labSubmit)
	lab.POST("/stop", s.labStop)
}

type labIntroData struct {
	Scenario *scenarios.Scenario
	Chapter  string
	Current  *session.Lab
	Off      string
	// Cannot says why this host cannot run the lab (a gpu lab without a GPU).
	Cannot string
}

func (s *Server) scenario(id string) (*scenarios.Scenario, error) {
	if s.cats == nil {
		return nil, errNotFound
	}
	sc, ok := s.cats.Get(id)
	if !ok {
		return nil, errNotFound
	}
	return sc, nil
}

func (s *Server) labIntro(c *gin.Context) {
	sc, err := s.scenario(c.Param("scenario"))
	if err != nil {
		s.fail(c, err)
		return
	}
	d := labIntroData{Scenario: sc, Off: s.labsOff}
	if ch, ok := s.lib.Course().Chapter(sc.Chapter); ok {
		d.Chapter = ch.Title
	}
	if s.labs != nil {
		if err := s.labs.Check(sc); errors.Is(err, netns.ErrBusy) {
			d.Cannot = web.T(langOf(c), "sec.hostfull")
		} else if err != nil {
			d.Cannot = err.Error()
		}
	}
	if u := userOf(c); u != nil && s.labs != nil {
		if l, ok := s.labs.Current(u.ID); ok && !ended(l) {
			d.Current = l
		}
	}
	s.renderPage(c, http.StatusOK, "labintro", sc.Title, d)
}

func (s *Server) labStart(c *gin.Context) {
	sc, err := s.scenario(c.Param("scenario"))
	if err != nil {
		s.fail(c, err)
		return
	}
	if s.labs == nil {
		s.fail(c, httpError{errLabsOff.status, errLabsOff.key, s.labsOff})
		return
	}
	if err := s.labs.Check(sc); errors.Is(err, netns.ErrBusy) {
		s.fail(c, httpError{http.StatusServiceUnavailable, "sec.hostfull", err.Error()})
		return
	} else if err != nil {
		s.fail(c, httpError{http.StatusServiceUnavailable, "err.labcannot", err.Error()})
		return
	}
	u := userOf(c)
	prog, err := s.store.Progress(c.Request.Context(), u.ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	attempt := prog[sc.Chapter].LabAttempts + 1
	l, err := s.labs.Start(u.ID, sc.Draw(scenarios.SeedFor(s.secret, u.ID, sc.ID, attempt)))
	if errors.Is(err, session.ErrBusy) {
		s.fail(c, errLabBusy)
		return
	} else if err != nil {
		s.fail(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/lab/"+l.ID)
}

// loadLab finds the learner's own lab; any other id is "not found".
func (s *Server) loadLab(c *gin.Context) {
	if s.labs == nil {
		s.fail(c, errNoLab)
		return
	}
	l, err := s.labs.Get(userOf(c).ID, c.Param("sid"))
	if err != nil {
		s.fail(c, errNoLab)
		return
	}
	c.Set("lab", l)
	c.Next()
}

func labOf(c *gin.Context) *session.Lab { return c.MustGet("lab").(*session.Lab) }

func ended(l *session.Lab) bool {
	select {
	case <-l.Ended():
		return true
	default:
		return false
	}
}

type labPageData struct {
	Lab       *session.Lab
	Status    session.Status
	Task      template.HTML
	Taxonomy  []scenarios.Class
	Where     []string
	Hints     []hintView
	Result    *grader.Result
	Debrief   template.HTML
	Injected  []string
	Scenario  *scenarios.Scenario
	Remediate bool
}

type hintView struct {
	N    int
	Cost string
	Text template.HTML
	Open bool
}

func (s *Server) labPage(c *gin.Context) {
	l := labOf(c)
	st := l.Status()
	sc := l.Variant.Scenario
	d := labPageData{Lab: l, Status: st, Scenario: sc, Taxonomy: scenarios.Taxonomy, Remediate: sc.Remediation != nil,
		Where: []string{scenarios.WhereNode, scenarios.WhereNIC, scenarios.WhereGPU, scenarios.WherePort}}
	if st.State != session.Starting && st.State != session.Failed {
		d.Task, _ = course.Markdown(l.Variant.Task())
	}
	used := map[int]bool{}
	for _, i := range l.HintsUsed() {
		used[i] = true
	}
	for i, h := range sc.Hints {
		hv := hintView{N: i + 1, Cost: strconv.FormatFloat(h.Cost*100, 'f', 0, 64) + "%", Open: used[i]}
		if used[i] {
			hv.Text, _ = course.Markdown(l.Variant.Expand(h.Text))
		}
		d.Hints = append(d.Hints, hv)
	}
	// The answer, the debrief and the injected commands appear only after grading.
	if res := l.Result(); res != nil {
		d.Result = res
		d.Debrief, _ = course.Markdown(l.Variant.Debrief())
		d.Injected = l.Injected()
	}
	// xterm.js themes its terminal with a <style> element it creates.
	c.Header("Content-Security-Policy", strings.Replace(csp, "style-src 'self'", "style-src 'self' 'unsafe-inline'", 1))
	s.renderPage(c, http.StatusOK, "lab", sc.Title, d)
}

func (s *Server) labState(c *gin.Context) { c.JSON(http.StatusOK, labOf(c).Status()) }

type commandView struct {
	Terminal string `json:"terminal"`
	Seq      int    `json:"seq"`
	Line     string `json:"line"`
	Output   string `json:"output"`
	Exit     int    `json:"exit"`
}

// labCommands lists the commands of the learner's terminals, parsed from the server's
// recordings: the evidence picker offers only these.
func (s *Server) labCommands(c *gin.Context) {
	ts, err := labOf(c).Transcripts()
	if err != nil {
		s.fail(c, err)
		return
	}
	out := []commandView{}
	for _, t := range ts {
		for _, cmd := range t.Commands {
			o := cmd.Output
			if len(o) > 4000 {
				o = o[:4000] + "\n…"
			}
			out = append(out, commandView{Terminal: t.Terminal, Seq: cmd.Seq, Line: cmd.Line, Output: o, Exit: cmd.Exit})
		}
	}
	c.JSON(http.StatusOK, gin.H{"commands": out})
}

func (s *Server) labHint(c *gin.Context) {
	n, err := strconv.Atoi(c.Param("n"))
	if err != nil {
		s.fail(c, errNotFound)
		return
	}
	if _, err := labOf(c).Hint(n - 1); err != nil {
		s.fail(c, errNotFound)
		return
	}
	c.Redirect(http.StatusSeeOther, "/lab/"+labOf(c).ID+"#hints")
}

// labSubmit grades the diagnosis posted by the answer form.
func (s *Server) labSubmit(c *gin.Context) {
	l := labOf(c)
	d := grader.Diagnosis{Class: c.PostForm("class"), Location: map[string]string{}}
	for _, k := range []string{scenarios.WhereNode, scenarios.WhereNIC, scenarios.WhereGPU, scenarios.WherePort} {
		if v := strings.TrimSpace(c.PostForm(k)); v != "" {
			d.Location[k] = v
		}
	}
	for _, ref := range c.PostFormArray("evidence") {
		term, seq, ok := strings.Cut(ref, "#")
		n, err := strconv.Atoi(seq)
		if !ok || err != nil {
			s.fail(c, httpError{http.StatusBadRequest, "err.badform", "evidence " + ref})
			return
		}
		d.Evidence = append(d.Evidence, grader.EvidenceRef{Terminal: term, Seq: n})
	}
	// Grading re-measures the workload, which takes a while: not bound to the request.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), 5*time.Minute)
	defer cancel()
	res, err := l.Grade(ctx, d)
	if errors.Is(err, session.ErrNotReady) {
		s.fail(c, errNotReady)
		return
	} else if err != nil {
		s.fail(c, err)
		return
	}
	if err := s.store.RecordLab(c.Request.Context(), l.Learner, l.Variant.Scenario.Chapter, l.Variant.Scenario.ID, res.Score, res.Passed); err != nil {
		s.fail(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/lab/"+l.ID+"#result")
}

func (s *Server) labStop(c *gin.Context) {
	l := labOf(c)
	l.Stop()
	c.Redirect(http.StatusSeeOther, "/labs/"+l.Variant.Scenario.ID)
}

// termCounter bounds the open terminals of each learner.
type termCounter struct {
	mu sync.Mutex
	n  map[int64]int
}

func (tc *termCounter) acquire(user int64) bool {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.n[user] >= maxTerminalsPerUser {
		return false
	}
	tc.n[user]++
	return true
}

func (tc *termCounter) release(user int64) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.n[user]--
}

type termControl struct {
	Type string `json:"type"`
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// labTerminal bridges a browser terminal to a node's shell: binary frames carry bytes
// both ways, text frames carry JSON control messages (resize from the browser; idle
// warnings and close notices from the server). On every connect the scrollback is
// replayed first, so a reconnect after a network blip restores the screen.
func (s *Server) labTerminal(c *gin.Context) {
	l := labOf(c)
	t, ok := l.Terminal(c.Param("node"))
	if !ok {
		s.fail(c, errNotReady)
		return
	}
	user := userOf(c).ID
	if !s.terms.acquire(user) {
		s.fail(c, errTooMany)
		return
	}
	defer s.terms.release(user)
	ws, err := upgradeWS(c, wsTerminalReadLimit)
	if err != nil {
		return
	}
	defer ws.Close()
	lang := langOf(c)
	scroll, out, detach := t.Attach()
	defer detach()

	var wmu sync.Mutex
	write := func(typ int, p []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		_ = ws.SetWriteDeadline(time.Now().Add(wsWriteTimeout))
		return ws.WriteMessage(typ, p)
	}
	if len(scroll) > 0 && write(websocket.BinaryMessage, scroll) != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		pace := newInputPacer()
		for {
			typ, p, err := ws.ReadMessage()
			if err != nil || pace.wait(c.Request.Context(), len(p)) != nil {
				return
			}
			switch typ {
			case websocket.BinaryMessage:
				if _, err := t.Write(p); err != nil {
					return
				}
			case websocket.TextMessage:
				var m termControl
				if json.Unmarshal(p, &m) == nil && m.Type == "resize" {
					_ = t.Resize(m.Rows, m.Cols)
				}
			}
		}
	}()
	idle := time.NewTicker(time.Minute)
	defer idle.Stop()
	warned := false
	notice := func(typ, key string) {
		b, _ := json.Marshal(gin.H{"type": typ, "text": web.T(lang, key)})
		_ = write(websocket.TextMessage, b)
	}
	for {
		select {
		case <-done:
			return
		case <-l.Ended():
			notice("closed", "lab.ended")
			return
		case p, ok := <-out:
			if !ok {
				// The shell ended, or this viewer fell behind: the browser reconnects.
				return
			}
			if write(websocket.BinaryMessage, p) != nil {
				return
			}
		case <-idle.C:
			switch d := t.Idle(); {
			case d > idleCloseAfter:
				notice("closed", "lab.idleclosed")
				return
			case d > idleWarnAfter && !warned:
				warned = true
				notice("idle-warning", "lab.idlewarn")
			case d < idleWarnAfter:
				warned = false
			}
		}
	}
}

// labMetrics streams the workload's busbw samples and fault events to the chart.
func (s *Server) labMetrics(c *gin.Context) {
	l := labOf(c)
	ws, err := upgradeWS(c, wsChartReadLimit)
	if err != nil {
		return
	}
	defer ws.Close()
	past, ch, stop := l.Samples().Subscribe()
	defer stop()
	send := func(x session.Sample) error {
		_ = ws.SetWriteDeadline(time.Now().Add(wsWriteTimeout))
		return ws.WriteJSON(x)
	}
	for _, x := range past {
		if send(x) != nil {
			return
		}
	}
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	}()
	for {
		select {
		case <-gone:
			return
		case <-l.Ended():
			return
		case x := <-ch:
			if send(x) != nil {
				return
			}
		}
	}
}
