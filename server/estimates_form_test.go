package server

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

// TestDiagnosisEstimates: the answer form's estimate.ID fields reach the diagnosis as
// numbers; an empty one is left out; a non-number is a bad form.
func TestDiagnosisEstimates(t *testing.T) {
	post := func(form url.Values) *gin.Context {
		c, _ := gin.CreateTestContext(httptest.NewRecorder())
		c.Request = httptest.NewRequest(http.MethodPost, "/lab/x/submit", strings.NewReader(form.Encode()))
		c.Request.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return c
	}
	d, err := diagnosis(post(url.Values{"class": {"link-latency"}, "estimate.alpha": {" 2350.5 "}, "estimate.rate": {""}, "evidence": {"node1#3"}}))
	if err != nil || len(d.Estimates) != 1 || d.Estimates["alpha"] != 2350.5 || len(d.Evidence) != 1 {
		t.Errorf("diagnosis %+v, %v; want alpha 2350.5 only, one evidence", d, err)
	}
	if _, err := diagnosis(post(url.Values{"class": {"x"}, "estimate.alpha": {"2ms"}})); err == nil || !strings.Contains(err.Error(), "estimate.alpha") {
		t.Errorf("a non-number estimate: %v, want a bad form naming it", err)
	}
}
