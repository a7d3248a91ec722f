package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

// Bundle lists the files the esbuild bundle (web/frontend, `make web`) writes into
// static/dist; they are git-ignored, so a plain `go build` can embed a tree without them.
var Bundle = []string{"dist/lab.js", "dist/lab.css"}

// ErrNoBundle marks a binary built without the browser bundle.
var ErrNoBundle = errors.New("the browser bundle (web/static/dist) is not embedded in this binary: build with `make build`, or run `make web` before `go build`")

// BundleErr says whether the lab pages' script and style sheet are embedded.
func BundleErr() error { return bundleErr(assets()) }

func bundleErr(m map[string]*asset) error {
	var missing []string
	for _, f := range Bundle {
		if _, ok := m[f]; !ok {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w (missing %s)", ErrNoBundle, strings.Join(missing, ", "))
	}
	return nil
}

// asset is one embedded static file, read, hashed and compressed once.
type asset struct {
	body, gz []byte // gz is nil when compressing does not pay
	ctype    string
	etag     string // strong ETag from the content hash
	version  string // short hash used in ?v= links
}

var (
	assetsOnce sync.Once
	assetMap   map[string]*asset
	loadTime   = time.Now()
)

// assets indexes every embedded static file by its path under static/.
func assets() map[string]*asset {
	assetsOnce.Do(func() { assetMap = loadAssets(Static()) })
	return assetMap
}

func loadAssets(fsys fs.FS) map[string]*asset {
	m := map[string]*asset{}
	_ = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		h := hex.EncodeToString(sum[:])
		a := &asset{body: body, etag: `"` + h[:32] + `"`, version: h[:12]}
		if a.ctype = mime.TypeByExtension(path.Ext(p)); a.ctype == "" {
			a.ctype = http.DetectContentType(body)
		}
		if compressible(a.ctype) && len(body) > 1024 {
			var b bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
			_, _ = zw.Write(body)
			_ = zw.Close()
			if b.Len() < len(body)*9/10 {
				a.gz = b.Bytes()
			}
		}
		m[p] = a
		return nil
	})
	return m
}

func compressible(ctype string) bool {
	return strings.HasPrefix(ctype, "text/") || strings.Contains(ctype, "javascript") ||
		strings.Contains(ctype, "json") || strings.Contains(ctype, "svg")
}

// StaticURL is the link to the static file p (e.g. "dist/lab.js") with its content
// hash as ?v=, so a page always loads the file it was built with and browsers may
// keep it for good. An unknown file gets a plain link (and a 404 when fetched).
func StaticURL(p string) string {
	if a, ok := assets()[p]; ok {
		return "/static/" + p + "?v=" + a.version
	}
	return "/static/" + p
}

// ServeStatic serves the embedded file p (relative to static/): an ETag on every
// reply, immutable caching when the link carries the current ?v= hash and
// revalidation otherwise, gzip when the client accepts it, and no directory listings.
// It writes nothing and returns false when there is no such file (or p is a directory).
func ServeStatic(w http.ResponseWriter, r *http.Request, p string) bool {
	return serveAsset(assets(), w, r, p)
}

func serveAsset(m map[string]*asset, w http.ResponseWriter, r *http.Request, p string) bool {
	a, ok := m[strings.TrimPrefix(path.Clean("/"+p), "/")]
	if !ok {
		return false
	}
	h := w.Header()
	h.Set("Vary", "Accept-Encoding")
	if v := r.URL.Query().Get("v"); v != "" && v == a.version {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	h.Set("Content-Type", a.ctype)
	body, etag := a.body, a.etag
	if a.gz != nil && acceptsGzip(r) {
		// Each encoding is its own representation, so it gets its own ETag.
		h.Set("Content-Encoding", "gzip")
		body, etag = a.gz, strings.TrimSuffix(a.etag, `"`)+`-gz"`
	}
	h.Set("ETag", etag)
	// ServeContent answers If-None-Match with 304 and handles Range and HEAD.
	http.ServeContent(w, r, "", loadTime, bytes.NewReader(body))
	return true
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.TrimSpace(q) != "q=0" {
			return true
		}
	}
	return false
}
