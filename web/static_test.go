package web

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
)

func TestServeStatic(t *testing.T) {
	js := strings.Repeat("console.log('commlab');\n", 200)
	m := loadAssets(fstest.MapFS{
		"app.css":        {Data: []byte("body{}")},
		"dist/lab.js":    {Data: []byte(js)},
		"dist/lab.css":   {Data: []byte(".x{}")},
		"img/random.bin": {Data: bytes.Repeat([]byte{0x89, 'P', 'N', 'G'}, 600)},
	})
	v := m["dist/lab.js"].version
	tests := []struct {
		name, path, query, acceptEnc, ifNoneMatch string
		wantCode                                  int
		wantCache, wantEnc, wantType              string
		wantBody                                  string
	}{
		{name: "plain link revalidates", path: "/app.css", wantCode: 200, wantCache: "no-cache", wantType: "text/css; charset=utf-8", wantBody: "body{}"},
		{name: "hashed link is immutable", path: "/dist/lab.js", query: "v=" + v, wantCode: 200, wantCache: "public, max-age=31536000, immutable", wantBody: js},
		{name: "stale hash revalidates", path: "/dist/lab.js", query: "v=000000000000", wantCode: 200, wantCache: "no-cache", wantBody: js},
		{name: "gzip when accepted", path: "/dist/lab.js", acceptEnc: "br, gzip", wantCode: 200, wantCache: "no-cache", wantEnc: "gzip", wantBody: js},
		{name: "gzip refused with q=0", path: "/dist/lab.js", acceptEnc: "gzip;q=0", wantCode: 200, wantCache: "no-cache", wantBody: js},
		{name: "small file never gzipped", path: "/app.css", acceptEnc: "gzip", wantCode: 200, wantCache: "no-cache", wantBody: "body{}"},
		{name: "binary not gzipped", path: "/img/random.bin", acceptEnc: "gzip", wantCode: 200, wantCache: "no-cache"},
		{name: "etag match gives 304", path: "/app.css", ifNoneMatch: m["app.css"].etag, wantCode: 304, wantCache: "no-cache"},
		{name: "directory is not listed", path: "/dist/", wantCode: 404},
		{name: "root is not listed", path: "/", wantCode: 404},
		{name: "unknown file", path: "/dist/nope.js", wantCode: 404},
		{name: "climbing out is cleaned", path: "/../app.css", wantCode: 200, wantCache: "no-cache", wantBody: "body{}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/static"+tt.path+"?"+tt.query, nil)
			if tt.acceptEnc != "" {
				r.Header.Set("Accept-Encoding", tt.acceptEnc)
			}
			if tt.ifNoneMatch != "" {
				r.Header.Set("If-None-Match", tt.ifNoneMatch)
			}
			w := httptest.NewRecorder()
			if !serveAsset(m, w, r, tt.path) {
				w.WriteHeader(http.StatusNotFound)
			}
			res := w.Result()
			if res.StatusCode != tt.wantCode {
				t.Fatalf("status %d, want %d", res.StatusCode, tt.wantCode)
			}
			if tt.wantCode == 404 {
				return
			}
			h := res.Header
			if h.Get("ETag") == "" || h.Get("Cache-Control") != tt.wantCache || h.Get("Content-Encoding") != tt.wantEnc {
				t.Fatalf("headers %v: want Cache-Control %q, Content-Encoding %q and an ETag", h, tt.wantCache, tt.wantEnc)
			}
			if tt.wantType != "" && h.Get("Content-Type") != tt.wantType {
				t.Errorf("Content-Type %q, want %q", h.Get("Content-Type"), tt.wantType)
			}
			body := io.Reader(res.Body)
			if tt.wantEnc == "gzip" {
				zr, err := gzip.NewReader(res.Body)
				if err != nil {
					t.Fatal(err)
				}
				body = zr
			}
			got, _ := io.ReadAll(body)
			if tt.wantBody != "" && string(got) != tt.wantBody {
				t.Errorf("body %q..., want %q...", trunc(string(got)), trunc(tt.wantBody))
			}
		})
	}
}

func TestGzipHasOwnETag(t *testing.T) {
	m := loadAssets(fstest.MapFS{"a.js": {Data: []byte(strings.Repeat("var a = 1;\n", 300))}})
	get := func(enc string) string {
		r := httptest.NewRequest("GET", "/static/a.js", nil)
		r.Header.Set("Accept-Encoding", enc)
		w := httptest.NewRecorder()
		serveAsset(m, w, r, "a.js")
		return w.Result().Header.Get("ETag")
	}
	if plain, gz := get(""), get("gzip"); plain == gz || plain == "" {
		t.Fatalf("identity ETag %s and gzip ETag %s must differ", plain, gz)
	}
}

func TestBundleErr(t *testing.T) {
	full := loadAssets(fstest.MapFS{"dist/lab.js": {Data: []byte("x")}, "dist/lab.css": {Data: []byte("y")}})
	if err := bundleErr(full); err != nil {
		t.Fatalf("complete bundle: %v", err)
	}
	err := bundleErr(loadAssets(fstest.MapFS{"app.css": {Data: []byte("y")}}))
	if !errors.Is(err, ErrNoBundle) || !strings.Contains(err.Error(), "dist/lab.js") || !strings.Contains(err.Error(), "make build") {
		t.Fatalf("missing bundle: %v", err)
	}
}

func TestStaticURL(t *testing.T) {
	u := StaticURL("app.css")
	if !strings.HasPrefix(u, "/static/app.css?v=") || len(u) != len("/static/app.css?v=")+12 {
		t.Errorf("StaticURL(app.css) = %q", u)
	}
	if u := StaticURL("nope.css"); u != "/static/nope.css" {
		t.Errorf("StaticURL(nope.css) = %q", u)
	}
	r := httptest.NewRequest("GET", u, nil)
	w := httptest.NewRecorder()
	ServeStatic(w, r, "app.css")
	if w.Code != http.StatusOK {
		t.Errorf("GET %s: %d", u, w.Code)
	}
}

func trunc(s string) string { return s[:min(len(s), 40)] }
