package nccl

import (
	"fmt"
	"hash/fnv"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/commlab/commlab/internal/yamldecode"
)

// corpusCase is one real public failure excerpt (testdata/corpus/cases.yaml).
type corpusCase struct {
	URL     string `yaml:"url"`
	Symptom string `yaml:"symptom"`
	Cause   string `yaml:"cause"`
	Excerpt string `yaml:"excerpt"`
	// Batch 2 was collected after the rules were written: unseen cases.
	Batch int `yaml:"batch"`
}

const corpusPath = "testdata/corpus/cases.yaml"

func loadCorpus(t testing.TB) []corpusCase {
	t.Helper()
	data, err := os.ReadFile(corpusPath)
	if err != nil {
		t.Fatal(err)
	}
	var cases []corpusCase
	if err := yamldecode.Decode(corpusPath, data, 0, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

// heldOut puts a third of the corpus aside by a hash of the URL, chosen
// before the rules were written: rules tuned on the rest are scored on it.
func heldOut(url string) bool {
	h := fnv.New32a()
	h.Write([]byte(url))
	return h.Sum32()%3 == 0
}

// score is the corpus accuracy of one split.
type score struct {
	cases, symptomOK   int
	confirmed, causeOK int
	causeTop3          int
	misses             []string
}

func (s score) symptomPct() float64 { return pct(s.symptomOK, s.cases) }
func (s score) causePct() float64   { return pct(s.causeOK, s.confirmed) }

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

func scoreCorpus(cases []corpusCase) (train, held, unseen score) {
	for _, c := range cases {
		s := &train
		switch {
		case c.Batch == 2:
			s = &unseen
		case heldOut(c.URL):
			s = &held
		}
		v := Diagnose([]byte(c.Excerpt))
		s.cases++
		if v.Symptom.ID == c.Symptom {
			s.symptomOK++
		} else {
			s.misses = append(s.misses, fmt.Sprintf("%s: symptom %s, want %s", c.URL, v.Symptom.ID, c.Symptom))
		}
		if c.Cause == "" {
			continue
		}
		s.confirmed++
		for i, rc := range v.Causes {
			if rc.ID != c.Cause {
				continue
			}
			if i == 0 {
				s.causeOK++
			}
			if i < 3 {
				s.causeTop3++
			}
		}
		if len(v.Causes) == 0 || v.Causes[0].ID != c.Cause {
			got := "none"
			if len(v.Causes) > 0 {
				got = v.Causes[0].ID
			}
			s.misses = append(s.misses, fmt.Sprintf("%s: cause %s, want %s", c.URL, got, c.Cause))
		}
	}
	return train, held, unseen
}

func (s score) report(name string) string {
	return fmt.Sprintf("%-8s %2d cases: symptom %5.1f%% (%d/%d); confirmed cause %5.1f%% top-1 (%d/%d), %d in top 3",
		name, s.cases, s.symptomPct(), s.symptomOK, s.cases, s.causePct(), s.causeOK, s.confirmed, s.causeTop3)
}

// The corpus is well formed: real URLs, symptoms and causes from the
// taxonomy, no case twice, at least 60 cases.
func TestCorpusWellFormed(t *testing.T) {
	cases := loadCorpus(t)
	if len(cases) < 60 {
		t.Errorf("%d cases, want at least 60", len(cases))
	}
	seen := map[string]bool{}
	for i, c := range cases {
		where := fmt.Sprintf("%s case %d (%s)", corpusPath, i+1, c.URL)
		if !strings.HasPrefix(c.URL, "https://github.com/") {
			t.Errorf("%s: url is not a GitHub thread", where)
		}
		if seen[c.URL] {
			t.Errorf("%s: url appears twice", where)
		}
		seen[c.URL] = true
		if _, i := symptomInfo(c.Symptom); i < 0 {
			t.Errorf("%s: symptom %q is not in the taxonomy", where, c.Symptom)
		}
		if _, ok := Causes[c.Cause]; c.Cause != "" && !ok {
			t.Errorf("%s: cause %q is not in the taxonomy", where, c.Cause)
		}
		if strings.TrimSpace(c.Excerpt) == "" {
			t.Errorf("%s: empty excerpt", where)
		}
	}
}

// The explainer's accuracy on the corpus stays at or above what it reached
// when the rules were written (the benchmark prints the figures).
func TestCorpusAccuracy(t *testing.T) {
	train, held, unseen := scoreCorpus(loadCorpus(t))
	t.Log(train.report("tuned"))
	t.Log(held.report("held-out"))
	t.Log(unseen.report("unseen"))
	for _, m := range append(append(train.misses, held.misses...), unseen.misses...) {
		t.Log("miss: " + m)
	}
	floors := []struct {
		name      string
		got, want float64
	}{
		{"tuned symptom", train.symptomPct(), 95},
		{"held-out symptom", held.symptomPct(), 85},
		{"tuned cause", train.causePct(), 80},
	}
	for _, f := range floors {
		if f.got < f.want {
			t.Errorf("%s accuracy %.1f%% < %.0f%%", f.name, f.got, f.want)
		}
	}
}

// BenchmarkCorpus is the report `make bench` prints: accuracy on the part
// of the corpus the rules were written against, and on the held-out third.
func BenchmarkCorpus(b *testing.B) {
	cases := loadCorpus(b)
	var train, held, unseen score
	for i := 0; i < b.N; i++ {
		train, held, unseen = scoreCorpus(cases)
	}
	b.ReportMetric(held.symptomPct(), "heldout-symptom-%")
	b.ReportMetric(held.causePct(), "heldout-cause-%")
	b.ReportMetric(unseen.symptomPct(), "unseen-symptom-%")
	b.ReportMetric(train.symptomPct(), "tuned-symptom-%")
	b.ReportMetric(train.causePct(), "tuned-cause-%")
	b.Log("corpus " + corpusPath + " (held out: fnv32a(url) % 3 == 0)")
	b.Log(train.report("tuned"))
	b.Log(held.report("held-out"))
	b.Log(unseen.report("unseen") + " (batch 2: collected after the rules were written)")
	misses := append(append(append([]string{}, train.misses...), held.misses...), unseen.misses...)
	sort.Strings(misses)
	for _, m := range misses {
		b.Log("miss: " + m)
	}
}
