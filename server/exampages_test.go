package server

import (
	"context"
	"database/sql"
	"encoding/csv"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/commlab/commlab/cert"
	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/exam"
	"github.com/commlab/commlab/scenarios"
	"github.com/commlab/commlab/scenarios/exams"
	"github.com/commlab/commlab/server/store"
)

type examEnv struct {
	*testEnv
	srv  *Server
	st   *store.SQLite
	path string
}

// newExamEnv serves the real course, scenarios and shipped exams. Reopening
// the same database path stands for a server restart.
func newExamEnv(t *testing.T, dbPath string) *examEnv {
	t.Helper()
	st, err := store.OpenSQLite(context.Background(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	d := examDeps(t, filepath.Dir(dbPath))
	d.Store, d.Secret, d.Log = st, []byte("0123456789abcdef0123456789abcdef"), slog.New(slog.DiscardHandler)
	srv, err := New(Config{}, d)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &examEnv{testEnv: &testEnv{t: t, url: hs.URL, store: st, c: newClient()}, srv: srv, st: st, path: dbPath}
}

// examDeps are the shipped course, scenarios and exams, and the certificate
// key kept in dir (made there the first time).
func examDeps(t *testing.T, dir string) Deps {
	t.Helper()
	cat, _ := scenarios.Load(scenarios.Embedded(), scenarios.CatalogDir, scenarios.Options{})
	lib, err := course.NewLibrary(course.Embedded(), course.Options{LabExists: func(string) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	set, errs := exam.Load(exams.Embedded(), ".", cat, lib.Course())
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	key, err := cert.LoadOrCreateKey(filepath.Join(dir, "cert.key"))
	if err != nil {
		t.Fatal(err)
	}
	return Deps{Library: lib, Scenarios: cat, Exams: set, CertKey: key}
}

// rightAnswers reads the answer key of the referenced questions from the quiz files.
func rightAnswers(t *testing.T, refs []string) url.Values {
	t.Helper()
	v := url.Values{}
	for _, ref := range refs {
		ch, qid, _ := strings.Cut(ref, "/")
		b, err := course.Embedded().(interface{ ReadFile(string) ([]byte, error) }).ReadFile("quizzes/" + ch + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		var qf struct {
			Questions []struct {
				ID     string `yaml:"id"`
				Answer any    `yaml:"answer"`
			} `yaml:"questions"`
		}
		if err := yaml.Unmarshal(b, &qf); err != nil {
			t.Fatal(err)
		}
		for _, q := range qf.Questions {
			if q.ID != qid {
				continue
			}
			switch a := q.Answer.(type) {
			case []any:
				for _, x := range a {
					v.Add("q."+ref, fmt.Sprint(x))
				}
			default:
				v.Add("q."+ref, fmt.Sprint(a))
			}
		}
	}
	return v
}

var attemptRe = regexp.MustCompile(`/attempt/(\d+)`)

func (e *examEnv) start(c *http.Client) int64 {
	e.t.Helper()
	tok := e.csrf(c, "/exams/m12")
	code, body, h := e.do(c, "POST", "/exams/m12/start", url.Values{"csrf_token": {tok}})
	m := attemptRe.FindStringSubmatch(h.Get("Location"))
	if code != http.StatusSeeOther || m == nil {
		e.t.Fatalf("start: %d %s %v", code, body, h)
	}
	var id int64
	fmt.Sscan(m[1], &id)
	return id
}

func TestExamAttempts(t *testing.T) {
	dir := t.TempDir()
	e := newExamEnv(t, filepath.Join(dir, "commlab.db"))
	ctx := context.Background()
	admin, pass, fail, late := newClient(), newClient(), newClient(), newClient()
	for i, c := range []*http.Client{admin, pass, fail, late} {
		e.register(c, fmt.Sprintf("u%d@example.com", i))
	}
	aPass, aFail, aLate := e.start(pass), e.start(fail), e.start(late)
	if again := e.start(pass); again != aPass {
		t.Errorf("second start gave attempt %d, want the active %d", again, aPass)
	}

	// Nothing on the attempt page names a scenario, its title or its debrief.
	_, page, _ := e.do(pass, "GET", fmt.Sprintf("/attempt/%d", aPass), nil)
	for _, s := range e.srv.cats.All() {
		if strings.Contains(page, s.ID) || strings.Contains(page, s.Title) {
			t.Errorf("attempt page names scenario %s", s.ID)
		}
	}
	if !strings.Contains(page, "data-deadline=") {
		t.Error("attempt page has no countdown")
	}
	// Another candidate cannot open it.
	if code, _, _ := e.do(fail, "GET", fmt.Sprintf("/attempt/%d", aPass), nil); code != http.StatusNotFound {
		t.Errorf("other candidate's attempt: %d, want 404", code)
	}
	// Two candidates get different labs or variants.
	a1, _ := e.st.Attempt(ctx, aPass)
	a2, _ := e.st.Attempt(ctx, aFail)
	m12, _ := e.srv.exams.Get("m12")
	t1, t2 := e.srv.exams.Tasks(m12, a1.Seed), e.srv.exams.Tasks(m12, a2.Seed)
	same := true
	for i := range t1 {
		same = same && t1[i].Scenario == t2[i].Scenario && t1[i].Seed == t2[i].Seed
	}
	if same {
		t.Error("two candidates drew identical attempts")
	}

	// pass: right theory answers, saved, then a server restart.
	theory := t1[len(t1)-1]
	form := rightAnswers(t, theory.Questions)
	form.Set("csrf_token", e.csrf(pass, fmt.Sprintf("/attempt/%d", aPass)))
	if code, body, _ := e.do(pass, "POST", fmt.Sprintf("/attempt/%d/task/%d", aPass, theory.Index), form); code != http.StatusSeeOther {
		t.Fatalf("save: %d %s", code, body)
	}
	// The labs are graded through the lab lifecycle; here their grades are recorded directly.
	for _, tk := range t1 {
		if tk.Lab() {
			if err := e.st.GradeTask(ctx, aPass, tk.Index, 1, `{"evidence":["tc-qdisc"]}`); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.st.Close()
	e2 := newExamEnv(t, e.path)
	e2.c = e.c
	a1b, err := e2.st.Attempt(ctx, aPass)
	if err != nil || !a1b.Deadline.Equal(a1.Deadline) || a1b.State != store.AttemptActive {
		t.Fatalf("after restart: %+v %v", a1b, err)
	}
	_, page, _ = e2.do(pass, "GET", fmt.Sprintf("/attempt/%d", aPass), nil)
	if strings.Count(page, "checked") < 1 {
		t.Error("saved answers not shown after restart")
	}
	tok := e2.csrf(pass, fmt.Sprintf("/attempt/%d", aPass))
	e2.do(pass, "POST", fmt.Sprintf("/attempt/%d/submit", aPass), url.Values{"csrf_token": {tok}})
	_, page, _ = e2.do(pass, "GET", fmt.Sprintf("/attempt/%d", aPass), nil)
	if !strings.Contains(page, `data-passed="true"`) || !strings.Contains(page, `id="exam-cert"`) {
		t.Fatalf("passing result page:\n%s", page)
	}
	id := regexp.MustCompile(`/verify/(CL-[A-Z2-7-]+)`).FindStringSubmatch(page)[1]
	if v := e2.verdict("/api/verify/" + id); !v.Valid || v.Certificate.Band != "distinction" || v.Certificate.Name != "学员" {
		t.Errorf("certificate verdict: %+v", v)
	}

	// fail: wrong answers only.
	wrong := url.Values{"csrf_token": {e2.csrf(fail, fmt.Sprintf("/attempt/%d", aFail))}}
	for _, ref := range t2[len(t2)-1].Questions {
		wrong.Set("q."+ref, "999")
	}
	e2.do(fail, "POST", fmt.Sprintf("/attempt/%d/task/%d", aFail, len(t2)-1), wrong)
	e2.do(fail, "POST", fmt.Sprintf("/attempt/%d/submit", aFail), url.Values{"csrf_token": {wrong.Get("csrf_token")}})
	if a, _ := e2.st.Attempt(ctx, aFail); a.State != store.AttemptSubmitted || a.Passed || a.Score != 0 {
		t.Errorf("failing attempt: %+v", a)
	}
	if certs, _ := e2.st.UserCertificates(ctx, a2.UserID); len(certs) != 0 {
		t.Errorf("failing candidate got certificates %v", certs)
	}

	// late: the deadline passes; the next request submits it.
	if _, err := e2.st.Attempt(ctx, aLate); err != nil {
		t.Fatal(err)
	}
	setDeadline(t, e2.path, aLate, time.Now().Add(-time.Second))
	_, page, _ = e2.do(late, "GET", fmt.Sprintf("/attempt/%d", aLate), nil)
	if !strings.Contains(page, `data-auto="true"`) {
		t.Errorf("timed-out attempt not auto-submitted:\n%s", page)
	}
	tok = e2.csrf(late, fmt.Sprintf("/attempt/%d", aLate))
	if code, _, _ := e2.do(late, "POST", fmt.Sprintf("/attempt/%d/task/%d", aLate, 0), url.Values{"csrf_token": {tok}}); code != http.StatusConflict {
		t.Errorf("save after time-out: %d, want 409", code)
	}

	// Staff: learners are refused; admin sees the CSV and voids the pass,
	// which revokes its certificate.
	if code, _, _ := e2.do(pass, "GET", "/admin/exams", nil); code != http.StatusForbidden {
		t.Errorf("learner on /admin/exams: %d", code)
	}
	_, csvBody, _ := e2.do(admin, "GET", "/admin/exams/attempts.csv", nil)
	rows, err := csv.NewReader(strings.NewReader(csvBody)).ReadAll()
	if err != nil || len(rows) != 4 || rows[0][0] != "attempt" {
		t.Errorf("csv: %v %q", err, csvBody)
	}
	tok = e2.csrf(admin, fmt.Sprintf("/admin/exams/attempt/%d", aPass))
	if code, body, _ := e2.do(admin, "POST", fmt.Sprintf("/admin/exams/attempt/%d/void", aPass), url.Values{"csrf_token": {tok}, "reason": {"答案外泄"}}); code != http.StatusSeeOther {
		t.Fatalf("void: %d %s", code, body)
	}
	if v := e2.verdict("/api/verify/" + id); v.Valid || v.Reason != "revoked" {
		t.Errorf("certificate of a voided attempt: %+v", v)
	}
}

func setDeadline(t *testing.T, path string, id int64, at time.Time) {
	t.Helper()
	db := openRawDB(t, path)
	if _, err := db.Exec("UPDATE exam_attempts SET deadline_at = ? WHERE id = ?", at.UnixMicro(), id); err != nil {
		t.Fatal(err)
	}
}

// openRawDB opens the server's database file beside the store, for a test to
// move an attempt's clock.
func openRawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestExamSwitch: an admin closes an exam to new attempts with a note. A
// candidate then sees why on the list and start pages (zh-CN and en) and is
// refused a start; one mid-exam carries on to a graded submit. Learners and
// instructors cannot switch; reopening lets candidates start again.
func TestExamSwitch(t *testing.T) {
	e := newExamEnv(t, filepath.Join(t.TempDir(), "commlab.db"))
	ctx := context.Background()
	admin, inst, mid, late := newClient(), newClient(), newClient(), newClient()
	for i, c := range []*http.Client{admin, inst, mid, late} {
		e.register(c, fmt.Sprintf("s%d@example.com", i)) // the first account is the admin
	}
	iu, _ := e.st.UserByEmail(ctx, "s1@example.com")
	if err := e.st.SetRole(ctx, iu.ID, store.RoleInstructor); err != nil {
		t.Fatal(err)
	}
	aMid := e.start(mid)
	switchExam := func(c *http.Client, exam string, form url.Values) int {
		t.Helper()
		form.Set("csrf_token", e.csrf(c, "/exams"))
		code, _, _ := e.do(c, "POST", "/admin/exams/switch/"+exam, form)
		return code
	}
	const note = "机房维护，6 月 2 日恢复"
	for _, tt := range []struct {
		who  string
		c    *http.Client
		exam string
		form url.Values
		want int
	}{
		{"learner", late, "m12", url.Values{"disabled": {"true"}}, http.StatusForbidden},
		{"instructor", inst, "m12", url.Values{"disabled": {"true"}}, http.StatusForbidden},
		{"admin, no such exam", admin, "m99", url.Values{"disabled": {"true"}}, http.StatusNotFound},
		{"admin, note too long", admin, "m12", url.Values{"disabled": {"true"}, "note": {strings.Repeat("长", 301)}}, http.StatusBadRequest},
		{"admin", admin, "m12", url.Values{"disabled": {"true"}, "note": {"  " + note + " "}}, http.StatusSeeOther},
	} {
		if code := switchExam(tt.c, tt.exam, tt.form); code != tt.want {
			t.Errorf("%s switches %s: %d, want %d", tt.who, tt.exam, code, tt.want)
		}
	}

	// Staff see the state, the note and the attempt still running; only the
	// admin gets the form.
	for _, c := range []*http.Client{admin, inst} {
		_, page, _ := e.do(c, "GET", "/admin/exams", nil)
		row := regexp.MustCompile(`(?s)<tr id="exam-m12".*?</tr>`).FindString(page)
		if !strings.Contains(row, `data-disabled="true"`) || !strings.Contains(row, note) || !strings.Contains(row, "<td>1</td>") {
			t.Errorf("the staff page's row of m12:\n%s", row)
		}
		if form := strings.Contains(row, `action="/admin/exams/switch/m12"`); form != (c == admin) {
			t.Errorf("switch form on the page: %v, want it for the admin only", form)
		}
	}

	// A new candidate is told why, in either language, and cannot start.
	_, list, _ := e.do(late, "GET", "/exams", nil)
	if !strings.Contains(list, `data-closed="m12"`) {
		t.Error("the exam list does not mark m12 closed")
	}
	for _, lang := range []struct{ code, want string }{{"zh-CN", "这场考试已暂停报名"}, {"en", "closed to new attempts for now"}} {
		e.do(late, "GET", "/lang/"+lang.code, nil)
		_, page, _ := e.do(late, "GET", "/exams/m12", nil)
		if !strings.Contains(page, lang.want) || !strings.Contains(page, note) || strings.Contains(page, `id="exam-start"`) {
			t.Errorf("%s start page of the closed exam:\n%s", lang.code, page)
		}
	}
	code, body, _ := e.do(late, "POST", "/exams/m12/start", url.Values{"csrf_token": {e.csrf(late, "/exams")}})
	if code != http.StatusConflict || !strings.Contains(body, note) {
		t.Errorf("start of a closed exam: %d\n%s", code, body)
	}
	if atts, _ := e.st.Attempts(ctx, "m12", 0); len(atts) != 1 {
		t.Errorf("attempts after the refused start: %d, want the one running", len(atts))
	}

	// The candidate mid-exam goes on: the start page continues the attempt,
	// answers save, and the submit grades it.
	if _, page, _ := e.do(mid, "GET", "/exams/m12", nil); !strings.Contains(page, fmt.Sprintf(`href="/attempt/%d"`, aMid)) || strings.Contains(page, "已暂停报名") {
		t.Errorf("start page for the candidate mid-exam:\n%s", page)
	}
	if again := e.start(mid); again != aMid {
		t.Errorf("start mid-exam gave %d, want the running %d", again, aMid)
	}
	atok := e.csrf(mid, fmt.Sprintf("/attempt/%d", aMid))
	m12, _ := e.srv.exams.Get("m12")
	a, _ := e.st.Attempt(ctx, aMid)
	tasks := e.srv.exams.Tasks(m12, a.Seed)
	theory := tasks[len(tasks)-1]
	form := rightAnswers(t, theory.Questions)
	form.Set("csrf_token", atok)
	if code, body, _ := e.do(mid, "POST", fmt.Sprintf("/attempt/%d/task/%d", aMid, theory.Index), form); code != http.StatusSeeOther {
		t.Errorf("save mid-exam: %d %s", code, body)
	}
	e.do(mid, "POST", fmt.Sprintf("/attempt/%d/submit", aMid), url.Values{"csrf_token": {atok}})
	if a, _ := e.st.Attempt(ctx, aMid); a.State != store.AttemptSubmitted || a.Score < 0.19 {
		t.Errorf("attempt that ran through the switch: %+v", a)
	}

	// Reopened, the exam takes new attempts again.
	if code := switchExam(admin, "m12", url.Values{"disabled": {"false"}}); code != http.StatusSeeOther {
		t.Fatalf("reopen: %d", code)
	}
	if _, list, _ := e.do(late, "GET", "/exams", nil); strings.Contains(list, `data-closed="m12"`) {
		t.Error("the list still marks the reopened exam closed")
	}
	e.start(late)
}
