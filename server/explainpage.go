package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/commlab/commlab/nccl"
	"github.com/commlab/commlab/web"
)

// explainMaxBytes caps what the explain page diagnoses, pasted or uploaded.
// The request itself may carry both (explainBodyLimit), so an oversized
// file is answered on the page rather than cut off by the body limit.
const (
	explainMaxBytes  = 2 << 20
	explainBodyLimit = 2*explainMaxBytes + 64<<10
)

func (s *Server) explainRoutes(r *gin.Engine) {
	r.GET("/explain", s.requireUser, s.explainPage)
	r.POST("/explain", s.requireUser, s.explainSubmit)
}

// explainData is what web/templates/explain.html shows.
type explainData struct {
	Log      string
	Error    string
	MaxKiB   int
	Verdict  *nccl.Verdict
	Chapters []chapterLink
}

type chapterLink struct{ ID, Title string }

func (s *Server) explainPage(c *gin.Context) {
	s.renderPage(c, http.StatusOK, "explain", web.T(langOf(c), "explain.title"), explainData{MaxKiB: explainMaxBytes >> 10})
}

// explainSubmit diagnoses the uploaded file, or the pasted text when no
// file was chosen.
func (s *Server) explainSubmit(c *gin.Context) {
	lang := langOf(c)
	d := explainData{MaxKiB: explainMaxBytes >> 10, Log: c.PostForm("log")}
	data, status, msg := explainInput(c, d.Log, lang)
	if msg != "" {
		d.Error = msg
		if len(d.Log) > explainMaxBytes {
			d.Log = ""
		}
		s.renderPage(c, status, "explain", web.T(lang, "explain.title"), d)
		return
	}
	d.Verdict = nccl.Diagnose(data)
	crs := s.lib.Course()
	for _, id := range d.Verdict.Symptom.Chapters {
		if ch, ok := crs.Chapter(id); ok && ch.Written() {
			d.Chapters = append(d.Chapters, chapterLink{ch.ID, ch.Title})
		}
	}
	s.renderPage(c, http.StatusOK, "explain", web.T(lang, "explain.title"), d)
}

// explainInput returns the bytes to diagnose, or a status and a message
// saying what is wrong with the request.
func explainInput(c *gin.Context, pasted, lang string) ([]byte, int, string) {
	tooBig := func(n int64) (int, string) {
		return http.StatusRequestEntityTooLarge, fmt.Sprintf(web.T(lang, "explain.toolarge"), n>>10, explainMaxBytes>>10)
	}
	if fh, err := c.FormFile("file"); err == nil && fh.Size > 0 {
		if fh.Size > explainMaxBytes {
			st, msg := tooBig(fh.Size)
			return nil, st, msg
		}
		f, err := fh.Open()
		if err != nil {
			return nil, http.StatusBadRequest, web.T(lang, "explain.unreadable")
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, explainMaxBytes))
		if err != nil {
			return nil, http.StatusBadRequest, web.T(lang, "explain.unreadable")
		}
		return data, 0, ""
	}
	if len(pasted) > explainMaxBytes {
		st, msg := tooBig(int64(len(pasted)))
		return nil, st, msg
	}
	if strings.TrimSpace(pasted) == "" {
		return nil, http.StatusBadRequest, web.T(lang, "explain.empty")
	}
	return []byte(pasted), 0, ""
}
