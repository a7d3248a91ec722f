package server

import (
	"crypto/subtle"
	"io/fs"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/commlab/commlab/server/store"
)

// filesOnly serves the files of fsys and nothing for a directory: no listing
// of /static/ or /course/assets/ (a listing shows what a page does not link).
func filesOnly(fsys fs.FS) http.FileSystem { return filesOnlyFS{http.FS(fsys)} }

type filesOnlyFS struct{ http.FileSystem }

func (f filesOnlyFS) Open(name string) (http.File, error) {
	file, err := f.FileSystem.Open(name)
	if err != nil {
		return nil, err
	}
	if st, err := file.Stat(); err != nil || st.IsDir() {
		file.Close()
		return nil, fs.ErrNotExist
	}
	return file, nil
}

// requireMetrics lets an admin's session, or a scraper sending
// "Authorization: Bearer <Config.MetricsToken>", read /metrics; others get 404,
// as if it did not exist.
func (s *Server) requireMetrics(c *gin.Context) {
	if u := userOf(c); u != nil && u.Role == store.RoleAdmin {
		c.Next()
		return
	}
	tok, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer ")
	if s.cfg.MetricsToken != "" && ok && subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.MetricsToken)) == 1 {
		c.Next()
		return
	}
	s.fail(c, errNotFound)
}
