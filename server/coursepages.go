package server

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/server/store"
)

type indexData struct {
	Course   *course.Course
	Progress map[string]store.Progress
}

func (s *Server) index(c *gin.Context) {
	crs := s.lib.Course()
	s.cachedOrRender(c, crs, "index", "", func() (any, error) {
		prog, err := s.progressOf(c)
		return indexData{Course: crs, Progress: prog}, err
	})
}

type chapterData struct {
	Chapter  *course.Chapter
	Labs     []labLink
	Progress store.Progress
	Result   *course.Result
	Graded   map[string]course.Graded
	Given    map[string]string
	Checked  map[string]bool
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

// labLink is a chapter's lab as its page lists it.
type labLink struct{ ID, Title string }

func (s *Server) chapterData(c *gin.Context, ch *course.Chapter) (chapterData, error) {
	d := chapterData{Chapter: ch}
	for _, id := range ch.Labs {
		l := labLink{ID: id, Title: id}
		if sc, err := s.scenario(id); err == nil {
			l.Title = sc.Title
		}
		d.Labs = append(d.Labs, l)
	}
	if u := userOf(c); u != nil {
		prog, err := s.store.Progress(c.Request.Context(), u.ID)
		if err != nil {
			return d, err
		}
		d.Progress = prog[ch.ID]
	}
	return d, nil
}

func (s *Server) progressOf(c *gin.Context) (map[string]store.Progress, error) {
	u := userOf(c)
	if u == nil {
		return map[string]store.Progress{}, nil
	}
	return s.store.Progress(c.Request.Context(), u.ID)
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
	c.Redirect(http.StatusSeeOther, "/course/"+ch.ID)
}

// submitQuiz grades the posted answers, records the result and shows the chapter with
// every question's verdict and explanation. Answers come as fields "q.<question id>".
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
	ans := course.Answers{}
	given := map[string]string{}
	checked := map[string]bool{}
	for key, vals := range c.Request.PostForm {
		id, ok := strings.CutPrefix(key, "q.")
		if !ok {
			continue
		}
		ans[id] = vals
		for _, v := range vals {
			checked[id+"."+v] = true
		}
		if len(vals) > 0 {
			given[id] = vals[0]
		}
	}
	res := ch.Quiz.Grade(ans)
	if err := s.store.RecordQuiz(c.Request.Context(), userOf(c).ID, ch.ID, res.Score, res.Passed); err != nil {
		s.fail(c, err)
		return
	}
	d, err := s.chapterData(c, ch)
	if err != nil {
		s.fail(c, err)
		return
	}
	d.Result, d.Given, d.Checked = &res, given, checked
	d.Graded = map[string]course.Graded{}
	for _, g := range res.Answers {
		d.Graded[g.ID] = g
	}
	s.renderPage(c, http.StatusOK, "chapter", ch.Title, d)
}

type progressData struct {
	Course                       *course.Course
	Progress                     map[string]store.Progress
	Read, Written, Quizzes, Labs int
}

func (s *Server) progress(c *gin.Context) {
	crs := s.lib.Course()
	prog, err := s.progressOf(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	d := progressData{Course: crs, Progress: prog}
	for _, ch := range crs.Chapters() {
		if ch.Written() {
			d.Written++
		}
		p := prog[ch.ID]
		d.Read += b2i(p.Read)
		d.Quizzes += b2i(p.QuizPassed)
		d.Labs += b2i(p.LabPassed)
	}
	s.renderPage(c, http.StatusOK, "progress", "", d)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
