package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/websocket"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/grader"
	"github.com/commlab/commlab/labs"
	"github.com/commlab/commlab/labs/netns"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/labs/topology"
	"github.com/commlab/commlab/scenarios"
	"github.com/commlab/commlab/server/store"
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
	lab.POST("/hint/:n", s.notExamLab, s.labHint)
	lab.POST("/check", s.notExamLab, s.labCheck)
	lab.POST("/submit", s.notExamLab, s.labSubmit)
	lab.POST("/giveup", s.notExamLab, s.labGiveUp)
	lab.POST("/stop", s.notExamLab, s.labStop)
}

// gradeTimeout bounds a check or a submission: the workload is measured again (twice
// at most), which takes a few seconds on a quiet host.
const gradeTimeout = 2 * time.Minute

type labIntroData struct {
	Scenario *scenarios.Scenario
	Chapter  string
	// Summary is the task with its variant's values left out.
	Summary template.HTML
	// Nodes and NICs of the topology (netns labs), as lists to read.
	Nodes, NICs int
	NodeList    string
	NICList     string
	Minutes     int
	Remediate   bool
	Rules       bool // the remediation is the learner's alerting rules, not a fix
	// Current is the learner's running lab, whichever scenario it is.
	Current *runningLab
	Off     string
	// Cannot says why this host cannot run the lab (a gpu lab without a GPU).
	Cannot string
}

var paramRef = regexp.MustCompile(`\$\{[a-z_0-9]+\}`)

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
	d := labIntroData{Scenario: sc, Minutes: int(session.DefaultTTL / time.Minute), Remediate: sc.Remediation != nil, Rules: alertRules(sc)}
	if ch, ok := s.lib.Course().Chapter(sc.Chapter); ok {
		d.Chapter = ch.Title
	}
	d.Summary, _ = course.Markdown(paramRef.ReplaceAllString(sc.Task, "…"))
	if t, err := topology.Load(sc.Environment.Topology); err == nil && sc.Environment.Kind != "gpu" {
		names := t.NodeNames()
		d.Nodes, d.NodeList = len(names), strings.Join(names, ", ")
		var nics []string
		for _, nic := range t.Nodes[0].NICs {
			nics = append(nics, nic.Name+" ("+string(nic.Role)+")")
		}
		d.NICs, d.NICList = len(nics), strings.Join(nics, ", ")
	}
	if s.labs == nil {
		d.Off = s.labsOffError().message(langOf(c))
	} else {
		if err := s.labs.Check(sc); errors.Is(err, netns.ErrBusy) {
			d.Cannot = web.T(langOf(c), "sec.hostfull")
		} else if errors.Is(err, labs.ErrNeedsLinux) {
			d.Cannot = web.T(langOf(c), "err.needslinux")
		} else if err != nil {
			d.Cannot = err.Error()
		}
	}
	if u := userOf(c); u != nil {
		if d.Current, err = s.runningPractice(c.Request.Context(), u.ID); err != nil {
			s.fail(c, err)
			return
		}
	}
	s.renderPage(c, http.StatusOK, "labintro", sc.Title, d)
}

// runningLab is a learner's running lab as a link names it.
type runningLab struct {
	ID       string
	Scenario *scenarios.Scenario
}

// runningPractice is the learner's running lab, on this replica or another
// (its link is forwarded there); nil if none runs. An exam lab is not named:
// its scenario is the exam's secret.
func (s *Server) runningPractice(ctx context.Context, learner int64) (*runningLab, error) {
	if s.labs != nil {
		if l, ok := s.practiceLab(learner); ok && l.Running() {
			return &runningLab{ID: l.ID, Scenario: l.Variant.Scenario}, nil
		}
	}
	others, err := s.labsElsewhere(ctx, learner)
	for _, o := range others {
		if sc, ok := s.cats.Get(o.Scenario); ok && o.Attempt == 0 {
			return &runningLab{ID: o.LabID, Scenario: sc}, err
		}
	}
	return nil, err
}

// labsOffError says why this server runs no labs.
func (s *Server) labsOffError() httpError {
	if errors.Is(s.labsOff, labs.ErrNeedsLinux) {
		return httpError{http.StatusServiceUnavailable, "err.needslinux", s.labsOff.Error()}
	}
	why := ""
	if s.labsOff != nil {
		why = s.labsOff.Error()
	}
	return httpError{errLabsOff.status, errLabsOff.key, why}
}

// admit refuses, with a learner's message, a lab this server cannot start now (labs
// off, the host full, a feature missing), and otherwise draws the learner's next
// variant of it.
func (s *Server) admit(c *gin.Context, sc *scenarios.Scenario) (*scenarios.Variant, bool) {
	if s.labs == nil {
		s.fail(c, s.labsOffError())
		return nil, false
	}
	if err := s.labs.Check(sc); errors.Is(err, netns.ErrBusy) {
		s.fail(c, httpError{http.StatusServiceUnavailable, "sec.hostfull", err.Error()})
		return nil, false
	} else if errors.Is(err, labs.ErrNeedsLinux) {
		s.fail(c, httpError{http.StatusServiceUnavailable, "err.needslinux", err.Error()})
		return nil, false
	} else if err != nil {
		s.fail(c, httpError{http.StatusServiceUnavailable, "err.labcannot", err.Error()})
		return nil, false
	}
	u := userOf(c)
	prog, err := s.store.Progress(c.Request.Context(), u.ID)
	if err != nil {
		s.fail(c, err)
		return nil, false
	}
	return sc.Draw(scenarios.SeedFor(s.secret, u.ID, sc.ID, prog[sc.Chapter].LabAttempts+1)), true
}

func (s *Server) labStart(c *gin.Context) {
	sc, err := s.scenario(c.Param("scenario"))
	if err != nil {
		s.fail(c, err)
		return
	}
	v, ok := s.admit(c, sc)
	if !ok {
		return
	}
	u := userOf(c)
	// "Try again" keeps the variant of the lab it came from; "new variant" draws anew.
	if prev, err := s.labs.Get(u.ID, c.PostForm("again")); err == nil && prev.Variant.Scenario.ID == sc.ID {
		v = prev.Variant
	}
	l, err := s.startLab(c.Request.Context(), store.LabOwner{LearnerID: u.ID}, v, 0)
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
	StepText  string
	QueueText string
	Running   bool
	Task      template.HTML
	Taxonomy  []scenarios.Class
	Where     []string
	Estimates []scenarios.Estimate
	Hints     []hintView
	Check     *resultView
	Result    *resultView
	Revealed  bool
	Debrief   template.HTML
	Injected  []string
	Scenario  *scenarios.Scenario
	Remediate bool
	Rules     bool
	// Exam is set for a lab of an exam attempt: the page names neither the
	// scenario nor its chapter, and offers no hints, checks, give-up nor debrief.
	Exam *labExam
	// Workshop is the live workshop the lab belongs to (0: none): the page shows
	// its instructor's messages and revealed hints live.
	Workshop int64
}

// resultView is a grading in the UI language. Final is false for a check.
type resultView struct {
	Final      bool            `json:"final"`
	Passed     bool            `json:"passed"`
	Score      float64         `json:"score"`
	ScoreText  string          `json:"score_text"`
	Verdict    string          `json:"verdict"`
	Criteria   []criterionView `json:"criteria"`
	ChecksLeft int             `json:"checks_left"`
	Raw        *grader.Result  `json:"-"`
}

type criterionView struct {
	Name   string `json:"name"`
	Title  string `json:"title"`
	OK     bool   `json:"ok"`
	Points string `json:"points"`
	Detail string `json:"detail"`
}

func viewResult(lang string, r *grader.Result, final bool, checksLeft int) *resultView {
	if r == nil {
		return nil
	}
	v := &resultView{Final: final, Passed: r.Passed, Score: r.Score, ScoreText: strconv.Itoa(int(math.Round(r.Score*100))) + "%",
		ChecksLeft: checksLeft, Raw: r}
	switch {
	case !final:
		v.Verdict = web.T(lang, "lab.check.verdict")
	case r.Passed:
		v.Verdict = web.T(lang, "lab.passed")
	default:
		v.Verdict = web.T(lang, "lab.notpassed")
	}
	for _, c := range r.Criteria {
		pts := fmt.Sprintf("%.2f", c.Earned)
		if c.Weight > 0 {
			pts += fmt.Sprintf(" / %.2f", c.Weight)
		}
		v.Criteria = append(v.Criteria, criterionView{Name: c.Name, Title: web.T(lang, "crit."+c.Name),
			OK: c.Earned >= c.Weight-1e-9, Points: pts, Detail: fmt.Sprintf(web.T(lang, c.Key), c.Args...)})
	}
	return v
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
	lang := langOf(c)
	d := labPageData{Lab: l, Status: st, StepText: web.T(lang, st.Step), QueueText: queueText(lang, st.Queue), Running: l.Running(), Scenario: sc,
		Taxonomy: scenarios.Taxonomy, Remediate: sc.Remediation != nil, Rules: alertRules(sc), Where: whereFields(sc),
		Estimates: sc.Estimates}
	if st.State != session.Failed {
		d.Task, _ = course.Markdown(l.Variant.Task())
	}
	used := map[int]bool{}
	for _, i := range l.HintsOpen() {
		used[i] = true
	}
	for i, h := range sc.Hints {
		hv := hintView{N: i + 1, Cost: strconv.FormatFloat(h.Cost*100, 'f', 0, 64) + "%", Open: used[i]}
		if used[i] {
			hv.Text, _ = course.Markdown(l.Variant.Expand(h.Text))
		}
		d.Hints = append(d.Hints, hv)
	}
	d.Check = viewResult(lang, l.LastCheck(), false, st.ChecksLeft)
	d.Result = viewResult(lang, l.Result(), true, 0)
	// The debrief and the injected commands appear only after a passed submission or
	// once the learner gave up; a wrong answer shows its criteria only.
	if l.Revealed() {
		d.Revealed = true
		d.Debrief, _ = course.Markdown(l.Variant.Debrief())
		d.Injected = l.Injected()
	}
	title := sc.Title
	if d.Exam = s.examModeOf(c.Request.Context(), l, lang); d.Exam != nil {
		title = d.Exam.Title
		d.Hints, d.Check, d.Result, d.Revealed, d.Debrief, d.Injected = nil, nil, nil, false, "", nil
		d.Status.Failure = maskFailure(d.Status.Failure, lang)
		c.Header("Cache-Control", "no-store")
	} else {
		d.Workshop = s.workshopOfLab(c.Request.Context(), l)
	}
	c.Header("Content-Security-Policy", labCSP())
	s.renderPage(c, http.StatusOK, "lab", title, d)
}

// maskFailure hides why an exam lab failed: the reason may name the fault it
// injects (the server's log keeps it).
func maskFailure(f, lang string) string {
	if f == "" {
		return ""
	}
	return web.T(lang, "exam.lab.failed")
}

// labCSP is the policy of pages with terminals: xterm.js themes its terminal with a
// <style> element it creates.
func labCSP() string {
	return strings.Replace(csp, "style-src 'self'", "style-src 'self' 'unsafe-inline'", 1)
}

// whereFields are the location fields the scenario's diagnosis has, in a fixed order:
// a network-only lab asks for no GPU nor switch port.
func whereFields(sc *scenarios.Scenario) []string {
	var out []string
	for _, k := range []string{scenarios.WhereNode, scenarios.WhereNIC, scenarios.WhereGPU, scenarios.WherePort} {
		if _, ok := sc.Diagnosis.Location[k]; ok {
			out = append(out, k)
		}
	}
	return out
}

type stateView struct {
	session.Status
	StepText string `json:"step_text"`
	// QueueText is Status.Queue in the UI language, while the lab waits.
	QueueText string `json:"queue_text,omitempty"`
	Running   bool   `json:"running"`
}

func (s *Server) labState(c *gin.Context) {
	l := labOf(c)
	st := l.Status()
	if s.xlabs.get(l.ID) != nil {
		st.Failure = maskFailure(st.Failure, langOf(c))
	}
	lang := langOf(c)
	c.JSON(http.StatusOK, stateView{Status: st, StepText: web.T(lang, st.Step), QueueText: queueText(lang, st.Queue), Running: l.Running()})
}

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
	h, err := labOf(c).Hint(n - 1)
	if err != nil {
		s.fail(c, errNotFound)
		return
	}
	// The page's script opens the hint in place (the half-filled answer stays); a
	// browser without it reloads the page.
	if wantsJSON(c) {
		text, _ := course.Markdown(h.Text)
		c.JSON(http.StatusOK, gin.H{"n": n, "html": string(text)})
		return
	}
	c.Redirect(http.StatusSeeOther, "/lab/"+labOf(c).ID+"#hints")
}

// diagnosis reads the answer form.
func diagnosis(c *gin.Context) (grader.Diagnosis, error) {
	d := grader.Diagnosis{Class: c.PostForm("class"), Location: map[string]string{}}
	for _, k := range []string{scenarios.WhereNode, scenarios.WhereNIC, scenarios.WhereGPU, scenarios.WherePort} {
		if v := strings.TrimSpace(c.PostForm(k)); v != "" {
			d.Location[k] = v
		}
	}
	for k, vals := range c.Request.PostForm {
		id, ok := strings.CutPrefix(k, "estimate.")
		if !ok || len(vals) == 0 || strings.TrimSpace(vals[0]) == "" {
			continue
		}
		x, err := strconv.ParseFloat(strings.TrimSpace(vals[0]), 64)
		if err != nil {
			return d, httpError{http.StatusBadRequest, "err.badform", k + " " + vals[0]}
		}
		if d.Estimates == nil {
			d.Estimates = map[string]float64{}
		}
		d.Estimates[id] = x
	}
	for _, ref := range c.PostFormArray("evidence") {
		term, seq, ok := strings.Cut(ref, "#")
		n, err := strconv.Atoi(seq)
		if !ok || err != nil {
			return d, httpError{http.StatusBadRequest, "err.badform", "evidence " + ref}
		}
		d.Evidence = append(d.Evidence, grader.EvidenceRef{Terminal: term, Seq: n})
	}
	return d, nil
}

// gradeErr maps a grading's failure to what the learner is told; the lab stays usable.
func (s *Server) gradeErr(c *gin.Context, err error) {
	switch {
	case errors.Is(err, session.ErrNoChecksLeft):
		s.fail(c, httpError{http.StatusConflict, "err.nochecks", ""})
	case errors.Is(err, session.ErrNotReady):
		s.fail(c, errNotReady)
	default:
		s.fail(c, httpError{http.StatusServiceUnavailable, "err.grade", err.Error()})
	}
}

// labCheck grades the answer without ending the lab (a limited number of times).
func (s *Server) labCheck(c *gin.Context) {
	l := labOf(c)
	d, err := diagnosis(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), gradeTimeout)
	defer cancel()
	res, err := l.Check(ctx, d)
	if err != nil {
		s.gradeErr(c, err)
		return
	}
	if wantsJSON(c) {
		c.JSON(http.StatusOK, viewResult(langOf(c), &res, false, l.Status().ChecksLeft))
		return
	}
	c.Redirect(http.StatusSeeOther, "/lab/"+l.ID+"#check")
}

// labSubmit grades the final answer and ends the lab.
func (s *Server) labSubmit(c *gin.Context) {
	l := labOf(c)
	d, err := diagnosis(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	// Grading re-measures the workload: bound, but not by the request.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), gradeTimeout)
	defer cancel()
	res, err := l.Grade(ctx, d)
	if err != nil {
		s.gradeErr(c, err)
		return
	}
	if err := s.store.RecordLab(c.Request.Context(), l.Learner, l.Variant.Scenario.Chapter, l.Variant.Scenario.ID, res.Score, res.Passed); err != nil {
		s.fail(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/lab/"+l.ID+"#result")
}

// labGiveUp ends the lab (if it still runs) and shows the debrief.
func (s *Server) labGiveUp(c *gin.Context) {
	l := labOf(c)
	l.GiveUp()
	c.Redirect(http.StatusSeeOther, "/lab/"+l.ID+"#debrief")
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
	draining := s.draining // told once, then nil
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
		case <-draining:
			draining = nil
			notice("notice", "lab.draining")
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
	gone := readUntilClosed(ws)
	for {
		select {
		case <-gone:
			return
		case <-l.Ended():
			// The chart stops reconnecting.
			_ = send(session.Sample{Type: "ended", T: float64(time.Now().UnixMilli()) / 1000})
			return
		case x := <-ch:
			if send(x) != nil {
				return
			}
		}
	}
}

// alertRules says whether a lab grades the learner's alerting rules (~/alerts.yml).
func alertRules(sc *scenarios.Scenario) bool {
	return sc.Remediation != nil && sc.Remediation.Measure == scenarios.MeasureAlertRules
}
