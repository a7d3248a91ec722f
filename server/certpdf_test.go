package server

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/commlab/commlab/cert"
	"github.com/commlab/commlab/server/store"
)

// pdfText is the text pdftotext (poppler-utils) reads from a PDF. It reads
// text even where the font has no glyph for it, so the fonts pdffonts lists
// are checked as well: the CJK font alone prints Latin text as empty boxes.
func pdfText(t *testing.T, pdf string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "cert.pdf")
	if err := os.WriteFile(f, []byte(pdf), 0o600); err != nil {
		t.Fatal(err)
	}
	fonts, err := exec.Command("pdffonts", f).CombinedOutput()
	if err != nil {
		t.Fatalf("pdffonts: %v\n%s", err, fonts)
	}
	for _, want := range []string{"utf8latin", "utf8cjk"} {
		if !strings.Contains(string(fonts), want) {
			t.Errorf("font %s not embedded:\n%s", want, fonts)
		}
	}
	out, err := exec.Command("pdftotext", "-enc", "UTF-8", f, "-").CombinedOutput()
	if err != nil {
		t.Fatalf("pdftotext: %v\n%s", err, out)
	}
	return string(out)
}

func TestCertificatePDF(t *testing.T) {
	if _, err := exec.LookPath("pdftotext"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("pdftotext missing: scripts/deps.sh test installs poppler-utils")
		}
		t.Skip("pdftotext missing: apt-get install poppler-utils (scripts/deps.sh test)")
	}
	for _, f := range certFonts {
		if _, err := os.Stat(f.path); err != nil && os.Getenv("CI") == "" {
			t.Skipf("no font %s: apt-get install %s (scripts/deps.sh run)", f.path, f.pkg)
		}
	}
	e, srv := newCertEnv(t)
	admin := newClient()
	e.register(admin, "admin@example.com") // the first account is the admin; its name is 学员
	u, err := e.store.UserByEmail(context.Background(), "admin@example.com")
	if err != nil {
		t.Fatal(err)
	}
	exam := "commlab 认证：多卡通信故障诊断（模块 1–2）"
	issue := func(band string) string {
		c, err := srv.ca.issue(context.Background(), u, 0, "m12", exam, band)
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	good, revoked := issue("merit"), issue("pass")
	if err := e.store.(store.Certs).RevokeCertificate(context.Background(), revoked, u.ID, "exam voided"); err != nil {
		t.Fatal(err)
	}
	en := newClient()
	e.do(en, "GET", "/lang/en", nil)
	key := cert.KeyID(srv.ca.pub)

	cases := []struct {
		name   string
		client *http.Client
		id     string
		status int
		want   []string // in the PDF's text, or in the error page
	}{
		{"zh", e.c, good, http.StatusOK, []string{"认证证书", "学员", exam, "良好", good, "/verify/" + good, "ed25519 " + key}},
		{"en", en, good, http.StatusOK, []string{"Certificate", "学员", "Merit", good, "/verify/" + good}},
		{"revoked", e.c, revoked, http.StatusGone, []string{"证书已被吊销"}},
		{"unknown", e.c, "CL-AAAA-AAAA-AAAA-AAAA", http.StatusNotFound, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body, h := e.do(tc.client, "GET", "/verify/"+tc.id+"/certificate.pdf", nil)
			if code != tc.status {
				t.Fatalf("status %d, want %d\n%.300s", code, tc.status, body)
			}
			text := body
			if code == http.StatusOK {
				if ct := h.Get("Content-Type"); ct != "application/pdf" {
					t.Fatalf("Content-Type %q", ct)
				}
				text = pdfText(t, body)
			} else if strings.HasPrefix(body, "%PDF") {
				t.Fatal("a PDF for a certificate that does not verify")
			}
			// pdftotext may break a long line; compare without white space.
			flat := strings.Join(strings.Fields(text), "")
			for _, w := range tc.want {
				if !strings.Contains(flat, strings.Join(strings.Fields(w), "")) {
					t.Errorf("%q missing from:\n%s", w, text)
				}
			}
		})
	}

	t.Run("verify page links the PDF of a valid certificate only", func(t *testing.T) {
		for id, want := range map[string]bool{good: true, revoked: false} {
			_, page, _ := e.do(e.c, "GET", "/verify/"+id, nil)
			if got := strings.Contains(page, `href="/verify/`+id+`/certificate.pdf"`) && strings.Contains(page, "下载 PDF"); got != want {
				t.Errorf("%s: PDF link %v, want %v:\n%s", id, got, want, page)
			}
		}
	})

	t.Run("no font", func(t *testing.T) {
		saved := certFonts[1]
		certFonts[1] = &fontFile{path: filepath.Join(t.TempDir(), "absent.ttf"), pkg: saved.pkg}
		defer func() { certFonts[1] = saved }()
		code, body, _ := e.do(e.c, "GET", "/verify/"+good+"/certificate.pdf", nil)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "apt-get install fonts-droid-fallback") {
			t.Errorf("missing font: %d\n%.500s", code, body)
		}
	})
}
