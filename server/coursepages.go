package server

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/server/store"
	"github.com/commlab/commlab/web"
)

type indexData struct {
	Course   *course.Course
	Progress map[string]chapterStatus
	Continue *continueAt // nil for visitors
}

func (s *Server) index(c *gin.Context) {
	crs := s.lib.Course()
	s.cachedOrRender(c, crs, "index", "", func() (any, error) {
		prog, err := s.progressOf(c)
		if err != nil {
			return nil, err
		}
		d := indexData{Course: crs, Progress: prog}
		if userOf(c) != nil {
			d.Continue = continueFrom(crs, prog)
		}
		return d, nil
	})
}

// chapterData is what the chapter template shows; with ResultOnly it is the quiz
// result page: the quiz with its verdicts and the next steps, without the chapter text.
type chapterData struct {
	Chapter    *course.Chapter
	Labs       []labLink
	Status     chapterStatus
	Quiz       *quizView // nil when the chapter has no quiz
	ResultOnly bool
}

func (s *Server) chapter(c *gin.Context) {
	crs := s.lib.Course()
	ch, err := writtenChapter(crs, c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	s.cachedOrRender(c, crs, "chapter", ch.Title, func() (any, error) {
		return s.chapterData(c, ch)
	})
}

// cachedOrRender serves anonymous visitors from the page cache and renders per user
// otherwise (their pages carry progress marks and CSRF tokens).
func (s *Server) cachedOrRender(c *gin.Context, crs *course.Course, page, title string, data func() (any, error)) {
	if userOf(c) != nil {
		d, err := data()
		if err != nil {
			s.fail(c, err)
			return
		}
		s.renderPage(c, http.StatusOK, page, title, d)
		return
	}
	key := page + "|" + c.Param("id") + "|" + langOf(c)
	body, err := s.cache.get(crs, key, func() ([]byte, error) {
		d, err := data()
		if err != nil {
			return nil, err
		}
		return s.execute(c, page, title, d)
	})
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Data(http.StatusOK, "text/html; charset=utf-8", body)
}

func writtenChapter(crs *course.Course, id string) (*course.Chapter, error) {
	ch, ok := crs.Chapter(id)
	if !ok {
		return nil, errNotFound
	}
	if !ch.Written() {
		return nil, errNotWritten
	}
	return ch, nil
}

// labLink is a chapter's lab as its page lists it, with the learner's record in it.
type labLink struct {
	ID, Title string
	store.LabProgress
}

func (s *Server) chapterData(c *gin.Context, ch *course.Chapter) (chapterData, error) {
	d := chapterData{Chapter: ch}
	if u := userOf(c); u != nil {
		prog, err := s.store.Progress(c.Request.Context(), u.ID)
		if err != nil {
			return d, err
		}
		d.Status = statusOf(ch, prog[ch.ID])
	}
	d.Labs = s.labLinks(ch, d.Status.Progress)
	if ch.Quiz != nil {
		d.Quiz = newQuizView(ch.Quiz, d.Status.QuizAnswers)
	}
	return d, nil
}

func (s *Server) labLinks(ch *course.Chapter, p store.Progress) []labLink {
	var out []labLink
	for _, id := range ch.Labs {
		l := labLink{ID: id, Title: id, LabProgress: p.Labs[id]}
		if sc, err := s.scenario(id); err == nil {
			l.Title = sc.Title
		}
		out = append(out, l)
	}
	return out
}

func (s *Server) progressOf(c *gin.Context) (map[string]chapterStatus, error) {
	out := map[string]chapterStatus{}
	u := userOf(c)
	if u == nil {
		return out, nil
	}
	prog, err := s.store.Progress(c.Request.Context(), u.ID)
	if err != nil {
		return nil, err
	}
	for _, ch := range s.lib.Course().Chapters() {
		out[ch.ID] = statusOf(ch, prog[ch.ID])
	}
	return out, nil
}

func (s *Server) markRead(c *gin.Context) {
	ch, err := writtenChapter(s.lib.Course(), c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	if err := s.store.MarkRead(c.Request.Context(), userOf(c).ID, ch.ID); err != nil {
		s.fail(c, err)
		return
	}
	// Back to the control the learner pressed, at the end of the chapter.
	c.Redirect(http.StatusSeeOther, "/course/"+ch.ID+"#done")
}

// submitQuiz grades the posted answers, records them and redirects to the result
// page, so a reload shows the result instead of posting again. Answers come as
// fields "q.<question id>".
func (s *Server) submitQuiz(c *gin.Context) {
	ch, err := writtenChapter(s.lib.Course(), c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	if ch.Quiz == nil {
		s.fail(c, errNotFound)
		return
	}
	ans := store.Answers{}
	for _, q := range ch.Quiz.Questions {
		if vals, ok := c.Request.PostForm["q."+q.ID]; ok {
			ans[q.ID] = vals
		}
	}
	res := ch.Quiz.Grade(course.Answers(ans))
	if err := s.store.RecordQuiz(c.Request.Context(), userOf(c).ID, ch.ID, res.Score, res.Passed, ans); err != nil {
		s.fail(c, err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/course/"+ch.ID+"/quiz")
}

// quizResult shows the learner's latest quiz submission graded, with the next steps.
func (s *Server) quizResult(c *gin.Context) {
	ch, err := writtenChapter(s.lib.Course(), c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	if ch.Quiz == nil {
		s.fail(c, errNotFound)
		return
	}
	d, err := s.chapterData(c, ch)
	if err != nil {
		s.fail(c, err)
		return
	}
	if d.Quiz.Result == nil { // nothing submitted yet: the quiz is on the chapter page
		c.Redirect(http.StatusFound, "/course/"+ch.ID+"#quiz")
		return
	}
	d.ResultOnly = true
	s.renderPage(c, http.StatusOK, "chapter", web.T(langOf(c), "quiz.result")+" · "+ch.Title, d)
}

type progressData struct {
	Course                                           *course.Course
	Progress                                         map[string]chapterStatus
	Labs                                             map[string][]labLink // by chapter ID
	Studied, Written, Quizzes, LabsPassed, LabsTotal int
}

func (s *Server) progress(c *gin.Context) {
	crs := s.lib.Course()
	prog, err := s.progressOf(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	d := progressData{Course: crs, Progress: prog, Labs: map[string][]labLink{}}
	for _, ch := range crs.Chapters() {
		if !ch.Written() {
			continue
		}
		d.Written++
		st := prog[ch.ID]
		d.Studied += b2i(st.Studied)
		d.Quizzes += b2i(st.QuizPassed)
		d.LabsPassed += st.LabsPassed
		d.LabsTotal += st.LabsTotal
		d.Labs[ch.ID] = s.labLinks(ch, st.Progress)
	}
	s.renderPage(c, http.StatusOK, "progress", web.T(langOf(c), "progress.title"), d)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
