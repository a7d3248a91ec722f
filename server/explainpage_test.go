package server

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
)

// postExplain sends the explain form as a browser does: multipart, with the
// paste and (if any) a file.
func (e *testEnv) postExplain(c *http.Client, tok, pasted string, file []byte) (int, string) {
	e.t.Helper()
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	_ = w.WriteField("csrf_token", tok)
	_ = w.WriteField("log", pasted)
	if file != nil {
		fw, _ := w.CreateFormFile("file", "nccl.log")
		_, _ = fw.Write(file)
	}
	w.Close()
	req, _ := http.NewRequest("POST", e.url+"/explain", &body)
	req.Header.Set("Content-Type", w.FormDataContentType())
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestExplainPage(t *testing.T) {
	e := newTestEnv(t, Config{})
	if code, _, h := e.do(newClient(), "GET", "/explain", nil); code != http.StatusFound || !strings.HasPrefix(h.Get("Location"), "/login") {
		t.Fatalf("anonymous GET /explain: %d %v, want a redirect to /login", code, h.Get("Location"))
	}
	c := newClient()
	e.register(c, "ex@example.com")
	tok := e.csrf(c, "/explain")
	shm := "misc/shmutils.cc:87 NCCL WARN Error: failed to extend /dev/shm/nccl-YrFC5V to 33030532 bytes, error: No space left on device (28)"
	elf := append([]byte{0x7f, 'E', 'L', 'F'}, make([]byte, 8192)...)
	cases := []struct {
		name   string
		pasted string
		file   []byte
		code   int
		want   []string
	}{
		{"paste", shm, nil, http.StatusOK, []string{`data-symptom="shm-failure"`, `data-cause="shm-limit"`, "df -h /dev/shm", "NCCL 2.12"}},
		{"upload wins over paste", "", []byte("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus\n"), http.StatusOK, []string{`data-symptom="gpu-lost"`}},
		{"binary upload", "", elf, http.StatusOK, []string{`data-symptom="unrecognised"`, "binary data"}},
		{"empty", "  \n", nil, http.StatusBadRequest, []string{"没有内容"}},
		{"file over the cap", "", bytes.Repeat([]byte("x\n"), 3<<19), http.StatusRequestEntityTooLarge, []string{"3072 KiB", "2048 KiB"}},
		{"paste over the cap", strings.Repeat("y", 5<<19), nil, http.StatusRequestEntityTooLarge, []string{"2560 KiB"}},
		{"body over the route limit", "", make([]byte, 6<<20), http.StatusRequestEntityTooLarge, []string{"4160 KiB"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.postExplain(c, tok, tc.pasted, tc.file)
			if code != tc.code {
				t.Fatalf("status %d, want %d\n%.2000s", code, tc.code, body)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("page lacks %q\n%.3000s", w, body)
				}
			}
		})
	}
}
