package server

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkCoursePage measures the handler path of an anonymous course page (the case
// the page cache serves), without the network.
func BenchmarkCoursePage(b *testing.B) {
	srv, _ := newTestServer(b, Config{})
	req := httptest.NewRequest("GET", "/course/ch01", nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
}
