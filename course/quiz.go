package course

import (
	"html/template"
	"io/fs"
	"math"
	"strconv"
	"strings"

	"github.com/commlab/commlab/internal/boundedread"
	"github.com/commlab/commlab/internal/yamldecode"
)

// Question types.
const (
	Single   = "single"   // one option is right
	Multiple = "multiple" // a set of options is right; all and only those score
	Numeric  = "numeric"  // a number within a relative tolerance scores
)

// Quiz is a chapter's quiz. The answer key is unexported so that no template or JSON
// encoder can send it to a browser; only Grade reads it.
type Quiz struct {
	Pass      float64 // fraction of questions needed to pass
	Questions []*Question
}

// Question is one quiz question as shown to the learner.
type Question struct {
	ID          string
	Type        string
	Prompt      template.HTML
	Options     []string
	Unit        string
	explanation template.HTML
	single      int
	multiple    map[int]bool
	numeric     float64
	tolerance   float64
}

type quizFile struct {
	Pass      float64 `yaml:"pass"`
	Questions []struct {
		ID          string   `yaml:"id"`
		Type        string   `yaml:"type"`
		Prompt      string   `yaml:"prompt"`
		Options     []string `yaml:"options"`
		Answer      any      `yaml:"answer"`
		Tolerance   float64  `yaml:"tolerance"`
		Unit        string   `yaml:"unit"`
		Explanation string   `yaml:"explanation"`
	} `yaml:"questions"`
}

func loadQuiz(fsys fs.FS, file string, r *renderer) (*Quiz, Problems) {
	var probs Problems
	data, err := boundedread.FS(fsys, file, boundedread.Config)
	if err != nil {
		probs.add(file, 0, "cannot read quiz: %v", err)
		return nil, probs
	}
	var qf quizFile
	if err := yamldecode.Decode(file, data, 0, &qf); err != nil {
		probs.addErr(file, err)
		return nil, probs
	}
	q := &Quiz{Pass: qf.Pass}
	if qf.Pass <= 0 || qf.Pass > 1 {
		probs.add(file, lineOf(data, "pass:", 1), "pass must be a fraction in (0, 1], got %v", qf.Pass)
	}
	if len(qf.Questions) == 0 {
		probs.add(file, 1, "quiz has no questions")
	}
	seen := map[string]bool{}
	for _, fq := range qf.Questions {
		line := lineOf(data, "id: "+fq.ID, 1)
		bad := func(format string, args ...any) {
			probs.add(file, line, "question %q: "+format, append([]any{fq.ID}, args...)...)
		}
		if fq.ID == "" || seen[fq.ID] {
			bad("every question needs a unique id")
			continue
		}
		seen[fq.ID] = true
		qq := &Question{ID: fq.ID, Type: fq.Type, Options: fq.Options, Unit: fq.Unit, tolerance: fq.Tolerance}
		var err error
		if qq.Prompt, err = r.renderInline(fq.Prompt); err != nil || strings.TrimSpace(fq.Prompt) == "" {
			bad("needs a prompt")
		}
		if qq.explanation, err = r.renderInline(fq.Explanation); err != nil || strings.TrimSpace(fq.Explanation) == "" {
			bad("needs an explanation (shown after answering)")
		}
		switch fq.Type {
		case Single:
			idx, ok := asInt(fq.Answer)
			if len(fq.Options) < 2 {
				bad("a single-choice question needs at least 2 options")
			} else if !ok || idx < 0 || idx >= len(fq.Options) {
				bad("answer must be an option index from 0 to %d", len(fq.Options)-1)
			}
			qq.single = idx
		case Multiple:
			list, ok := fq.Answer.([]any)
			if len(fq.Options) < 2 {
				bad("a multiple-choice question needs at least 2 options")
			}
			if !ok || len(list) == 0 {
				bad("answer must be a list of option indexes, e.g. [0, 2]")
			}
			qq.multiple = map[int]bool{}
			for _, v := range list {
				idx, ok := asInt(v)
				if !ok || idx < 0 || idx >= len(fq.Options) {
					bad("answer %v is not an option index from 0 to %d", v, len(fq.Options)-1)
					continue
				}
				qq.multiple[idx] = true
			}
		case Numeric:
			f, ok := asFloat(fq.Answer)
			if !ok {
				bad("answer must be a number")
			}
			if fq.Tolerance < 0 || fq.Tolerance > 0.5 {
				bad("tolerance is a relative error between 0 and 0.5, got %v", fq.Tolerance)
			}
			if len(fq.Options) > 0 {
				bad("a numeric question has no options")
			}
			qq.numeric = f
		default:
			bad("type must be single, multiple or numeric, got %q", fq.Type)
		}
		q.Questions = append(q.Questions, qq)
	}
	return q, probs
}

func asInt(v any) (int, bool) {
	switch n := v.(type) {
	case uint64:
		return int(n), true
	case int64:
		return int(n), true
	case int:
		return n, true
	}
	return 0, false
}

func asFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case uint64:
		return float64(n), true
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	}
	return 0, false
}

// Answers maps a question id to the learner's answer: option indexes as decimal
// strings for choice questions, one number for numeric ones.
type Answers map[string][]string

// Result is a graded quiz.
type Result struct {
	Score   float64 // fraction of questions right
	Passed  bool
	Answers []Graded
}

// Graded is the verdict on one question, with the explanation that is shown only now.
type Graded struct {
	ID          string
	Correct     bool
	Explanation template.HTML
}

// Grade scores answers. Unanswered questions count as wrong.
func (q *Quiz) Grade(ans Answers) Result {
	var res Result
	right := 0
	for _, qq := range q.Questions {
		ok := qq.correct(ans[qq.ID])
		if ok {
			right++
		}
		res.Answers = append(res.Answers, Graded{ID: qq.ID, Correct: ok, Explanation: qq.explanation})
	}
	if n := len(q.Questions); n > 0 {
		res.Score = float64(right) / float64(n)
	}
	res.Passed = res.Score >= q.Pass-1e-9
	return res
}

func (qq *Question) correct(given []string) bool {
	switch qq.Type {
	case Single:
		return len(given) == 1 && given[0] == strconv.Itoa(qq.single)
	case Multiple:
		picked := map[int]bool{}
		for _, g := range given {
			i, err := strconv.Atoi(g)
			if err != nil {
				return false
			}
			picked[i] = true
		}
		if len(picked) != len(qq.multiple) {
			return false
		}
		for i := range picked {
			if !qq.multiple[i] {
				return false
			}
		}
		return true
	case Numeric:
		if len(given) != 1 {
			return false
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(strings.ReplaceAll(given[0], ",", "")), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
		tol := qq.tolerance * math.Abs(qq.numeric)
		if qq.numeric == 0 {
			tol = qq.tolerance
		}
		return math.Abs(f-qq.numeric) <= tol+1e-12
	}
	return false
}
