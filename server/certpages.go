package server

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/commlab/commlab/cert"
	"github.com/commlab/commlab/server/store"
	"github.com/commlab/commlab/web"
)

// authority issues certificates with the installation's key and answers for
// the ones it issued.
type authority struct {
	key   ed25519.PrivateKey
	pub   ed25519.PublicKey
	certs store.Certs
}

func newAuthority(key ed25519.PrivateKey, st store.Store) *authority {
	certs, ok := st.(store.Certs)
	if key == nil || !ok {
		return nil
	}
	return &authority{key: key, pub: key.Public().(ed25519.PublicKey), certs: certs}
}

// issue signs and records a certificate for a passed attempt.
func (a *authority) issue(ctx context.Context, u *store.User, attemptID int64, examID, exam, band string) (*cert.Certificate, error) {
	c := cert.Certificate{ID: cert.NewID(), Name: u.Name, ExamID: examID, Exam: exam, Issued: cert.Date(time.Now()), Band: band}
	doc, err := cert.Sign(a.key, c)
	if err != nil {
		return nil, err
	}
	if err := a.certs.PutCertificate(ctx, &store.CertRecord{ID: c.ID, UserID: u.ID, AttemptID: attemptID, Document: doc}); err != nil {
		return nil, err
	}
	return &c, nil
}

// revocations is the signed-off list as the store has it now.
func (a *authority) revocations(ctx context.Context) (*cert.Revocations, error) {
	recs, err := a.certs.Revoked(ctx)
	if err != nil {
		return nil, err
	}
	l := &cert.Revocations{Issued: time.Now().UTC().Format(time.RFC3339), Revoked: []cert.Revocation{}}
	for _, r := range recs {
		l.Revoked = append(l.Revoked, cert.Revocation{ID: r.ID, At: r.RevokedAt.Format(time.RFC3339), Reason: r.Reason})
	}
	return l, nil
}

// Verdict is the answer of every online verification, page and JSON alike.
type Verdict struct {
	Valid       bool              `json:"valid"`
	Reason      string            `json:"reason,omitempty"`  // unknown, malformed, altered, wrong-key, bad-signature, revoked
	Message     string            `json:"message,omitempty"` // the reason in words
	Certificate *cert.Certificate `json:"certificate,omitempty"`
	RevokedAt   string            `json:"revoked_at,omitempty"`
	Revocation  string            `json:"revocation_reason,omitempty"`
	Key         string            `json:"key"`
	KeyURL      string            `json:"key_url"`
}

var reasonCodes = []struct {
	err  error
	code string
}{
	{cert.ErrUnknown, "unknown"}, {cert.ErrMalformed, "malformed"}, {cert.ErrNotCanonical, "altered"},
	{cert.ErrWrongKey, "wrong-key"}, {cert.ErrBadSignature, "bad-signature"}, {cert.ErrRevoked, "revoked"},
}

// The catalogue keys of a failure reason and of a score band
// (TestCertCatalogue checks that each has one).
func reasonKey(code string) string { return "cert.reason." + code }
func bandKey(band string) string   { return "cert.band." + band }

// verify checks a document: its signature, that this server issued exactly
// these bytes, and that it is not revoked.
func (a *authority) verify(ctx context.Context, doc []byte, lang string) (Verdict, error) {
	v := Verdict{Key: cert.KeyID(a.pub), KeyURL: "/cert/key.pem"}
	revoked, err := a.revocations(ctx)
	if err != nil {
		return v, err
	}
	c, verr := cert.Verify(doc, a.pub, revoked)
	if c != nil {
		v.Certificate = c
		rec, err := a.certs.Certificate(ctx, c.ID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			verr = cert.ErrUnknown
		case err != nil:
			return v, err
		case strings.TrimSuffix(string(rec.Document), "\n") != strings.TrimSuffix(string(doc), "\n"):
			verr = cert.ErrNotCanonical
		case rec.Revoked:
			v.RevokedAt, v.Revocation = rec.RevokedAt.Format(time.RFC3339), rec.Reason
			verr = cert.ErrRevoked
		}
	}
	if verr == nil {
		v.Valid = true
		return v, nil
	}
	v.Reason = "malformed"
	for _, rc := range reasonCodes {
		if errors.Is(verr, rc.err) {
			v.Reason = rc.code
			break
		}
	}
	v.Message = web.T(lang, reasonKey(v.Reason))
	return v, nil
}

// verifyID verifies the certificate stored under id.
func (a *authority) verifyID(ctx context.Context, id, lang string) (Verdict, []byte, error) {
	rec, err := a.certs.Certificate(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return Verdict{Reason: "unknown", Message: web.T(lang, reasonKey("unknown")), Key: cert.KeyID(a.pub), KeyURL: "/cert/key.pem"}, nil, nil
	}
	if err != nil {
		return Verdict{}, nil, err
	}
	v, err := a.verify(ctx, rec.Document, lang)
	return v, rec.Document, err
}

func (s *Server) certRoutes(r *gin.Engine) {
	r.GET("/cert/key.pem", s.needCA, s.certKey)
	r.GET("/cert/revocations.json", s.needCA, s.certRevocations)
	r.GET("/verify", s.needCA, s.verifyPage)
	r.GET("/verify/:id", s.needCA, s.verifyPage)
	r.GET("/verify/:id/certificate.json", s.needCA, s.certDocument)
	r.GET("/verify/:id/certificate.pdf", s.needCA, s.certPDF)
	r.GET("/api/verify", s.needCA, s.verifyJSON)
	r.GET("/api/verify/:id", s.needCA, s.verifyJSON)
	r.POST("/admin/certs/:id/revoke", s.needCA, s.requireRole(store.RoleAdmin), s.revokeCert)
}

func (s *Server) needCA(c *gin.Context) {
	if s.ca == nil {
		s.fail(c, httpError{http.StatusServiceUnavailable, "cert.off", "no signing key"})
		return
	}
	c.Next()
}

// requireRole lets through users with role r or a more privileged one.
func (s *Server) requireRole(r store.Role) gin.HandlerFunc {
	rank := map[store.Role]int{store.RoleLearner: 0, store.RoleInstructor: 1, store.RoleAdmin: 2}
	return func(c *gin.Context) {
		u := userOf(c)
		if u == nil {
			s.requireUser(c)
			return
		}
		if rank[u.Role] < rank[r] {
			s.fail(c, httpError{http.StatusForbidden, "exam.forbidden", string(r)})
			return
		}
		c.Next()
	}
}

func (s *Server) certKey(c *gin.Context) {
	c.Header("Cache-Control", "public, max-age=3600")
	c.Data(http.StatusOK, "application/x-pem-file", cert.PublicKeyPEM(s.ca.pub))
}

func (s *Server) certRevocations(c *gin.Context) {
	l, err := s.ca.revocations(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-cache")
	c.Data(http.StatusOK, "application/json", cert.SignRevocations(s.ca.key, *l))
}

func (s *Server) certDocument(c *gin.Context) {
	rec, err := s.ca.certs.Certificate(c.Request.Context(), c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.json"`, rec.ID))
	c.Data(http.StatusOK, "application/json", rec.Document)
}

// verdictFor answers for the id in the path, or for the document in ?doc=.
func (s *Server) verdictFor(c *gin.Context) (v Verdict, asked bool, err error) {
	lang := langOf(c)
	if id := c.Param("id"); id != "" {
		v, _, err := s.ca.verifyID(c.Request.Context(), id, lang)
		return v, true, err
	}
	if doc := c.Query("doc"); strings.TrimSpace(doc) != "" {
		v, err := s.ca.verify(c.Request.Context(), []byte(strings.ReplaceAll(doc, "\r\n", "\n")), lang)
		return v, true, err
	}
	return Verdict{}, false, nil
}

func (s *Server) verifyJSON(c *gin.Context) {
	v, asked, err := s.verdictFor(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	if !asked {
		s.fail(c, httpError{http.StatusBadRequest, "cert.ask", "no id or doc"})
		return
	}
	c.JSON(http.StatusOK, v)
}

// verifyData is what web/templates/verify.html shows.
type verifyData struct {
	Asked   bool
	Verdict Verdict
	ID      string
	Doc     string
	Band    string
	Admin   bool
}

func (s *Server) verifyPage(c *gin.Context) {
	v, asked, err := s.verdictFor(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	lang := langOf(c)
	d := verifyData{Asked: asked, Verdict: v, ID: c.Param("id"), Doc: c.Query("doc")}
	if v.Certificate != nil {
		d.Band = web.T(lang, bandKey(v.Certificate.Band))
	}
	if u := userOf(c); u != nil && u.Role == store.RoleAdmin {
		d.Admin = true
	}
	status := http.StatusOK
	if asked && v.Reason == "unknown" {
		status = http.StatusNotFound
	}
	s.renderPage(c, status, "verify", web.T(lang, "cert.verify.title"), d)
}

func (s *Server) revokeCert(c *gin.Context) {
	id := c.Param("id")
	err := s.ca.certs.RevokeCertificate(c.Request.Context(), id, userOf(c).ID, c.PostForm("reason"))
	if errors.Is(err, store.ErrInvalid) {
		s.fail(c, httpError{http.StatusBadRequest, "cert.revoke.noreason", id})
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	s.log.Info("certificate revoked", "id", id, "by", userOf(c).ID)
	c.Redirect(http.StatusSeeOther, "/verify/"+id)
}
