package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/commlab/commlab/exam"
	"github.com/commlab/commlab/labs/netns"
	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/server/store"
	"github.com/commlab/commlab/web"
)

// Live labs inside an exam. A lab task starts a lab on the same session
// manager as the lab pages, with the variant the attempt's seed drew. The lab
// page then runs in exam mode: no scenario title, chapter, hints, checks,
// give-up or debrief; the diagnosis goes to the attempt, graded by the same
// grader on the evidence of the lab's own recordings.
//
// The clock pauses while a lab starts: labs come up one at a time (a
// candidate runs one lab at once, and a host holds few sandboxes), and a
// start-up takes from seconds to minutes depending on the host's load and the
// scenario's baseline run, which is no part of the candidate's work. So the
// deadline moves later by each start-up's length once the lab is up (or
// failed), and until then the pending pause counts as if already added.

var errExamLabOnly = httpError{http.StatusConflict, "exam.lab.noaction", ""}

// examLab is a lab started for one task of an attempt.
type examLab struct {
	attempt int64
	task    int
	lab     *session.Lab
	up      bool // its start-up pause is added to the deadline
	logged  bool // its commands are kept with the attempt
}

// examLabs are the exam labs this server runs, by lab id.
type examLabs struct {
	mu    sync.Mutex
	byLab map[string]*examLab
}

func (x *examLabs) get(labID string) *examLab {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.byLab[labID]
}

// practiceLab is the learner's current lab unless it belongs to an exam: an exam's
// lab never shows on the learner's other pages, a workshop's dashboard included,
// and no instructor can inject into it.
func (s *Server) practiceLab(learner int64) (*session.Lab, bool) {
	l, ok := s.labs.Current(learner)
	if !ok || s.xlabs.get(l.ID) != nil {
		return nil, false
	}
	return l, true
}

func (x *examLabs) ofAttempt(id int64) []*examLab {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []*examLab
	for _, l := range x.byLab {
		if l.attempt == id {
			out = append(out, l)
		}
	}
	return out
}

// running returns the attempt's task lab that still runs, if any.
func (x *examLabs) running(attempt int64, task int) *examLab {
	for _, l := range x.ofAttempt(attempt) {
		if l.task == task && l.lab.Running() {
			return l
		}
	}
	return nil
}

// deadlineOf is when a's time is up: its stored deadline plus the start-up
// of any of its labs still starting.
func (s *Server) deadlineOf(a *store.Attempt) time.Time {
	s.xlabs.mu.Lock()
	defer s.xlabs.mu.Unlock()
	d := a.Deadline
	for _, l := range s.xlabs.byLab {
		if l.attempt == a.ID && !l.up {
			d = d.Add(time.Since(l.lab.Started))
		}
	}
	return d
}

// timeUp reports whether an active attempt's time has run out.
func (s *Server) timeUp(a *store.Attempt) bool {
	return a.State == store.AttemptActive && !time.Now().Before(s.deadlineOf(a))
}

// pauseWhileStarting moves the attempt's deadline by the lab's start-up once
// it is up, or ended without coming up (a failed start costs no time either).
func (s *Server) pauseWhileStarting(x *examLab) {
	select {
	case <-x.lab.Up():
	case <-x.lab.Ended():
	}
	s.xlabs.mu.Lock()
	defer s.xlabs.mu.Unlock()
	took := time.Since(x.lab.Started)
	if err := s.examDB().ExtendDeadline(context.Background(), x.attempt, took); err != nil && !errors.Is(err, store.ErrInvalid) {
		s.log.Warn("pause the exam clock for a lab start-up", "attempt", x.attempt, "err", err)
	}
	x.up = true
	s.log.Info("exam clock paused for a lab start-up", "attempt", x.attempt, "task", x.task, "took", took.Round(time.Millisecond))
}

// labTask checks that the path's task is a lab of the active attempt.
func (s *Server) labTask(c *gin.Context) (*store.Attempt, exam.Task, bool) {
	a, e := attemptOf(c)
	if a.State != store.AttemptActive {
		s.fail(c, httpError{http.StatusConflict, "exam.over", ""})
		return nil, exam.Task{}, false
	}
	n, err := strconv.Atoi(c.Param("n"))
	tasks := s.exams.Tasks(e, a.Seed)
	if err != nil || n < 0 || n >= len(tasks) || !tasks[n].Lab() {
		s.fail(c, errNotFound)
		return nil, exam.Task{}, false
	}
	return a, tasks[n], true
}

// graded reports whether the attempt's task has its diagnosis graded.
func (s *Server) graded(ctx context.Context, a *store.Attempt, task int) (bool, error) {
	saved, err := s.examDB().Tasks(ctx, a.ID)
	for _, t := range saved {
		if t.Task == task {
			return t.Graded, err
		}
	}
	return false, err
}

// attemptLabStart starts the task's lab, or opens the one running. A task
// whose diagnosis is graded cannot start again.
func (s *Server) attemptLabStart(c *gin.Context) {
	a, t, ok := s.labTask(c)
	if !ok {
		return
	}
	if x := s.xlabs.running(a.ID, t.Index); x != nil {
		c.Redirect(http.StatusSeeOther, "/lab/"+x.lab.ID)
		return
	}
	if done, err := s.graded(c.Request.Context(), a, t.Index); err != nil || done {
		s.fail(c, firstErr(err, httpError{http.StatusConflict, "exam.lab.graded", ""}))
		return
	}
	if s.labs == nil {
		s.fail(c, s.labsOffError())
		return
	}
	v, err := t.Variant(s.cats)
	if err != nil {
		s.fail(c, err)
		return
	}
	l, err := s.startLab(c.Request.Context(), store.LabOwner{LearnerID: a.UserID, Attempt: a.ID, Task: t.Index}, v, 0)
	switch {
	case errors.Is(err, session.ErrBusy):
		s.fail(c, httpError{http.StatusConflict, "exam.lab.busy", ""})
		return
	case errors.Is(err, netns.ErrBusy):
		s.fail(c, httpError{http.StatusServiceUnavailable, "sec.hostfull", ""})
		return
	case errors.Is(err, errDraining):
		s.fail(c, err)
		return
	case err != nil:
		// The reason may name what the lab injects: the log has it, the page not.
		s.log.Warn("exam lab cannot start", "attempt", a.ID, "task", t.Index, "err", err)
		s.fail(c, httpError{http.StatusServiceUnavailable, "exam.lab.cannot", ""})
		return
	}
	x := &examLab{attempt: a.ID, task: t.Index, lab: l}
	s.xlabs.mu.Lock()
	s.xlabs.byLab[l.ID] = x
	s.xlabs.mu.Unlock()
	go s.pauseWhileStarting(x)
	s.log.Info("exam lab started", "attempt", a.ID, "task", t.Index, "lab", l.ID)
	c.Redirect(http.StatusSeeOther, "/lab/"+l.ID)
}

func firstErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

// attemptLabDiagnose grades the diagnosis of the task's running lab (the
// workload re-measured first where the scenario asks for a fix), keeps the
// score and what it rests on with the attempt, and ends the lab.
func (s *Server) attemptLabDiagnose(c *gin.Context) {
	a, t, ok := s.labTask(c)
	if !ok {
		return
	}
	x := s.xlabs.running(a.ID, t.Index)
	if x == nil {
		s.fail(c, httpError{http.StatusConflict, "exam.lab.notrunning", ""})
		return
	}
	d, err := diagnosis(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), gradeTimeout)
	defer cancel()
	res, err := x.lab.Grade(ctx, d)
	if err != nil {
		s.gradeErr(c, err)
		return
	}
	var rep taskReport
	for _, cr := range res.Criteria {
		rep.Evidence = append(rep.Evidence, fmt.Sprintf("%s %.2f/%.2f: %s", cr.Name, cr.Earned, cr.Weight, cr.Detail))
	}
	b, _ := json.Marshal(rep)
	if err := s.examDB().GradeTask(ctx, a.ID, t.Index, res.Score, string(b)); err != nil {
		s.fail(c, err)
		return
	}
	s.keepCommands(ctx, x)
	s.log.Info("exam lab graded", "attempt", a.ID, "task", t.Index, "score", res.Score)
	c.Redirect(http.StatusSeeOther, fmt.Sprintf("/attempt/%d#task-%d", a.ID, t.Index))
}

// keepCommands copies the commands of the lab's recordings to the attempt,
// once. The recordings outlive the lab, so this works after its end too.
func (s *Server) keepCommands(ctx context.Context, x *examLab) {
	s.xlabs.mu.Lock()
	done := x.logged
	x.logged = true
	s.xlabs.mu.Unlock()
	if done {
		return
	}
	ts, err := x.lab.Transcripts()
	if err != nil {
		s.log.Warn("read an exam lab's commands", "attempt", x.attempt, "lab", x.lab.ID, "err", err)
		return
	}
	for _, tr := range ts {
		for _, cmd := range tr.Commands {
			at := x.lab.Started.Add(time.Duration(cmd.Start * float64(time.Second)))
			if err := s.examDB().LogCommand(ctx, x.attempt, store.Command{Task: x.task, Node: tr.Node, Command: cmd.Line, At: at}); err != nil {
				s.log.Warn("keep an exam command", "attempt", x.attempt, "err", err)
				return
			}
		}
	}
}

// keepExamCommands keeps the commands of every exam lab so far, for a server
// that stops: its labs end with it, and the attempts outlive them.
func (s *Server) keepExamCommands(ctx context.Context) {
	s.xlabs.mu.Lock()
	all := make([]*examLab, 0, len(s.xlabs.byLab))
	for _, x := range s.xlabs.byLab {
		all = append(all, x)
	}
	s.xlabs.mu.Unlock()
	for _, x := range all {
		s.keepCommands(ctx, x)
	}
}

// endLabs stops every lab of the attempt, waits for their teardown (faults
// reverted, sandbox gone), keeps their commands and forgets them.
func (s *Server) endLabs(ctx context.Context, attempt int64) {
	xs := s.xlabs.ofAttempt(attempt)
	for _, x := range xs {
		x.lab.Stop()
	}
	for _, x := range xs {
		select {
		case <-x.lab.Ended():
		case <-time.After(2 * time.Minute):
			s.log.Error("exam lab teardown is late", "attempt", attempt, "lab", x.lab.ID)
		}
		s.keepCommands(ctx, x)
		s.xlabs.mu.Lock()
		delete(s.xlabs.byLab, x.lab.ID)
		s.xlabs.mu.Unlock()
	}
}

// notExamLab refuses the lab page's own grading, hints, give-up and stop for
// an exam lab: its diagnosis goes to the attempt, and its end comes with it.
func (s *Server) notExamLab(c *gin.Context) {
	if s.xlabs.get(labOf(c).ID) != nil {
		s.fail(c, errExamLabOnly)
		return
	}
	c.Next()
}

// labExam is what the lab page shows of the exam around an exam lab.
type labExam struct {
	Attempt  int64
	Task     int
	Title    string
	Deadline string // RFC 3339, server time
	Now      string
}

// examModeOf returns the exam around a lab, nil for a lab of the lab pages.
func (s *Server) examModeOf(ctx context.Context, l *session.Lab, lang string) *labExam {
	x := s.xlabs.get(l.ID)
	if x == nil {
		return nil
	}
	le := &labExam{Attempt: x.attempt, Task: x.task, Title: fmt.Sprintf(web.T(lang, "exam.task.lab"), x.task+1),
		Now: time.Now().UTC().Format(time.RFC3339)}
	if a, err := s.examDB().Attempt(ctx, x.attempt); err == nil {
		le.Deadline = s.deadlineOf(a).UTC().Format(time.RFC3339)
	}
	return le
}
