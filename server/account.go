package server

import (
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/commlab/commlab/server/auth"
	"github.com/commlab/commlab/server/store"
	"github.com/commlab/commlab/web"
)

type authForm struct {
	Error string
	Email string
	Name  string
	Next  string
}

func (s *Server) loginPage(c *gin.Context) {
	s.ensureAnon(c)
	s.renderPage(c, http.StatusOK, "login", web.T(langOf(c), "auth.login"), authForm{Next: safeNext(c.Query("next"))})
}

func (s *Server) registerPage(c *gin.Context) {
	s.ensureAnon(c)
	s.renderPage(c, http.StatusOK, "register", web.T(langOf(c), "auth.register"), authForm{})
}

// allowAttempt applies the per-IP limit on login and registration.
func (s *Server) allowAttempt(c *gin.Context) bool {
	ok, retry := s.limiter.Allow(c.ClientIP())
	if !ok {
		secs := int(math.Ceil(retry.Seconds()))
		c.Header("Retry-After", strconv.Itoa(secs))
		s.fail(c, httpError{http.StatusTooManyRequests, "err.ratelimit", strconv.Itoa(secs)})
	}
	return ok
}

func (s *Server) login(c *gin.Context) {
	if !s.allowAttempt(c) {
		return
	}
	lang := langOf(c)
	form := authForm{Email: c.PostForm("email"), Next: safeNext(c.PostForm("next"))}
	password := c.PostForm("password")
	var u *store.User
	if email, err := auth.NormalizeEmail(form.Email); err == nil {
		u, err = s.store.UserByEmail(c.Request.Context(), email)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			s.fail(c, err)
			return
		}
	}
	ok := false
	if u != nil {
		var err error
		if ok, err = auth.VerifyPassword(u.PasswordHash, password); err != nil {
			s.log.Error("stored password hash unreadable", "user", u.ID, "err", err)
		}
	} else {
		auth.VerifyAbsent(password) // same work whether or not the account exists
	}
	if !ok {
		form.Error = web.T(lang, "err.login")
		s.renderPage(c, http.StatusUnauthorized, "login", web.T(lang, "auth.login"), form)
		return
	}
	s.startSession(c, u, form.Next)
}

func (s *Server) register(c *gin.Context) {
	if !s.allowAttempt(c) {
		return
	}
	ctx := c.Request.Context()
	lang := langOf(c)
	form := authForm{Email: c.PostForm("email"), Name: c.PostForm("name")}
	again := func(status int, msg string) {
		form.Error = msg
		s.renderPage(c, status, "register", web.T(lang, "auth.register"), form)
	}
	email, err := auth.NormalizeEmail(form.Email)
	if err != nil {
		again(http.StatusBadRequest, err.Error())
		return
	}
	name, err := auth.ValidateName(form.Name)
	if err != nil {
		again(http.StatusBadRequest, err.Error())
		return
	}
	password := c.PostForm("password")
	if err := auth.ValidatePassword(password, email, name); errors.Is(err, auth.ErrWeakPassword) {
		again(http.StatusBadRequest, web.T(lang, "sec.weakpassword"))
		return
	} else if err != nil {
		again(http.StatusBadRequest, err.Error())
		return
	}
	hash, err := auth.HashPassword(password, email, name)
	if err != nil {
		s.fail(c, err)
		return
	}
	// The first account administers the installation.
	role := store.RoleLearner
	if n, err := s.store.CountUsers(ctx); err != nil {
		s.fail(c, err)
		return
	} else if n == 0 {
		role = store.RoleAdmin
	}
	u := &store.User{Email: email, Name: name, Role: role, PasswordHash: hash}
	if err := s.store.CreateUser(ctx, u); err != nil {
		if errors.Is(err, store.ErrExists) {
			again(http.StatusConflict, web.T(lang, "err.exists"))
			return
		}
		s.fail(c, err)
		return
	}
	s.log.Info("account created", "user", u.ID, "role", u.Role)
	s.startSession(c, u, "/course")
}

func (s *Server) startSession(c *gin.Context, u *store.User, next string) {
	tok, err := s.store.CreateSession(c.Request.Context(), u.ID, s.cfg.SessionTTL)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.setCookie(c, sessionCookie, tok, int(s.cfg.SessionTTL.Seconds()))
	s.clearCookie(c, anonCookie)
	c.Redirect(http.StatusSeeOther, next)
}

func (s *Server) logout(c *gin.Context) {
	if tok, err := c.Cookie(sessionCookie); err == nil && tok != "" {
		if err := s.store.DeleteSession(c.Request.Context(), tok); err != nil && !errors.Is(err, store.ErrNotFound) {
			s.fail(c, err)
			return
		}
	}
	s.clearCookie(c, sessionCookie)
	c.Redirect(http.StatusSeeOther, "/course")
}
