package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"codeberg.org/go-pdf/fpdf"
	"github.com/gin-gonic/gin"

	"github.com/commlab/commlab/cert"
	"github.com/commlab/commlab/web"
)

// The PDF is set in two UTF-8 TrueType fonts read from the system (not
// embedded in commlab; fpdf embeds only the glyphs used): DroidSansFallback
// has the CJK glyphs but no Latin ones, DejaVu Sans the Latin ones. Both are
// plain .ttf files: fpdf reads neither .ttc collections nor CFF OpenType,
// which rules out the Noto CJK and WenQuanYi files.
var certFonts = [2]*fontFile{
	{path: "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", pkg: "fonts-dejavu-core"},
	{path: "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf", pkg: "fonts-droid-fallback"},
}

// fontFile is a font read once from the system. A missing one is looked for
// again on the next request, so installing the package needs no restart.
type fontFile struct {
	path, pkg string // file, and the Debian package that installs it
	mu        sync.Mutex
	b         []byte
}

func (f *fontFile) load() ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.b == nil {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return nil, err
		}
		f.b = b
	}
	return f.b, nil
}

// certPDF serves a valid certificate as a printable A4 page. An invalid one
// (revoked, altered) is refused rather than printed with a mark: a PDF
// travels without its context, so it exists only for what verifies now.
func (s *Server) certPDF(c *gin.Context) {
	lang := langOf(c)
	v, doc, err := s.ca.verifyID(c.Request.Context(), c.Param("id"), lang)
	switch {
	case err != nil:
		s.fail(c, err)
		return
	case v.Reason == "unknown":
		s.fail(c, errNotFound)
		return
	case !v.Valid:
		s.fail(c, httpError{http.StatusGone, "cert.pdf.invalid", v.Message})
		return
	}
	var fonts [2][]byte
	for i, f := range certFonts {
		if fonts[i], err = f.load(); err != nil {
			s.log.Error("certificate PDF: no font", "err", err, "package", f.pkg)
			s.fail(c, httpError{http.StatusServiceUnavailable, "cert.pdf.nofont", f.pkg})
			return
		}
	}
	var d cert.Document
	if err := json.Unmarshal(doc, &d); err != nil {
		s.fail(c, err)
		return
	}
	scheme := "http"
	if c.Request.TLS != nil || s.cfg.SecureCookies {
		scheme = "https"
	}
	var out bytes.Buffer
	if err := writeCertPDF(&out, fonts, lang, d, scheme+"://"+c.Request.Host); err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Content-Disposition", fmt.Sprintf(`inline; filename="%s.pdf"`, d.Certificate.ID))
	c.Data(http.StatusOK, "application/pdf", out.Bytes())
}

// fontOf picks the font of a rune: CJK (from U+2E80, radicals, and on) in
// the CJK font, the rest in the Latin one.
func fontOf(r rune) string {
	if r >= 0x2E80 {
		return "cjk"
	}
	return "latin"
}

// writeCertPDF lays out the certificate on A4 landscape, the same content as
// web/templates/verify.html plus the signature, so the paper can be checked
// against /verify/<id> or offline.
func writeCertPDF(w io.Writer, fonts [2][]byte, lang string, d cert.Document, site string) error {
	c := d.Certificate
	issued, _ := time.Parse(time.DateOnly, c.Issued)
	p := fpdf.New("L", "mm", "A4", "")
	p.SetCreationDate(issued) // the same certificate gives the same bytes
	p.SetModificationDate(issued)
	p.SetTitle(web.T(lang, "cert.heading")+" "+c.ID, true)
	p.SetCreator("commlab", true)
	p.AddUTF8FontFromBytes("latin", "", fonts[0])
	p.AddUTF8FontFromBytes("cjk", "", fonts[1])
	p.SetAutoPageBreak(false, 0)
	p.AddPage()
	pw, ph := p.GetPageSize()

	p.SetDrawColor(40, 70, 120)
	p.SetLineWidth(1.2)
	p.Rect(10, 10, pw-20, ph-20, "D")
	p.SetLineWidth(0.3)
	p.Rect(13, 13, pw-26, ph-26, "D")

	// text writes s at y in runs of one font each; align is L (from x), R
	// (ending at x) or C (centred on x).
	text := func(x, y, size float64, align string, grey int, s string) {
		var runs []string
		var fonts []string
		for _, r := range s {
			if f := fontOf(r); len(fonts) > 0 && fonts[len(fonts)-1] == f {
				runs[len(runs)-1] += string(r)
			} else {
				runs, fonts = append(runs, string(r)), append(fonts, f)
			}
		}
		width := 0.0
		for i, run := range runs {
			p.SetFont(fonts[i], "", size)
			width += p.GetStringWidth(run)
		}
		switch align {
		case "C":
			x -= width / 2
		case "R":
			x -= width
		}
		p.SetTextColor(grey, grey, grey)
		for i, run := range runs {
			p.SetFont(fonts[i], "", size)
			p.Text(x, y, run)
			x += p.GetStringWidth(run)
		}
	}
	mid := pw / 2
	text(mid, 32, 12, "C", 90, "commlab")
	text(mid, 52, 32, "C", 40, web.T(lang, "cert.heading"))
	text(mid, 70, 14, "C", 60, web.T(lang, "cert.awarded"))
	text(mid, 88, 30, "C", 0, c.Name)
	text(mid, 104, 14, "C", 60, web.T(lang, "cert.for"))
	text(mid, 118, 20, "C", 0, c.Exam)
	facts := [][2]string{
		{web.T(lang, "cert.band"), web.T(lang, bandKey(c.Band))},
		{web.T(lang, "cert.date"), c.Issued},
		{web.T(lang, "cert.id"), c.ID},
	}
	for i, f := range facts {
		y := 138 + 9*float64(i)
		text(mid-4, y, 13, "R", 90, f[0])
		text(mid+4, y, 13, "L", 0, f[1])
	}
	text(mid, 172, 11, "C", 60, web.T(lang, "cert.checkat")+" "+site+"/verify/"+c.ID)
	text(mid, 180, 8, "C", 110, web.T(lang, "cert.key")+": ed25519 "+d.Key+" ("+site+"/cert/key.pem)")
	text(mid, 186, 7, "C", 110, web.T(lang, "cert.signature")+": "+d.Signature)
	if err := p.Error(); err != nil {
		return err
	}
	return p.Output(w)
}
