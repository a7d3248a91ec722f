package server

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/websocket"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/server/store"
	"github.com/commlab/commlab/web"
)

// The live views of a workshop: the instructor's dashboard (learners × labs) and the
// learner's timeline, each a websocket that sends a fresh snapshot when the journal
// changes or, for lab states that change on their own, every liveTick, and only when
// the snapshot differs from the last one sent.

const (
	liveTick = 2 * time.Second
	// stuckAfter: a learner with a running lab who typed nothing for this long is
	// highlighted.
	stuckAfter = 5 * time.Minute
	// lastCommands is how many of a learner's latest commands the dashboard shows.
	lastCommands = 3
	// wsLiveReadLimit bounds a frame from a live view, which reads only to notice
	// the browser leaving.
	wsLiveReadLimit = 512
)

// liveHub wakes a workshop's live views when its journal changes.
type liveHub struct {
	mu   sync.Mutex
	wake map[int64]chan struct{}
}

func newLiveHub() *liveHub { return &liveHub{wake: map[int64]chan struct{}{}} }

// wait returns a channel closed at the workshop's next change.
func (h *liveHub) wait(id int64) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch, ok := h.wake[id]
	if !ok {
		ch = make(chan struct{})
		h.wake[id] = ch
	}
	return ch
}

func (h *liveHub) changed(id int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch, ok := h.wake[id]; ok {
		close(ch)
		delete(h.wake, id)
	}
}

// serveLive streams snapshot() over a websocket until the browser leaves.
func (s *Server) serveLive(c *gin.Context, id int64, snapshot func(ctx context.Context) (any, error)) {
	ws, err := upgradeWS(c, wsLiveReadLimit)
	if err != nil {
		return
	}
	defer ws.Close()
	gone := readUntilClosed(ws)
	ctx := c.Request.Context()
	tick := time.NewTicker(liveTick)
	defer tick.Stop()
	var last []byte
	for {
		wake := s.live.wait(id)
		v, err := snapshot(ctx)
		if err != nil {
			s.log.Warn("workshop live view", "workshop", id, "err", err)
			return
		}
		b, _ := json.Marshal(v)
		if !bytes.Equal(b, last) {
			_ = ws.SetWriteDeadline(time.Now().Add(wsWriteTimeout))
			if ws.WriteMessage(websocket.TextMessage, b) != nil {
				return
			}
			last = b
		}
		select {
		case <-gone:
			return
		case <-ctx.Done():
			return
		case <-wake:
		case <-tick.C:
		}
	}
}

// learnerLive is what a learner's workshop page and workshop lab page receive.
type learnerLive struct {
	Opened   int             `json:"opened"`
	Ended    bool            `json:"ended"`
	Timeline []timelineEntry `json:"timeline"`
	// Lab is the learner's running lab of the workshop, for its page.
	Lab *liveLab `json:"lab,omitempty"`
}

// liveLab is what a workshop lab's page follows live: its end (an extension moves
// it) and its open hints (one the instructor reveals opens at once).
type liveLab struct {
	ID      string     `json:"id"`
	Expires time.Time  `json:"expires"`
	Hints   []openHint `json:"hints"`
}

type openHint struct {
	N    int    `json:"n"` // from 1
	HTML string `json:"html"`
}

func (s *Server) workshopLearnerWS(c *gin.Context) {
	w0, u, lang := workshopOf(c), userOf(c), langOf(c)
	s.serveLive(c, w0.ID, func(ctx context.Context) (any, error) {
		w, err := s.workshopDB().Workshop(ctx, w0.ID)
		if err != nil {
			return nil, err
		}
		evs, err := s.workshopDB().WorkshopEvents(ctx, w.ID, u.ID)
		if err != nil {
			return nil, err
		}
		d := learnerLive{Opened: w.Opened, Ended: w.Ended(), Timeline: s.timeline(lang, evs, false, nil)}
		// The member's own lab only: a snapshot per learner stays O(1) in the cohort.
		d.Lab = s.memberLab(c, w, u.ID)
		return d, nil
	})
}

func newLiveLab(l *session.Lab) *liveLab {
	return &liveLab{ID: l.ID, Expires: l.Status().Expires, Hints: openHints(l)}
}

func openHints(l *session.Lab) []openHint {
	out := []openHint{}
	for _, i := range l.HintsOpen() {
		html, _ := course.Markdown(l.Variant.Expand(l.Variant.Scenario.Hints[i].Text))
		out = append(out, openHint{N: i + 1, HTML: string(html)})
	}
	return out
}

// dashboard is the instructor's snapshot.
type dashboard struct {
	Opened   int             `json:"opened"`
	Ended    bool            `json:"ended"`
	Labs     []dashLab       `json:"labs"`
	Learners []dashLearner   `json:"learners"`
	Timeline []timelineEntry `json:"timeline"`
}

type dashLab struct {
	ID    string   `json:"id"`
	Title string   `json:"title"`
	Open  bool     `json:"open"`
	Kinds []string `json:"kinds"`
}

type dashLearner struct {
	ID    int64      `json:"id"`
	Name  string     `json:"name"`
	Cells []dashCell `json:"cells"`
	// Running is the index of the lab running now, -1 if none; Nodes are its nodes.
	Running int      `json:"running"`
	Nodes   []string `json:"nodes,omitempty"`
	// Idle is the seconds since the learner last typed, -1 without a running lab.
	Idle     int      `json:"idle"`
	IdleText string   `json:"idle_text"`
	Stuck    bool     `json:"stuck"`
	Commands []string `json:"commands"`
}

type dashCell struct {
	State string `json:"state"` // notstarted, starting, working, answered, passed, failed
	Text  string `json:"text"`
	Score string `json:"score,omitempty"`
	Hints int    `json:"hints"`
}

func (s *Server) workshopDashboardWS(c *gin.Context) {
	w0, lang := workshopOf(c), langOf(c)
	cmds := &commandCache{}
	s.serveLive(c, w0.ID, func(ctx context.Context) (any, error) {
		w, err := s.workshopDB().Workshop(ctx, w0.ID)
		if err != nil {
			return nil, err
		}
		d, err := s.dashboard(ctx, w, lang, cmds, time.Now())
		if err != nil || s.replicas == nil {
			return d, err
		}
		return d, s.elsewhereRows(c, w, d)
	})
}

// dashboard builds the instructor's snapshot from a fixed number of queries, two
// whatever the cohort's size (the roster with the lab records, the journal); the
// running labs come from memory.
func (s *Server) dashboard(ctx context.Context, w *store.Workshop, lang string, cmds *commandCache, now time.Time) (*dashboard, error) {
	db := s.workshopDB()
	members, err := db.Roster(ctx, w)
	if err != nil {
		return nil, err
	}
	evs, err := db.WorkshopEvents(ctx, w.ID, 0)
	if err != nil {
		return nil, err
	}
	d := &dashboard{Opened: w.Opened, Ended: w.Ended(), Timeline: s.timeline(lang, evs, true, namesOf(members)), Learners: []dashLearner{}}
	for _, l := range s.workshopLabs(w) {
		dl := dashLab{ID: l.ID, Title: l.Title, Open: l.Open}
		if sc, err := s.scenario(l.ID); err == nil {
			dl.Kinds = faultKinds(sc)
		}
		d.Labs = append(d.Labs, dl)
	}
	for _, m := range members {
		d.Learners = append(d.Learners, s.dashLearner(w, m, lang, cmds, now))
	}
	return d, nil
}

// dashLearner is one row of the dashboard: the member's graded records and their
// running lab, if it is one of the workshop's.
func (s *Server) dashLearner(w *store.Workshop, m store.Member, lang string, cmds *commandCache, now time.Time) dashLearner {
	dl := dashLearner{ID: m.ID, Name: m.Name, Running: -1, Idle: -1, Commands: []string{}}
	var cur *session.Lab
	if s.labs != nil {
		cur, _ = s.practiceLab(m.ID)
	}
	for i, id := range w.Labs {
		cell := dashCell{State: "notstarted"}
		if lp, ok := m.Labs[id]; ok && lp.Attempts > 0 {
			cell.State, cell.Score = "failed", pctText(lp.Score)
			if lp.Passed {
				cell.State = "passed"
			}
		}
		if cur != nil && cur.Variant.Scenario.ID == id {
			cell.Hints = len(cur.HintsUsed())
			switch cur.Status().State {
			case session.Starting:
				cell.State = "starting"
			case session.Ready:
				cell.State = "working"
			case session.Grading:
				cell.State = "answered"
			}
			if cur.Running() {
				dl.Running, dl.Nodes = i, cur.Status().Nodes
				idle := now.Sub(cur.LastInput())
				dl.Idle, dl.IdleText = int(idle.Seconds()), idleText(lang, idle)
				dl.Stuck = idle >= stuckAfter
				dl.Commands = cmds.last(cur)
			}
		}
		cell.Text = web.T(lang, "ws.state."+cell.State)
		dl.Cells = append(dl.Cells, cell)
	}
	return dl
}

func pctText(f float64) string { return strconv.Itoa(int(math.Round(f*100))) + "%" }

func idleText(lang string, d time.Duration) string {
	if d < time.Minute {
		return strconv.Itoa(int(d.Seconds())) + web.T(lang, "ws.unit.s")
	}
	return strconv.Itoa(int(d.Minutes())) + web.T(lang, "ws.unit.min")
}

// commandCache keeps each lab's latest commands, parsed from its recordings again
// only after the learner typed: a dashboard of 200 idle learners reads no file.
type commandCache struct {
	mu   sync.Mutex
	labs map[string]cachedCommands
}

type cachedCommands struct {
	at    time.Time
	cmds  []string
	ended <-chan struct{}
}

// forgetEnded drops the commands of labs that ended.
func (cc *commandCache) forgetEnded() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for id, c := range cc.labs {
		select {
		case <-c.ended:
			delete(cc.labs, id)
		default:
		}
	}
}

func (cc *commandCache) last(l *session.Lab) []string {
	at := l.LastInput()
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.labs == nil {
		cc.labs = map[string]cachedCommands{}
	}
	if c, ok := cc.labs[l.ID]; ok && c.at.Equal(at) {
		return c.cmds
	}
	out := []string{}
	ts, err := l.Transcripts()
	if err == nil {
		for _, t := range ts {
			for _, cmd := range t.Commands {
				out = append(out, t.Terminal+"$ "+cmd.Line)
			}
		}
	}
	if len(out) > lastCommands {
		out = out[len(out)-lastCommands:]
	}
	cc.labs[l.ID] = cachedCommands{at: at, cmds: out, ended: l.Ended()}
	return out
}

type watchData struct {
	Workshop *store.Workshop
	Learner  *store.User
	Lab      *session.Lab
	Nodes    []string
	Timeline []timelineEntry
}

// workshopLearner shows one learner to the instructor: their terminals, read-only
// and live, and their timeline.
func (s *Server) workshopLearner(c *gin.Context) {
	w := workshopOf(c)
	ctx := c.Request.Context()
	uid, _ := strconv.ParseInt(c.Param("uid"), 10, 64)
	members, err := s.workshopDB().Members(ctx, w.ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	if !containsID(members, uid) {
		s.fail(c, errNotFound)
		return
	}
	u, err := s.store.UserByID(ctx, uid)
	if err != nil {
		s.fail(c, err)
		return
	}
	d := watchData{Workshop: w, Learner: u}
	labs, err := s.workshopLabsOf(ctx, w, uid)
	if err != nil {
		s.fail(c, err)
		return
	}
	if l := labs[uid]; l != nil {
		d.Lab, d.Nodes = l, l.Status().Nodes
	}
	evs, err := s.workshopDB().WorkshopEvents(ctx, w.ID, uid)
	if err != nil {
		s.fail(c, err)
		return
	}
	d.Timeline = s.timeline(langOf(c), evs, true, map[int64]string{uid: u.Name})
	c.Header("Content-Security-Policy", labCSP())
	s.renderPage(c, http.StatusOK, "workshopwatch", u.Name, d)
}

// workshopWatchTerminal streams a learner's terminal to the instructor: output only;
// nothing the instructor types reaches the shell.
func (s *Server) workshopWatchTerminal(c *gin.Context) {
	w := workshopOf(c)
	uid, _ := strconv.ParseInt(c.Param("uid"), 10, 64)
	labs, err := s.workshopLabsOf(c.Request.Context(), w, uid)
	if err != nil {
		s.fail(c, err)
		return
	}
	l := labs[uid]
	if l == nil {
		s.fail(c, errNoLab)
		return
	}
	t, ok := l.Terminal(c.Param("node"))
	if !ok {
		s.fail(c, errNotReady)
		return
	}
	ws, err := upgradeWS(c, wsLiveReadLimit)
	if err != nil {
		return
	}
	defer ws.Close()
	scroll, out, detach := t.Attach()
	defer detach()
	write := func(p []byte) error {
		_ = ws.SetWriteDeadline(time.Now().Add(wsWriteTimeout))
		return ws.WriteMessage(websocket.BinaryMessage, p)
	}
	if len(scroll) > 0 && write(scroll) != nil {
		return
	}
	gone := readUntilClosed(ws)
	for {
		select {
		case <-gone:
			return
		case <-l.Ended():
			b, _ := json.Marshal(gin.H{"type": "closed", "text": web.T(langOf(c), "lab.ended")})
			_ = ws.WriteMessage(websocket.TextMessage, b)
			return
		case p, ok := <-out:
			if !ok || write(p) != nil {
				return
			}
		}
	}
}
