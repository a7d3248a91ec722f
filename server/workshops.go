package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/scenarios"
	"github.com/commlab/commlab/server/store"
	"github.com/commlab/commlab/web"
)

// Workshops: an instructor runs a cohort through labs in order, watches it live
// (workshoplive.go) and steers it; every action is journaled in the store and shows
// in the learners' timelines, which never name an injected fault.

// Journal event kinds (also web i18n keys "ws.event.<kind>").
const (
	evJoined  = "joined"
	evOpened  = "opened"
	evFault   = "fault"
	evMessage = "message"
	evEnded   = "ended"
	evHint    = "hint"
	evReset   = "reset"
	evExtend  = "extended"
)

var (
	errNoWorkshop    = httpError{http.StatusNotFound, "ws.err.none", "no such workshop"}
	errWorkshopEnded = httpError{http.StatusConflict, "ws.err.ended", ""}
	errWorkshopsOff  = httpError{http.StatusServiceUnavailable, "ws.err.off", "the store keeps no workshops"}
)

func (s *Server) workshopRoutes(r *gin.Engine) {
	g := r.Group("/workshops", s.requireUser, s.needWorkshops)
	g.GET("", s.workshopList)
	g.POST("", s.requireRole(store.RoleInstructor), s.workshopCreate)
	g.POST("/join", s.workshopJoin)
	w := g.Group("/:wid", s.loadWorkshop)
	w.GET("", s.workshopPage)
	w.GET("/events/ws", s.workshopLearnerWS)
	w.GET("/live/lab", s.workshopOwnLab)
	w.POST("/labs/:n/start", s.workshopLabStart)
	in := w.Group("", s.requireWorkshopInstructor)
	in.GET("/live/ws", s.workshopDashboardWS)
	in.POST("/open", s.workshopOpen)
	in.POST("/inject", s.workshopInject)
	in.POST("/message", s.workshopMessage)
	in.POST("/hint", s.workshopHint)
	in.POST("/reset", s.workshopReset)
	in.POST("/extend", s.workshopExtend)
	in.POST("/end", s.workshopEnd)
	in.GET("/live/rows", s.workshopLiveRows)
	learner := in.Group("/learners/:uid", s.forwardToLearnersLab)
	learner.GET("", s.workshopLearner)
	learner.GET("/term/:node/ws", s.workshopWatchTerminal)
}

func (s *Server) workshopDB() store.Workshops { db, _ := s.store.(store.Workshops); return db }

func (s *Server) needWorkshops(c *gin.Context) {
	if s.workshopDB() == nil {
		s.fail(c, errWorkshopsOff)
		return
	}
	c.Next()
}

// loadWorkshop finds the workshop in the path; only its instructor, an admin and
// its members see it.
func (s *Server) loadWorkshop(c *gin.Context) {
	ctx := c.Request.Context()
	id, _ := strconv.ParseInt(c.Param("wid"), 10, 64)
	w, err := s.workshopDB().Workshop(ctx, id)
	if err != nil {
		s.fail(c, errNoWorkshop)
		return
	}
	u := userOf(c)
	if !runsWorkshop(u, w) {
		members, err := s.workshopDB().Members(ctx, w.ID)
		if err != nil {
			s.fail(c, err)
			return
		}
		if !containsID(members, u.ID) {
			s.fail(c, errNoWorkshop)
			return
		}
	}
	c.Set("workshop", w)
	c.Next()
}

func workshopOf(c *gin.Context) *store.Workshop { return c.MustGet("workshop").(*store.Workshop) }

func runsWorkshop(u *store.User, w *store.Workshop) bool {
	return u.ID == w.InstructorID || u.Role == store.RoleAdmin
}

func containsID(ids []int64, id int64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func (s *Server) requireWorkshopInstructor(c *gin.Context) {
	if !runsWorkshop(userOf(c), workshopOf(c)) {
		s.fail(c, errNoWorkshop)
		return
	}
	c.Next()
}

// requireLive refuses an action on an ended workshop.
func (s *Server) requireLive(c *gin.Context, w *store.Workshop) bool {
	if w.Ended() {
		s.fail(c, errWorkshopEnded)
		return false
	}
	return true
}

type workshopListData struct {
	Workshops  []store.Workshop
	Instructor bool
	Scenarios  []*scenarios.Scenario
	Now, Later string
}

const formTime = "2006-01-02T15:04"

func (s *Server) workshopList(c *gin.Context) {
	u := userOf(c)
	ws, err := s.workshopDB().WorkshopsOf(c.Request.Context(), u.ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	now := time.Now().UTC()
	d := workshopListData{Workshops: ws, Instructor: u.Role != store.RoleLearner,
		Now: now.Format(formTime), Later: now.Add(4 * time.Hour).Format(formTime)}
	if s.cats != nil {
		d.Scenarios = s.cats.All()
	}
	s.renderPage(c, http.StatusOK, "workshops", web.T(langOf(c), "ws.title"), d)
}

// formError is a form field the instructor must correct: what and where.
func formError(field, why string) error {
	return httpError{http.StatusBadRequest, "ws.err.form", field + ": " + why}
}

// parseWorkshopForm reads the create form: the labs are scenario ids, one a line, in
// the order they will open.
func (s *Server) parseWorkshopForm(c *gin.Context) (*store.Workshop, error) {
	w := &store.Workshop{InstructorID: userOf(c).ID, Title: strings.TrimSpace(c.PostForm("title")), Code: c.PostForm("code")}
	for i, line := range strings.Split(c.PostForm("labs"), "\n") {
		id := strings.TrimSpace(line)
		if id == "" {
			continue
		}
		if _, err := s.scenario(id); err != nil {
			return nil, formError("labs", fmt.Sprintf("line %d: no lab %q", i+1, id))
		}
		w.Labs = append(w.Labs, id)
	}
	if len(w.Labs) == 0 {
		return nil, formError("labs", "no lab")
	}
	if w.Title == "" {
		return nil, formError("title", "empty")
	}
	ttl, err := strconv.Atoi(c.DefaultPostForm("ttl", "45"))
	if err != nil || ttl < 5 || ttl > 8*60 {
		return nil, formError("ttl", "minutes from 5 to 480")
	}
	w.LabTTL = time.Duration(ttl) * time.Minute
	now := time.Now().UTC()
	w.StartsAt, w.EndsAt = now, now.Add(4*time.Hour)
	for _, f := range []struct {
		name string
		t    *time.Time
	}{{"starts", &w.StartsAt}, {"ends", &w.EndsAt}} {
		if v := c.PostForm(f.name); v != "" {
			t, err := time.Parse(formTime, v)
			if err != nil {
				return nil, formError(f.name, "a time like 2026-12-04T09:00 (UTC)")
			}
			*f.t = t
		}
	}
	if !w.EndsAt.After(w.StartsAt) {
		return nil, formError("ends", "must come after the start")
	}
	if strings.TrimSpace(w.Code) == "" {
		w.Code = newJoinCode()
	}
	return w, nil
}

// newJoinCode is 8 characters from an alphabet without look-alikes (0/O, 1/I/L).
func newJoinCode() string {
	const alphabet = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

func (s *Server) workshopCreate(c *gin.Context) {
	w, err := s.parseWorkshopForm(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	if err := s.workshopDB().CreateWorkshop(c.Request.Context(), w); errors.Is(err, store.ErrExists) {
		s.fail(c, formError("code", "already used by another workshop"))
		return
	} else if err != nil {
		s.fail(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, fmt.Sprintf("/workshops/%d", w.ID))
}

func (s *Server) workshopJoin(c *gin.Context) {
	ctx := c.Request.Context()
	w, err := s.workshopDB().WorkshopByCode(ctx, c.PostForm("code"))
	if err != nil {
		s.fail(c, httpError{http.StatusNotFound, "ws.err.code", ""})
		return
	}
	if !s.requireLive(c, w) {
		return
	}
	u := userOf(c)
	members, err := s.workshopDB().Members(ctx, w.ID)
	if err == nil && !containsID(members, u.ID) {
		if err = s.workshopDB().JoinWorkshop(ctx, w.ID, u.ID); err == nil {
			err = s.journal(ctx, &store.WorkshopEvent{WorkshopID: w.ID, LearnerID: u.ID, Kind: evJoined})
		}
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, fmt.Sprintf("/workshops/%d", w.ID))
}

// journal records an event and wakes every live view of the workshop.
func (s *Server) journal(ctx context.Context, e *store.WorkshopEvent) error {
	if err := s.workshopDB().LogWorkshopEvent(ctx, e); err != nil {
		return err
	}
	s.bus.publish(ctx, e.WorkshopID)
	return nil
}

// workshopLab is one lab of a workshop as its pages show it.
type workshopLab struct {
	N     int // from 1
	ID    string
	Title string
	Open  bool
}

func (s *Server) workshopLabs(w *store.Workshop) []workshopLab {
	out := make([]workshopLab, len(w.Labs))
	for i, id := range w.Labs {
		out[i] = workshopLab{N: i + 1, ID: id, Title: id, Open: i < w.Opened}
		if sc, err := s.scenario(id); err == nil {
			out[i].Title = sc.Title
		}
	}
	return out
}

type workshopPageData struct {
	Workshop   *store.Workshop
	Labs       []workshopLab
	Instructor bool
	// Faults are the kinds the instructor may add, by lab: the scenario's own.
	Faults map[string][]string
	// HintNs are the hint numbers the reveal form offers: 1 to the most any lab has.
	HintNs   []int
	Timeline []timelineEntry
	Current  *liveLab
}

// timelineEntry is a journal line in the reader's language; Secret is set for the
// instructor only.
type timelineEntry struct {
	At     string `json:"at"`
	Kind   string `json:"kind"`
	Text   string `json:"text"`
	Secret string `json:"secret,omitempty"`
	Whom   string `json:"whom,omitempty"`
}

func (s *Server) timeline(lang string, evs []store.WorkshopEvent, instructor bool, names map[int64]string) []timelineEntry {
	out := make([]timelineEntry, 0, len(evs))
	for _, e := range evs {
		te := timelineEntry{At: e.At.Format("15:04:05"), Kind: e.Kind, Text: web.T(lang, "ws.event."+e.Kind)}
		if e.Public != "" {
			te.Text += ": " + e.Public
		}
		if instructor {
			te.Secret = e.Secret
			if e.LearnerID != 0 {
				te.Whom = names[e.LearnerID]
			}
		}
		out = append(out, te)
	}
	return out
}

func (s *Server) workshopPage(c *gin.Context) {
	w, u, lang := workshopOf(c), userOf(c), langOf(c)
	d := workshopPageData{Workshop: w, Labs: s.workshopLabs(w), Instructor: runsWorkshop(u, w)}
	learner := u.ID
	if d.Instructor {
		learner = 0
		d.Faults = map[string][]string{}
		for _, id := range w.Labs {
			if sc, err := s.scenario(id); err == nil {
				d.Faults[id] = faultKinds(sc)
				for n := len(d.HintNs) + 1; n <= len(sc.Hints); n++ {
					d.HintNs = append(d.HintNs, n)
				}
			}
		}
	} else {
		d.Current = s.memberLab(c, w, u.ID)
	}
	evs, err := s.workshopDB().WorkshopEvents(c.Request.Context(), w.ID, learner)
	if err != nil {
		s.fail(c, err)
		return
	}
	var names map[int64]string // the instructor's timeline says whom each line concerns
	if d.Instructor {
		members, err := s.workshopDB().Roster(c.Request.Context(), w)
		if err != nil {
			s.fail(c, err)
			return
		}
		names = namesOf(members)
	}
	d.Timeline = s.timeline(lang, evs, d.Instructor, names)
	s.renderPage(c, http.StatusOK, "workshop", w.Title, d)
}

// namesOf are the members' names, by id.
func namesOf(members []store.Member) map[int64]string {
	names := make(map[int64]string, len(members))
	for _, m := range members {
		names[m.ID] = m.Name
	}
	return names
}

func containsStr(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// faultKinds are the kinds an instructor may add to a lab of sc: those its own
// faults use, once each.
func faultKinds(sc *scenarios.Scenario) []string {
	var out []string
	for _, f := range sc.Faults {
		if !containsStr(out, f.Kind) {
			out = append(out, f.Kind)
		}
	}
	return out
}

// workshopLabStart starts lab n for a member, with the workshop's lab TTL.
func (s *Server) workshopLabStart(c *gin.Context) {
	w := workshopOf(c)
	n, err := strconv.Atoi(c.Param("n"))
	if err != nil || n < 1 || n > len(w.Labs) {
		s.fail(c, errNoLab)
		return
	}
	if !s.requireLive(c, w) {
		return
	}
	if n > w.Opened {
		s.fail(c, httpError{http.StatusConflict, "ws.err.notopen", ""})
		return
	}
	sc, err := s.scenario(w.Labs[n-1])
	if err != nil {
		s.fail(c, err)
		return
	}
	v, ok := s.admit(c, sc)
	if !ok {
		return
	}
	l, err := s.startLab(c.Request.Context(), store.LabOwner{LearnerID: userOf(c).ID}, v, w.LabTTL)
	if errors.Is(err, session.ErrBusy) {
		s.fail(c, errLabBusy)
		return
	} else if errors.Is(err, errDraining) {
		s.fail(c, err)
		return
	} else if err != nil {
		s.fail(c, httpError{http.StatusServiceUnavailable, "err.labcannot", err.Error()})
		return
	}
	if err := s.giveRevealedHints(c.Request.Context(), w, l); err != nil {
		s.log.Warn("workshop hints for a new lab", "workshop", w.ID, "lab", l.ID, "err", err)
	}
	s.bus.publish(c.Request.Context(), w.ID)
	c.Redirect(http.StatusSeeOther, "/lab/"+l.ID)
}

func (s *Server) workshopOpen(c *gin.Context) {
	w := workshopOf(c)
	n, err := strconv.Atoi(c.PostForm("n"))
	if err != nil || n < 1 || n > len(w.Labs) {
		s.fail(c, formError("n", fmt.Sprintf("a lab from 1 to %d", len(w.Labs))))
		return
	}
	if !s.requireLive(c, w) {
		return
	}
	ctx := c.Request.Context()
	if err := s.workshopDB().OpenLabs(ctx, w.ID, n); err != nil {
		s.fail(c, err)
		return
	}
	title := w.Labs[n-1]
	if sc, err := s.scenario(title); err == nil {
		title = sc.Title
	}
	if err := s.journal(ctx, &store.WorkshopEvent{WorkshopID: w.ID, Kind: evOpened, Public: fmt.Sprintf("%d. %s", n, title)}); err != nil {
		s.fail(c, err)
		return
	}
	s.backToWorkshop(c, w)
}

func (s *Server) backToWorkshop(c *gin.Context, w *store.Workshop) {
	if wantsJSON(c) {
		c.JSON(http.StatusOK, gin.H{"ok": true})
		return
	}
	c.Redirect(http.StatusSeeOther, fmt.Sprintf("/workshops/%d", w.ID))
}

// workshopLabsOf returns the running labs of the workshop, by learner: learner 0
// means every member.
func (s *Server) workshopLabsOf(ctx context.Context, w *store.Workshop, learner int64) (map[int64]*session.Lab, error) {
	members, err := s.workshopDB().Members(ctx, w.ID)
	if err != nil {
		return nil, err
	}
	out := map[int64]*session.Lab{}
	if s.labs == nil {
		return out, nil
	}
	for _, m := range members {
		if learner != 0 && m != learner {
			continue
		}
		if l := s.runningLabIn(w, m); l != nil {
			out[m] = l
		}
	}
	return out, nil
}

// runningLabIn is the member's running lab of the workshop, nil if none.
func (s *Server) runningLabIn(w *store.Workshop, member int64) *session.Lab {
	if s.labs == nil {
		return nil
	}
	if l, ok := s.practiceLab(member); ok && l.Running() && containsStr(w.Labs, l.Variant.Scenario.ID) {
		return l
	}
	return nil
}

// workshopInject adds a fault of a kind the lab's scenario uses, with the learner's
// own variant's parameters, on the node the instructor picked, to one learner's lab
// or to every running lab of that scenario. The learners' timelines say only that
// the instructor changed their lab; the kind is journaled as the secret part.
func (s *Server) workshopInject(c *gin.Context) {
	w := workshopOf(c)
	if !s.requireLive(c, w) {
		return
	}
	learner, _ := strconv.ParseInt(c.PostForm("learner"), 10, 64)
	kind, node := c.PostForm("kind"), strings.TrimSpace(c.PostForm("node"))
	if node == "" {
		s.fail(c, formError("node", "empty"))
		return
	}
	res, ok := s.actOnLabs(c, w, learner, func(ctx context.Context, labs map[int64]*session.Lab) (res labResult) {
		for m, l := range labs {
			f, ok := extraFault(l.Variant, kind, node)
			if !ok {
				res.Problems = append(res.Problems, fmt.Sprintf("%s: %q is not a kind this lab allows", l.Variant.Scenario.ID, kind))
				continue
			}
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			cmd, err := l.Inject(fctx, f)
			cancel()
			if err == nil {
				res.Done++
				err = s.journal(ctx, &store.WorkshopEvent{WorkshopID: w.ID, LearnerID: m, Kind: evFault, Secret: kind + " · " + cmd})
			}
			if err != nil {
				res.Problems = append(res.Problems, fmt.Sprintf("learner %d: %v", m, err))
			}
		}
		return res
	})
	if !ok {
		return
	}
	if res.Done == 0 && len(res.Problems) == 0 {
		s.fail(c, httpError{http.StatusConflict, "ws.err.nolab", ""})
		return
	}
	if res.Done == 0 {
		s.fail(c, httpError{http.StatusConflict, "ws.err.inject", strings.Join(res.Problems, "; ")})
		return
	}
	if wantsJSON(c) {
		c.JSON(http.StatusOK, gin.H{"injected": res.Done, "problems": res.Problems})
		return
	}
	s.backToWorkshop(c, w)
}

// extraFault is the variant's first fault of kind, moved to node.
func extraFault(v *scenarios.Variant, kind, node string) (scenarios.Fault, bool) {
	faults, err := v.Faults()
	if err != nil {
		return scenarios.Fault{}, false
	}
	for _, f := range faults {
		if f.Kind == kind {
			f.Node = node
			return f, true
		}
	}
	return scenarios.Fault{}, false
}

const maxMessage = 500

func (s *Server) workshopMessage(c *gin.Context) {
	w := workshopOf(c)
	text := strings.TrimSpace(c.PostForm("text"))
	if text == "" || len([]rune(text)) > maxMessage {
		s.fail(c, formError("text", fmt.Sprintf("1 to %d characters", maxMessage)))
		return
	}
	if !s.requireLive(c, w) {
		return
	}
	if err := s.journal(c.Request.Context(), &store.WorkshopEvent{WorkshopID: w.ID, Kind: evMessage, Public: text}); err != nil {
		s.fail(c, err)
		return
	}
	s.backToWorkshop(c, w)
}

// workshopEnd ends the workshop: every member's running lab of it stops, which
// reverts its faults and takes its environment down.
func (s *Server) workshopEnd(c *gin.Context) {
	w := workshopOf(c)
	ctx := c.Request.Context()
	if err := s.workshopDB().EndWorkshop(ctx, w.ID); err != nil {
		s.fail(c, err)
		return
	}
	_, ok := s.actOnLabs(c, w, 0, func(_ context.Context, labs map[int64]*session.Lab) labResult {
		for _, l := range labs {
			l.Stop()
		}
		for _, l := range labs {
			<-l.Ended()
		}
		return labResult{Done: len(labs)}
	})
	if !ok {
		return
	}
	if err := s.journal(ctx, &store.WorkshopEvent{WorkshopID: w.ID, Kind: evEnded}); err != nil {
		s.fail(c, err)
		return
	}
	s.backToWorkshop(c, w)
}

// hintRef names hint n of a scenario in the journal's secret part, which the
// instructor reads and giveRevealedHints parses back.
func hintRef(scenario string, n int) string { return fmt.Sprintf("%s#%d", scenario, n) }

func parseHintRef(ref string) (scenario string, n int, ok bool) {
	i := strings.LastIndexByte(ref, '#')
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(ref[i+1:])
	return ref[:i], n, err == nil && n > 0
}

// workshopHint reveals hint n of lab k to the whole cohort: it opens in every running
// lab of it now and in each one started later. It costs the learners nothing, even
// one who had paid for it: they did not choose it, and equal work scores the same.
func (s *Server) workshopHint(c *gin.Context) {
	w := workshopOf(c)
	k, err := strconv.Atoi(c.PostForm("lab"))
	if err != nil || k < 1 || k > len(w.Labs) {
		s.fail(c, formError("lab", fmt.Sprintf("a lab from 1 to %d", len(w.Labs))))
		return
	}
	sc, err := s.scenario(w.Labs[k-1])
	if err != nil {
		s.fail(c, err)
		return
	}
	n, err := strconv.Atoi(c.PostForm("n"))
	if err != nil || n < 1 || n > len(sc.Hints) {
		s.fail(c, formError("n", fmt.Sprintf("lab %d has hints 1 to %d", k, len(sc.Hints))))
		return
	}
	if !s.requireLive(c, w) {
		return
	}
	res, ok := s.actOnLabs(c, w, 0, func(_ context.Context, labs map[int64]*session.Lab) (res labResult) {
		for _, l := range labs {
			if l.Variant.Scenario.ID == sc.ID && l.GiveHint(n-1) == nil {
				res.Done++
			}
		}
		return res
	})
	if !ok {
		return
	}
	ctx := c.Request.Context()
	e := &store.WorkshopEvent{WorkshopID: w.ID, Kind: evHint, Public: fmt.Sprintf("%d. %s · #%d", k, sc.Title, n), Secret: hintRef(sc.ID, n)}
	if err := s.journal(ctx, e); err != nil {
		s.fail(c, err)
		return
	}
	if wantsJSON(c) {
		c.JSON(http.StatusOK, gin.H{"given": res.Done, "problems": res.Problems})
		return
	}
	s.backToWorkshop(c, w)
}

// giveRevealedHints opens in a lab just started the hints the instructor revealed
// before.
func (s *Server) giveRevealedHints(ctx context.Context, w *store.Workshop, l *session.Lab) error {
	evs, err := s.workshopDB().WorkshopEvents(ctx, w.ID, l.Learner)
	if err != nil {
		return err
	}
	for _, e := range evs {
		if id, n, ok := parseHintRef(e.Secret); e.Kind == evHint && ok && id == l.Variant.Scenario.ID {
			_ = l.GiveHint(n - 1)
		}
	}
	return nil
}

// workshopReset ends one learner's running lab now, as a stop does: its faults
// revert (through the injector's journal) and its environment goes. The learner
// may start the lab again from the workshop page.
func (s *Server) workshopReset(c *gin.Context) {
	w := workshopOf(c)
	learner, _ := strconv.ParseInt(c.PostForm("learner"), 10, 64)
	if learner <= 0 {
		s.fail(c, formError("learner", "one learner"))
		return
	}
	if !s.requireLive(c, w) {
		return
	}
	res, ok := s.actOnLabs(c, w, learner, func(ctx context.Context, labs map[int64]*session.Lab) (res labResult) {
		l := labs[learner]
		if l == nil {
			return res
		}
		l.Stop()
		select {
		case <-l.Ended():
		case <-ctx.Done():
			return res
		}
		res.Done++
		if err := s.journal(ctx, &store.WorkshopEvent{WorkshopID: w.ID, LearnerID: learner, Kind: evReset, Secret: l.Variant.Scenario.ID}); err != nil {
			res.Problems = append(res.Problems, err.Error())
		}
		return res
	})
	if !ok {
		return
	}
	if res.Done == 0 {
		s.fail(c, httpError{http.StatusConflict, "ws.nolab", strings.Join(res.Problems, "; ")})
		return
	}
	s.backToWorkshop(c, w)
}

// workshopOfLab is the live workshop a learner's lab belongs to: one they joined,
// not ended, with the lab's scenario among its labs; 0 if none.
func (s *Server) workshopOfLab(ctx context.Context, l *session.Lab) int64 {
	db := s.workshopDB()
	if db == nil {
		return 0
	}
	ws, err := db.WorkshopsOf(ctx, l.Learner)
	if err != nil {
		return 0
	}
	for _, w := range ws {
		if w.InstructorID != l.Learner && !w.Ended() && containsStr(w.Labs, l.Variant.Scenario.ID) {
			return w.ID
		}
	}
	return 0
}

// workshopExtend gives one learner's running lab (learner 0: every running lab of
// the workshop) more minutes. Each lab renews what ends it from outside before its
// own end moves (session.Lab.Extend), a lab still starting once it is Ready; one
// that cannot keeps its end and is named in the answer.
func (s *Server) workshopExtend(c *gin.Context) {
	w := workshopOf(c)
	most := int(session.MaxExtend / time.Minute)
	minutes, err := strconv.Atoi(c.PostForm("minutes"))
	if err != nil || minutes < 1 || minutes > most {
		s.fail(c, formError("minutes", fmt.Sprintf("1 to %d", most)))
		return
	}
	if !s.requireLive(c, w) {
		return
	}
	learner, _ := strconv.ParseInt(c.PostForm("learner"), 10, 64)
	res, ok := s.actOnLabs(c, w, learner, func(ctx context.Context, labs map[int64]*session.Lab) (res labResult) {
		for m, l := range labs {
			ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			end, err := l.Extend(ectx, time.Duration(minutes)*time.Minute)
			cancel()
			if err == nil {
				res.Done++
				err = s.journal(ctx, &store.WorkshopEvent{WorkshopID: w.ID, LearnerID: m, Kind: evExtend, Public: strconv.Itoa(minutes), Secret: end.UTC().Format("15:04:05 UTC")})
			}
			if err != nil {
				res.Problems = append(res.Problems, fmt.Sprintf("learner %d: %v", m, err))
			}
		}
		return res
	})
	if !ok {
		return
	}
	if res.Done == 0 && len(res.Problems) == 0 {
		s.fail(c, httpError{http.StatusConflict, "ws.err.norunning", ""})
		return
	}
	if res.Done == 0 {
		s.fail(c, httpError{http.StatusConflict, "ws.err.extend", strings.Join(res.Problems, "; ")})
		return
	}
	if wantsJSON(c) {
		c.JSON(http.StatusOK, gin.H{"extended": res.Done, "problems": res.Problems})
		return
	}
	s.backToWorkshop(c, w)
}
