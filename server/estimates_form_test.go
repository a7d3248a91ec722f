package server

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/commlab/commlab/web"
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

// TestLabPageEstimates: a lab that asks for figures shows a number field for each,
// labelled by what to report, never by its truth; other labs show none.
func TestLabPageEstimates(t *testing.T) {
	e := newLabEnv(t)
	e.register(e.c, "figures@example.com")
	path := e.startLab("ch13-latency-fit", nil)
	_, page, _ := e.do(e.c, "GET", path, nil)
	for _, want := range []string{`name="estimate.alpha"`, `name="estimate.link-rate"`, "拟合出的 α", "(µs)", "(Mbit/s)", web.T("zh", "lab.estimates")} {
		if !strings.Contains(page, want) {
			t.Errorf("the lab page lacks %q", want)
		}
	}
	if strings.Contains(page, "delay * 1000") {
		t.Error("the lab page shows an estimate's truth")
	}
	if code, _, _ := e.post(path+"/stop", url.Values{}, ""); code != http.StatusSeeOther {
		t.Fatalf("stop: %d", code)
	}
	_, other, _ := e.do(e.c, "GET", e.startLab("ch13-alpha-beta-fit", nil), nil)
	if strings.Contains(other, `name="estimate.`) {
		t.Error("a lab without estimates shows estimate fields")
	}
}
