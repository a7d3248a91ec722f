package server

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/exam"
	"github.com/commlab/commlab/server/store"
	"github.com/commlab/commlab/web"
)

var errNoAttempt = httpError{http.StatusNotFound, "exam.noattempt", "no such attempt"}

func (s *Server) examRoutes(r *gin.Engine) {
	r.GET("/exams", s.requireUser, s.needExams, s.examList)
	r.GET("/exams/:exam", s.requireUser, s.needExams, s.examStartPage)
	r.POST("/exams/:exam/start", s.requireUser, s.needExams, s.examStart)
	a := r.Group("/attempt/:aid", s.requireUser, s.needExams, s.loadAttempt)
	a.GET("", s.attemptPage)
	a.POST("/task/:n", s.attemptSave)
	a.POST("/submit", s.attemptSubmit)
	a.POST("/lab/:n", s.attemptLabStart)
	a.POST("/lab/:n/diagnosis", s.attemptLabDiagnose)
	adm := r.Group("/admin/exams", s.requireUser, s.needExams, s.requireRole(store.RoleInstructor))
	adm.GET("", s.examAdmin)
	adm.GET("/attempts.csv", s.examCSV)
	adm.POST("/switch/:exam", s.requireRole(store.RoleAdmin), s.examSwitch)
	adm.GET("/attempt/:aid", s.loadAttempt, s.attemptReview)
	adm.POST("/attempt/:aid/void", s.loadAttempt, s.attemptVoid)
}

// examDB is the store's exam half; exams need it and the certificate key.
func (s *Server) examDB() store.Exams { db, _ := s.store.(store.Exams); return db }

func (s *Server) needExams(c *gin.Context) {
	if s.exams == nil || s.ca == nil || s.examDB() == nil {
		s.fail(c, httpError{http.StatusServiceUnavailable, "cert.off", "no exams or no signing key"})
		return
	}
	c.Next()
}

// loadAttempt finds the attempt in the path: the candidate's own, or any for
// an instructor or admin under /admin. It submits an attempt whose time is up
// first, so every page sees it ended.
func (s *Server) loadAttempt(c *gin.Context) {
	id, _ := strconv.ParseInt(c.Param("aid"), 10, 64)
	a, err := s.examDB().Attempt(c.Request.Context(), id)
	u := userOf(c)
	staff := u.Role == store.RoleAdmin || u.Role == store.RoleInstructor
	if err != nil || (a.UserID != u.ID && !(staff && c.FullPath()[:7] == "/admin/")) {
		s.fail(c, errNoAttempt)
		return
	}
	e, ok := s.exams.Get(a.ExamID)
	if !ok {
		s.fail(c, errNoAttempt)
		return
	}
	if s.timeUp(a) {
		if a, err = s.finishAttempt(c.Request.Context(), a, e, true); err != nil {
			s.fail(c, err)
			return
		}
	}
	c.Set("attempt", a)
	c.Set("exam", e)
	c.Next()
}

func attemptOf(c *gin.Context) (*store.Attempt, *exam.Exam) {
	return c.MustGet("attempt").(*store.Attempt), c.MustGet("exam").(*exam.Exam)
}

type examListData struct {
	Exams    []*exam.Exam
	Switches map[string]store.ExamSwitch
	Attempts []store.Attempt
}

func (s *Server) examList(c *gin.Context) {
	ctx := c.Request.Context()
	atts, err := s.examDB().Attempts(ctx, "", userOf(c).ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	sw, err := s.examDB().ExamSwitches(ctx)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.renderPage(c, http.StatusOK, "exams", web.T(langOf(c), "exam.list.title"), examListData{Exams: s.exams.All(), Switches: sw, Attempts: atts})
}

// switchOf is the exam's switch; the zero one (enabled) if never switched.
func (s *Server) switchOf(ctx context.Context, examID string) (store.ExamSwitch, error) {
	all, err := s.examDB().ExamSwitches(ctx)
	return all[examID], err
}

// disabledMsg tells a candidate that the exam takes no new attempts, with
// the admin's note.
func disabledMsg(lang string, sw store.ExamSwitch) string {
	msg := web.T(lang, "exam.disabled")
	if sw.Note != "" {
		msg += " " + fmt.Sprintf(web.T(lang, "exam.disabled.note"), sw.Note)
	}
	return msg
}

type examStartData struct {
	Exam    *exam.Exam
	Minutes int
	Used    int
	Active  *store.Attempt
	Cannot  string
}

// ended lists when the user's counted (not voided) attempts at e ended.
func (s *Server) ended(ctx context.Context, userID int64, e *exam.Exam) ([]time.Time, *store.Attempt, error) {
	atts, err := s.examDB().Attempts(ctx, e.ID, userID)
	if err != nil {
		return nil, nil, err
	}
	var out []time.Time
	var active *store.Attempt
	for i, a := range atts {
		switch a.State {
		case store.AttemptSubmitted:
			out = append(out, a.SubmittedAt)
		case store.AttemptActive:
			active = &atts[i]
		}
	}
	return out, active, nil
}

func (s *Server) examStartPage(c *gin.Context) {
	e, ok := s.exams.Get(c.Param("exam"))
	if !ok {
		s.fail(c, errNotFound)
		return
	}
	ended, active, err := s.ended(c.Request.Context(), userOf(c).ID, e)
	if err != nil {
		s.fail(c, err)
		return
	}
	sw, err := s.switchOf(c.Request.Context(), e.ID)
	if err != nil {
		s.fail(c, err)
		return
	}
	d := examStartData{Exam: e, Minutes: int(e.TimeLimit.Minutes()), Used: len(ended), Active: active}
	if active == nil && sw.Disabled {
		d.Cannot = disabledMsg(langOf(c), sw)
	} else if err := e.MayStart(ended, time.Now()); err != nil && active == nil {
		d.Cannot = s.cannotStart(langOf(c), err)
	}
	s.renderPage(c, http.StatusOK, "exam", e.TitleIn(langOf(c)), d)
}

func (s *Server) cannotStart(lang string, err error) string {
	if errors.Is(err, exam.ErrCoolingDown) {
		return web.T(lang, "exam.cooldown") + " " + err.Error()
	}
	return web.T(lang, "exam.noattempts")
}

func (s *Server) examStart(c *gin.Context) {
	e, ok := s.exams.Get(c.Param("exam"))
	if !ok {
		s.fail(c, errNotFound)
		return
	}
	ctx, u := c.Request.Context(), userOf(c)
	if a, err := s.examDB().ActiveAttempt(ctx, u.ID); err == nil {
		c.Redirect(http.StatusSeeOther, fmt.Sprintf("/attempt/%d", a.ID))
		return
	}
	// A disabled exam takes no new attempt; those already running go on (above).
	if sw, err := s.switchOf(ctx, e.ID); err != nil || sw.Disabled {
		s.fail(c, firstErr(err, httpError{http.StatusConflict, "exam.cannot", disabledMsg(langOf(c), sw)}))
		return
	}
	ended, _, err := s.ended(ctx, u.ID, e)
	if err != nil {
		s.fail(c, err)
		return
	}
	if err := e.MayStart(ended, time.Now()); err != nil {
		s.fail(c, httpError{http.StatusConflict, "exam.cannot", s.cannotStart(langOf(c), err)})
		return
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	a := &store.Attempt{UserID: u.ID, ExamID: e.ID, Seed: exam.NewSeed(), StartedAt: now, Deadline: now.Add(e.TimeLimit)}
	if err := s.examDB().StartAttempt(ctx, a); errors.Is(err, store.ErrExists) {
		s.fail(c, httpError{http.StatusConflict, "exam.active", ""})
		return
	} else if err != nil {
		s.fail(c, err)
		return
	}
	s.log.Info("exam attempt started", "attempt", a.ID, "exam", e.ID, "user", u.ID)
	c.Redirect(http.StatusSeeOther, fmt.Sprintf("/attempt/%d", a.ID))
}

// taskView is one task as the candidate sees it: never the scenario, its
// title (which may name the fault) or its variant.
type taskView struct {
	Index     int
	Lab       bool
	Text      string // the lab's task statement (the symptoms)
	Questions []examQuestion
	Saved     bool
	// Labs while the attempt runs: the lab open now, and whether its
	// diagnosis is in (its score shows only at the end).
	LabOpen   string
	Diagnosed bool
	Graded    bool
	Score     float64
	Report    *taskReport
}

type examQuestion struct {
	Ref      string
	Q        *course.Question
	Given    []string
	Verdict  string // right or wrong, after the end
	Position int
}

// taskReport is what a task's score rests on, kept as JSON with the task.
type taskReport struct {
	Correct  []string `json:"correct,omitempty"`  // theory: questions right
	Wrong    []string `json:"wrong,omitempty"`    // theory: questions wrong or unanswered
	Evidence []string `json:"evidence,omitempty"` // labs: evidence that counted
	Hints    int      `json:"hints,omitempty"`
}

type attemptData struct {
	Attempt  *store.Attempt
	Exam     *exam.Exam
	Tasks    []taskView
	Deadline string // RFC 3339, server time
	Now      string
	Over     bool
	Cert     string
	Review   bool
	Commands []store.Command
	Band     string
}

func (s *Server) attemptView(ctx context.Context, a *store.Attempt, e *exam.Exam, lang string) (attemptData, error) {
	d := attemptData{Attempt: a, Exam: e, Deadline: s.deadlineOf(a).UTC().Format(time.RFC3339), Now: time.Now().UTC().Format(time.RFC3339), Over: a.State != store.AttemptActive}
	saved, err := s.examDB().Tasks(ctx, a.ID)
	if err != nil {
		return d, err
	}
	byTask := map[int]store.AttemptTask{}
	for _, t := range saved {
		byTask[t.Task] = t
	}
	// A task's lab may run on another replica: its link is forwarded there.
	var elsewhere []store.LabOwner
	if !d.Over {
		if elsewhere, err = s.labsElsewhere(ctx, a.UserID); err != nil {
			return d, err
		}
	}
	for _, t := range s.exams.Tasks(e, a.Seed) {
		st := byTask[t.Index]
		tv := taskView{Index: t.Index, Lab: t.Lab(), Saved: !st.SavedAt.IsZero(), Graded: st.Graded && d.Over, Score: st.Score}
		if tv.Graded && st.Report != "" {
			tv.Report = &taskReport{}
			_ = json.Unmarshal([]byte(st.Report), tv.Report)
		}
		if t.Lab() {
			if v, err := t.Variant(s.cats); err == nil {
				tv.Text = v.Task()
			}
			tv.Diagnosed = st.Graded
			if x := s.xlabs.running(a.ID, t.Index); x != nil && !d.Over {
				tv.LabOpen = x.lab.ID
			}
			for _, o := range elsewhere {
				if o.Attempt == a.ID && o.Task == t.Index {
					tv.LabOpen = o.LabID
				}
			}
		}
		var given map[string][]string
		_ = json.Unmarshal([]byte(st.Answer), &given)
		for i, ref := range t.Questions {
			q, err := exam.Question(s.lib.Course(), ref)
			if err != nil {
				return d, err
			}
			qv := examQuestion{Ref: ref, Q: q, Given: given[ref], Position: i + 1}
			if tv.Report != nil {
				qv.Verdict = "wrong"
				for _, r := range tv.Report.Correct {
					if r == ref {
						qv.Verdict = "right"
					}
				}
			}
			tv.Questions = append(tv.Questions, qv)
		}
		d.Tasks = append(d.Tasks, tv)
	}
	if a.Passed && a.State == store.AttemptSubmitted {
		d.Band = web.T(lang, bandKey(e.BandOf(a.Score)))
		if certs, err := s.ca.certs.UserCertificates(ctx, a.UserID); err == nil {
			for _, r := range certs {
				if r.AttemptID == a.ID {
					d.Cert = r.ID
				}
			}
		}
	}
	return d, nil
}

func (s *Server) attemptPage(c *gin.Context) {
	a, e := attemptOf(c)
	d, err := s.attemptView(c.Request.Context(), a, e, langOf(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	s.renderPage(c, http.StatusOK, "attempt", e.TitleIn(langOf(c)), d)
}

// attemptSave keeps a theory task's answers (q.<chapter/qid> fields). They are
// graded only when the attempt ends.
func (s *Server) attemptSave(c *gin.Context) {
	a, e := attemptOf(c)
	if a.State != store.AttemptActive {
		s.fail(c, httpError{http.StatusConflict, "exam.over", ""})
		return
	}
	n, err := strconv.Atoi(c.Param("n"))
	tasks := s.exams.Tasks(e, a.Seed)
	if err != nil || n < 0 || n >= len(tasks) || tasks[n].Lab() {
		s.fail(c, errNotFound)
		return
	}
	given := map[string][]string{}
	for _, ref := range tasks[n].Questions {
		if v := c.PostFormArray("q." + ref); len(v) > 0 {
			given[ref] = v
		}
	}
	b, _ := json.Marshal(given)
	if err := s.examDB().SaveAnswer(c.Request.Context(), a.ID, n, string(b)); err != nil {
		s.fail(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, fmt.Sprintf("/attempt/%d#task-%d", a.ID, n))
}

func (s *Server) attemptSubmit(c *gin.Context) {
	a, e := attemptOf(c)
	if a.State == store.AttemptActive {
		if _, err := s.finishAttempt(c.Request.Context(), a, e, false); err != nil {
			s.fail(c, err)
			return
		}
	}
	c.Redirect(http.StatusSeeOther, fmt.Sprintf("/attempt/%d", a.ID))
}

// finishAttempt grades what was not graded yet (theory from the saved
// answers; a lab without a graded diagnosis scores 0), scores the attempt,
// ends it and, on a pass, issues the certificate.
func (s *Server) finishAttempt(ctx context.Context, a *store.Attempt, e *exam.Exam, auto bool) (*store.Attempt, error) {
	db := s.examDB()
	if auto {
		// A lab that came up meanwhile has moved the deadline.
		now, err := db.Attempt(ctx, a.ID)
		if err != nil || !s.timeUp(now) {
			return now, err
		}
	}
	s.endLabs(ctx, a.ID)
	saved, err := db.Tasks(ctx, a.ID)
	if err != nil {
		return nil, err
	}
	byTask := map[int]store.AttemptTask{}
	for _, t := range saved {
		byTask[t.Task] = t
	}
	tasks := s.exams.Tasks(e, a.Seed)
	scores := map[int]exam.TaskScore{}
	for _, t := range tasks {
		st := byTask[t.Index]
		if t.Lab() {
			if st.Graded {
				var rep taskReport
				_ = json.Unmarshal([]byte(st.Report), &rep)
				scores[t.Index] = exam.TaskScore{Score: st.Score, Hints: rep.Hints}
			}
			continue
		}
		var given map[string][]string
		_ = json.Unmarshal([]byte(st.Answer), &given)
		var rep taskReport
		for _, ref := range t.Questions {
			q, err := exam.Question(s.lib.Course(), ref)
			if err != nil {
				return nil, err
			}
			one := &course.Quiz{Pass: 1, Questions: []*course.Question{q}}
			if one.Grade(course.Answers{q.ID: given[ref]}).Passed {
				rep.Correct = append(rep.Correct, ref)
			} else {
				rep.Wrong = append(rep.Wrong, ref)
			}
		}
		score := float64(len(rep.Correct)) / float64(len(t.Questions))
		b, _ := json.Marshal(rep)
		if err := db.GradeTask(ctx, a.ID, t.Index, score, string(b)); err != nil {
			return nil, err
		}
		scores[t.Index] = exam.TaskScore{Score: score}
	}
	score := e.Score(tasks, scores)
	passed := e.Passed(score)
	if err := db.SubmitAttempt(ctx, a.ID, score, passed, auto); err != nil {
		if errors.Is(err, store.ErrInvalid) { // submitted meanwhile by another request
			return db.Attempt(ctx, a.ID)
		}
		return nil, err
	}
	s.log.Info("exam attempt submitted", "attempt", a.ID, "exam", e.ID, "score", score, "passed", passed, "auto", auto)
	if passed {
		u, err := s.store.UserByID(ctx, a.UserID)
		if err != nil {
			return nil, err
		}
		if _, err := s.ca.issue(ctx, u, a.ID, e.ID, e.Title, e.BandOf(score)); err != nil {
			return nil, err
		}
	}
	return db.Attempt(ctx, a.ID)
}

type examAdminData struct {
	Exams    []examState
	Attempts []store.Attempt
	Names    map[int64]string
}

// examState is one exam on the staff page: its switch and the attempts it
// has running (a switch leaves those alone).
type examState struct {
	Exam   *exam.Exam
	Switch store.ExamSwitch
	Active int
}

// finishDue submits every active attempt whose time is up, so lists are right.
func (s *Server) finishDue(ctx context.Context, atts []store.Attempt) error {
	for i, a := range atts {
		e, ok := s.exams.Get(a.ExamID)
		if !ok || !s.timeUp(&atts[i]) {
			continue
		}
		done, err := s.finishAttempt(ctx, &atts[i], e, true)
		if err != nil {
			return err
		}
		atts[i] = *done
	}
	return nil
}

func (s *Server) adminAttempts(c *gin.Context) ([]store.Attempt, map[int64]string, bool) {
	ctx := c.Request.Context()
	atts, err := s.examDB().Attempts(ctx, c.Query("exam"), 0)
	if err == nil {
		err = s.finishDue(ctx, atts)
	}
	users, uerr := s.store.ListUsers(ctx)
	if err == nil {
		err = uerr
	}
	if err != nil {
		s.fail(c, err)
		return nil, nil, false
	}
	names := map[int64]string{}
	for _, u := range users {
		names[u.ID] = u.Name + " <" + u.Email + ">"
	}
	return atts, names, true
}

func (s *Server) examAdmin(c *gin.Context) {
	atts, names, ok := s.adminAttempts(c)
	if !ok {
		return
	}
	sw, err := s.examDB().ExamSwitches(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	d := examAdminData{Attempts: atts, Names: names}
	for _, e := range s.exams.All() {
		st := examState{Exam: e, Switch: sw[e.ID]}
		for _, a := range atts {
			if a.ExamID == e.ID && a.State == store.AttemptActive {
				st.Active++
			}
		}
		d.Exams = append(d.Exams, st)
	}
	s.renderPage(c, http.StatusOK, "examadmin", web.T(langOf(c), "exam.admin.title"), d)
}

// examSwitch disables an exam (with a note for candidates) or enables it
// again. Disabling refuses new attempts only: a candidate mid-exam keeps the
// attempt, its labs and its clock (an admin voids one to stop it), since
// ending it would take time paid for and give no grade for work done.
func (s *Server) examSwitch(c *gin.Context) {
	e, ok := s.exams.Get(c.Param("exam"))
	if !ok {
		s.fail(c, errNotFound)
		return
	}
	sw := store.ExamSwitch{ExamID: e.ID, Disabled: c.PostForm("disabled") == "true", By: userOf(c).ID}
	if sw.Disabled {
		sw.Note = strings.TrimSpace(c.PostForm("note"))
	}
	if utf8.RuneCountInString(sw.Note) > 300 {
		s.fail(c, httpError{http.StatusBadRequest, "exam.switch.long", ""})
		return
	}
	if err := s.examDB().SetExamSwitch(c.Request.Context(), sw); err != nil {
		s.fail(c, err)
		return
	}
	s.log.Info("exam switched", "exam", e.ID, "disabled", sw.Disabled, "by", sw.By)
	c.Redirect(http.StatusSeeOther, "/admin/exams#exam-"+e.ID)
}

func (s *Server) examCSV(c *gin.Context) {
	atts, names, ok := s.adminAttempts(c)
	if !ok {
		return
	}
	c.Header("Content-Type", "text/csv; charset=utf-8")
	c.Header("Content-Disposition", `attachment; filename="attempts.csv"`)
	w := csv.NewWriter(c.Writer)
	_ = w.Write([]string{"attempt", "exam", "candidate", "state", "started", "deadline", "submitted", "auto_submitted", "score", "passed", "void_reason"})
	for _, a := range atts {
		sub := ""
		if !a.SubmittedAt.IsZero() {
			sub = a.SubmittedAt.Format(time.RFC3339)
		}
		_ = w.Write([]string{strconv.FormatInt(a.ID, 10), a.ExamID, names[a.UserID], string(a.State), a.StartedAt.Format(time.RFC3339),
			a.Deadline.Format(time.RFC3339), sub, strconv.FormatBool(a.Auto), strconv.FormatFloat(a.Score, 'f', 4, 64), strconv.FormatBool(a.Passed), a.VoidReason})
	}
	w.Flush()
}

func (s *Server) attemptReview(c *gin.Context) {
	a, e := attemptOf(c)
	ctx := c.Request.Context()
	d, err := s.attemptView(ctx, a, e, langOf(c))
	if err == nil {
		d.Commands, err = s.examDB().Commands(ctx, a.ID)
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	d.Review = true
	s.renderPage(c, http.StatusOK, "attempt", e.TitleIn(langOf(c)), d)
}

// attemptVoid voids an attempt and revokes a certificate it earned.
func (s *Server) attemptVoid(c *gin.Context) {
	a, _ := attemptOf(c)
	ctx, u := c.Request.Context(), userOf(c)
	reason := c.PostForm("reason")
	if err := s.examDB().VoidAttempt(ctx, a.ID, u.ID, reason); errors.Is(err, store.ErrInvalid) {
		s.fail(c, httpError{http.StatusBadRequest, "exam.void.noreason", ""})
		return
	} else if err != nil {
		s.fail(c, err)
		return
	}
	s.endLabs(ctx, a.ID)
	certs, err := s.ca.certs.UserCertificates(ctx, a.UserID)
	if err != nil {
		s.fail(c, err)
		return
	}
	for _, r := range certs {
		if r.AttemptID == a.ID {
			if err := s.ca.certs.RevokeCertificate(ctx, r.ID, u.ID, reason); err != nil {
				s.fail(c, err)
				return
			}
		}
	}
	s.log.Info("exam attempt voided", "attempt", a.ID, "by", u.ID)
	c.Redirect(http.StatusSeeOther, fmt.Sprintf("/admin/exams/attempt/%d", a.ID))
}

// sweepAttempts submits attempts whose time ran out even when no page asks
// for them, so a candidate who closed the browser gets a result (and a pass
// its certificate) at the deadline, give or take the interval.
func (s *Server) sweepAttempts(ctx context.Context) {
	if s.exams == nil || s.ca == nil || s.examDB() == nil {
		return
	}
	every(ctx, 30*time.Second, func() { s.sweepAttemptsOnce(ctx) })
}

// sweepAttemptsOnce submits the attempts whose time is up, and ends this
// server's exam labs whose attempt has ended elsewhere (submitted or voided
// through another replica).
func (s *Server) sweepAttemptsOnce(ctx context.Context) {
	atts, err := s.examDB().Attempts(ctx, "", 0)
	if err == nil {
		err = s.finishDue(ctx, atts)
	}
	if err != nil && ctx.Err() == nil {
		s.log.Warn("submit timed-out exam attempts", "err", err)
		return
	}
	for _, a := range atts {
		if a.State != store.AttemptActive && len(s.xlabs.ofAttempt(a.ID)) > 0 {
			s.endLabs(ctx, a.ID)
		}
	}
}
