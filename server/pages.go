package server

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/server/store"
)

// pageData is what every page template receives.
type pageData struct {
	Lang  string
	Title string
	Path  string
	CSRF  string
	User  *store.User
	Data  any
}

// renderPage executes a page into a buffer first, so a template error becomes a clean
// 500 page instead of half a page.
func (s *Server) renderPage(c *gin.Context, status int, page, title string, data any) {
	body, err := s.execute(c, page, title, data)
	if err != nil {
		s.log.Error("render", "page", page, "err", err)
		c.Data(http.StatusInternalServerError, "text/plain; charset=utf-8", []byte("internal error rendering "+page))
		return
	}
	c.Data(status, "text/html; charset=utf-8", body)
}

func (s *Server) execute(c *gin.Context, page, title string, data any) ([]byte, error) {
	t, ok := s.pages[page]
	if !ok {
		return nil, fmt.Errorf("no page template %q", page)
	}
	pd := pageData{Lang: langOf(c), Title: title, Path: c.Request.URL.Path, User: userOf(c), Data: data}
	if sid := csrfBinding(c); sid != "" {
		pd.CSRF = s.csrf.Token(sid)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", pd); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// pageCache keeps the finished HTML of pages that are the same for every anonymous
// visitor (course index and chapters, per language), so the common case is a map lookup.
// It empties itself when the library swaps in a reloaded course.
type pageCache struct {
	mu     sync.RWMutex
	course *course.Course
	pages  map[string][]byte
}

func (pc *pageCache) get(c *course.Course, key string, build func() ([]byte, error)) ([]byte, error) {
	pc.mu.RLock()
	if pc.course == c {
		if b, ok := pc.pages[key]; ok {
			pc.mu.RUnlock()
			return b, nil
		}
	}
	pc.mu.RUnlock()
	b, err := build()
	if err != nil {
		return nil, err
	}
	pc.mu.Lock()
	if pc.course != c {
		pc.course, pc.pages = c, map[string][]byte{}
	}
	pc.pages[key] = b
	pc.mu.Unlock()
	return b, nil
}

// anonOnly sends a logged-in visitor of the login or register form on to where the
// form would have taken them: the page named by next, or the course index.
func (s *Server) anonOnly(c *gin.Context) {
	if userOf(c) != nil {
		c.Redirect(http.StatusFound, safeNext(c.Query("next")))
		c.Abort()
		return
	}
	c.Next()
}
