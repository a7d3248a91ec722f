package server

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/commlab/commlab/server/store"
	"github.com/commlab/commlab/web"
)

// Cookie and context keys.
const (
	sessionCookie = "cl_session"
	anonCookie    = "cl_anon"
	langCookie    = "lang"
	ctxUser       = "user"
	ctxSessionID  = "sid"
)

func (s *Server) recoverer(c *gin.Context) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v) // a forwarded answer cut short (httputil.ReverseProxy): net/http drops the connection quietly
			}
			s.log.Error("panic", "path", c.Request.URL.Path, "panic", v, "stack", string(debug.Stack()))
			s.fail(c, fmt.Errorf("panic: %v", v))
		}
	}()
	c.Next()
}

// csp allows only what this server serves.
const csp = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// securityHeaders forbids framing, sniffing and any script or style not served by us.
func securityHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	c.Next()
}

// uploadLimits are the routes that take uploads larger than a form and
// bound what they read themselves.
var uploadLimits = map[string]int64{"/explain": explainBodyLimit}

// bodyLimit is the most a request to this route may send.
func (s *Server) bodyLimit(c *gin.Context) int64 {
	if n, ok := uploadLimits[c.FullPath()]; ok && n > s.cfg.MaxFormBytes {
		return n
	}
	return s.cfg.MaxFormBytes
}

// limitBody bounds request bodies and turns oversized or malformed forms into 4xx
// pages before any handler runs.
func (s *Server) limitBody(c *gin.Context) {
	if c.Request.Body == nil || c.Request.Method == http.MethodGet || c.Request.Method == http.MethodHead {
		c.Next()
		return
	}
	limit := s.bodyLimit(c)
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, limit)
	if ct := c.ContentType(); ct == "application/x-www-form-urlencoded" || ct == "multipart/form-data" {
		var err error
		if ct == "multipart/form-data" {
			err = c.Request.ParseMultipartForm(limit)
		} else {
			err = c.Request.ParseForm()
		}
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				s.fail(c, httpError{http.StatusRequestEntityTooLarge, "err.toolarge", strconv.FormatInt(limit>>10, 10)})
				return
			}
			s.fail(c, httpError{http.StatusBadRequest, "err.badform", err.Error()})
			return
		}
	}
	c.Next()
}

// loadSession puts the logged-in user (if any) and the CSRF binding id in the context.
func (s *Server) loadSession(c *gin.Context) {
	if tok, err := c.Cookie(sessionCookie); err == nil && tok != "" {
		u, err := s.store.SessionUser(c.Request.Context(), tok)
		switch {
		case err == nil:
			c.Set(ctxUser, u)
			c.Set(ctxSessionID, "s:"+tok)
		case errors.Is(err, store.ErrNotFound):
			s.clearCookie(c, sessionCookie)
		default:
			s.fail(c, err)
			return
		}
	}
	if _, ok := c.Get(ctxSessionID); !ok {
		if id, err := c.Cookie(anonCookie); err == nil && id != "" {
			c.Set(ctxSessionID, "a:"+id)
		}
	}
	c.Next()
}

// ensureAnon gives a visitor without a session an anonymous id, so forms shown before
// login (login, register) carry a CSRF token bound to this browser.
func (s *Server) ensureAnon(c *gin.Context) {
	if _, ok := c.Get(ctxSessionID); ok {
		return
	}
	id := randomToken(16)
	s.setCookie(c, anonCookie, id, 0)
	c.Set(ctxSessionID, "a:"+id)
}

func csrfBinding(c *gin.Context) string { return c.GetString(ctxSessionID) }

func (s *Server) requireUser(c *gin.Context) {
	if userOf(c) == nil {
		if c.Request.Method == http.MethodGet {
			c.Redirect(http.StatusFound, "/login?next="+c.Request.URL.Path)
			c.Abort()
			return
		}
		s.fail(c, errNeedLogin)
		return
	}
	c.Next()
}

func userOf(c *gin.Context) *store.User {
	if v, ok := c.Get(ctxUser); ok {
		return v.(*store.User)
	}
	return nil
}

func langOf(c *gin.Context) string {
	if l, err := c.Cookie(langCookie); err == nil && web.HasLanguage(l) {
		return l
	}
	return web.Languages[0]
}

func (s *Server) setLang(c *gin.Context) {
	lang := c.Param("lang")
	if !web.HasLanguage(lang) {
		s.fail(c, errNotFound)
		return
	}
	s.setCookie(c, langCookie, lang, 365*24*3600)
	c.Redirect(http.StatusFound, safeNext(c.Query("next")))
}

func (s *Server) setCookie(c *gin.Context, name, value string, maxAge int) {
	http.SetCookie(c.Writer, &http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: s.cfg.SecureCookies, SameSite: http.SameSiteLaxMode,
	})
}

func (s *Server) clearCookie(c *gin.Context, name string) { s.setCookie(c, name, "", -1) }

// safeNext keeps redirects on this site: only a local absolute path ("/x", not
// "//host" or "/\\host"). Browsers drop tabs and newlines from a URL and read '\\'
// as '/', so any control character or backslash anywhere is refused too.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsFunc(next, func(r rune) bool {
		return r < 0x20 || r == 0x7f || r == '\\' || unicode.IsControl(r) || r == utf8.RuneError
	}) {
		return "/course"
	}
	if u, err := url.Parse(next); err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/course"
	}
	return next
}

func randomToken(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
