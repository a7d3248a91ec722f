package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/commlab/commlab/labs"
	"github.com/commlab/commlab/server/store"
	"github.com/commlab/commlab/web"
)

// httpError is an error with the status and the UI message (a web.T key) the learner sees.
type httpError struct {
	status int
	key    string // message key for web.T
	detail string // for logs and for %s in the message
}

func (e httpError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.key, e.detail) }

// message is what the learner reads, in lang.
func (e httpError) message(lang string) string {
	msg := web.T(lang, e.key)
	if strings.Contains(msg, "%") {
		msg = fmt.Sprintf(msg, e.detail)
	}
	return msg
}

var (
	errNotFound   = httpError{http.StatusNotFound, "err.notfound", "no such page"}
	errNotWritten = httpError{http.StatusNotFound, "err.wip", "chapter not written yet"}
	errNeedLogin  = httpError{http.StatusUnauthorized, "err.needlogin", "login required"}
)

// fail maps any error to a status and a page (or JSON for API clients). It is the one
// place where errors become HTTP: the learner sees what to do, the log keeps the detail.
func (s *Server) fail(c *gin.Context, err error) {
	var he httpError
	switch {
	case errors.As(err, &he):
	case errors.Is(err, store.ErrNotFound):
		he = errNotFound
	case errors.Is(err, labs.ErrNeedsLinux):
		he = httpError{http.StatusServiceUnavailable, "err.needslinux", err.Error()}
	default:
		s.log.Error("request failed", "method", c.Request.Method, "path", c.Request.URL.Path, "err", err)
		he = httpError{http.StatusInternalServerError, "err.internal", ""}
	}
	lang := langOf(c)
	msg := he.message(lang)
	if wantsJSON(c) {
		c.AbortWithStatusJSON(he.status, gin.H{"error": msg})
		return
	}
	s.renderPage(c, he.status, "error", web.T(lang, "error.title"), gin.H{"Status": he.status, "Message": msg})
	c.Abort()
}

func wantsJSON(c *gin.Context) bool {
	return strings.HasPrefix(c.Request.URL.Path, "/api/") || strings.Contains(c.GetHeader("Accept"), "application/json")
}
