package server

import (
	"io/fs"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/commlab/commlab/web"
)

func (s *Server) routes() *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	// forwardLab goes before limitBody and csrf: a forwarded body is read by its lab's replica.
	r.Use(s.recoverer, s.metrics.middleware, securityHeaders, s.loadSession, s.forwardLab, s.limitBody)
	r.Use(s.csrf.Middleware(csrfBinding))
	r.NoRoute(func(c *gin.Context) { s.fail(c, errNotFound) })
	r.NoMethod(func(c *gin.Context) {
		s.fail(c, httpError{http.StatusMethodNotAllowed, "err.badform", "method not allowed"})
	})

	r.GET("/healthz", s.healthz)
	r.GET("/metrics", s.requireMetrics, gin.WrapH(s.metrics.handler))
	r.GET("/static/*path", s.static)
	r.HEAD("/static/*path", s.static)
	r.GET("/static-gen/highlight.css", s.highlightCSS)
	r.GET("/", func(c *gin.Context) { c.Redirect(http.StatusFound, "/course") })
	r.GET("/lang/:lang", s.setLang)

	r.GET("/course", s.index)
	r.GET("/course/:id", s.chapter)
	r.GET("/course/assets/*path", s.asset)
	r.POST("/course/:id/read", s.requireUser, s.markRead)
	r.POST("/course/:id/quiz", s.requireUser, s.submitQuiz)
	r.GET("/course/:id/quiz", s.requireUser, s.quizResult)
	r.GET("/progress", s.requireUser, s.progress)

	if err := web.BundleErr(); err != nil {
		// A lab page without its script would show a dead terminal; say why instead.
		s.log.Error("lab pages are off", "err", err)
		noBundle := func(c *gin.Context) { s.fail(c, httpError{http.StatusServiceUnavailable, "err.nobundle", err.Error()}) }
		r.Any("/labs/*rest", noBundle)
		r.Any("/lab/*rest", noBundle)
	} else {
		s.labRoutes(r)
	}
	s.explainRoutes(r)
	s.certRoutes(r)
	s.examRoutes(r)
	s.workshopRoutes(r)

	r.GET("/login", s.anonOnly, s.loginPage)
	r.POST("/login", s.login)
	r.GET("/register", s.anonOnly, s.registerPage)
	r.POST("/register", s.register)
	r.POST("/logout", s.logout)
	return r
}

func (s *Server) healthz(c *gin.Context) {
	if err := s.store.Ping(c.Request.Context()); err != nil {
		s.log.Error("healthz: store", "err", err)
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unhealthy", "store": err.Error()})
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ok", "chapters": len(s.lib.Course().Chapters())})
}

// static serves the embedded files (no directory listings: a directory is a 404).
func (s *Server) static(c *gin.Context) {
	if !web.ServeStatic(c.Writer, c.Request, c.Param("path")) {
		s.fail(c, errNotFound)
	}
}

func (s *Server) highlightCSS(c *gin.Context) {
	c.Header("Cache-Control", "public, max-age=3600")
	c.Data(http.StatusOK, "text/css; charset=utf-8", s.hlCSS)
}

func (s *Server) asset(c *gin.Context) {
	name := c.Param("path")[1:]
	if !fs.ValidPath(name) {
		s.fail(c, errNotFound)
		return
	}
	c.Header("Cache-Control", "public, max-age=3600")
	c.FileFromFS(name, filesOnly(s.lib.Course().Assets))
}
