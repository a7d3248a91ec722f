package server

import (
	"strconv"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/server/store"
)

// chapterStatus is a learner's progress in one chapter as the pages show it.
type chapterStatus struct {
	store.Progress
	// Studied: the quiz passed, a lab passed, or the chapter marked read.
	Studied bool
	// LabsPassed of LabsTotal: each lab counts on its own, so passing one of
	// ch08's four labs is 1 of 4.
	LabsPassed, LabsTotal int
	HasQuiz               bool
}

// LabsDone reports whether every lab of the chapter is passed (false without labs).
func (st chapterStatus) LabsDone() bool { return st.LabsTotal > 0 && st.LabsPassed == st.LabsTotal }

// Complete reports whether nothing is left in the chapter: studied, its quiz
// passed and its labs done, where it has them.
func (st chapterStatus) Complete() bool {
	return st.Studied && (!st.HasQuiz || st.QuizPassed) && (st.LabsTotal == 0 || st.LabsDone())
}

func statusOf(ch *course.Chapter, p store.Progress) chapterStatus {
	st := chapterStatus{Progress: p, LabsTotal: len(ch.Labs), HasQuiz: ch.Quiz != nil}
	for _, id := range ch.Labs {
		st.LabsPassed += b2i(p.Labs[id].Passed)
	}
	st.Studied = p.Read || p.QuizPassed || st.LabsPassed > 0
	return st
}

// continueAt is where the index invites a learner to go on.
type continueAt struct {
	Chapter *course.Chapter
	Started bool // false: nothing recorded yet, so this is the first chapter
}

// continueFrom picks the chapter last worked on, or the written chapter after it
// once it is complete; the first written chapter for a learner with no progress.
// Nil when every written chapter is complete.
func continueFrom(crs *course.Course, prog map[string]chapterStatus) *continueAt {
	var last *course.Chapter
	for _, ch := range crs.Chapters() {
		p, ok := prog[ch.ID]
		if ok && !p.UpdatedAt.IsZero() && (last == nil || p.UpdatedAt.After(prog[last.ID].UpdatedAt)) {
			last = ch
		}
	}
	if last == nil {
		for _, ch := range crs.Chapters() {
			if ch.Written() {
				return &continueAt{Chapter: ch}
			}
		}
		return nil
	}
	// From the last chapter on, then wrapping round, the first one not complete.
	chs := crs.Chapters()
	from := 0
	for i, ch := range chs {
		if ch == last {
			from = i
		}
	}
	for k := range chs {
		ch := chs[(from+k)%len(chs)]
		if ch.Written() && !prog[ch.ID].Complete() {
			return &continueAt{Chapter: ch, Started: true}
		}
	}
	return nil
}

// quizView is a chapter's quiz as the page shows it: each question with what the
// learner gave and, once graded, its verdict. Verdicts are pointers, so a question
// without one is nil in the template, never a zero verdict that reads as "wrong".
type quizView struct {
	Quiz      *course.Quiz
	Result    *course.Result // nil before the first submission
	Questions []questionView
}

type questionView struct {
	*course.Question
	Given   string       // a numeric answer as typed
	Checked map[int]bool // chosen options
	Verdict *course.Graded
}

func newQuizView(q *course.Quiz, given store.Answers) *quizView {
	v := &quizView{Quiz: q}
	var verdicts map[string]*course.Graded
	if given != nil {
		res := q.Grade(course.Answers(given))
		v.Result = &res
		verdicts = map[string]*course.Graded{}
		for i := range res.Answers {
			verdicts[res.Answers[i].ID] = &res.Answers[i]
		}
	}
	for _, qq := range q.Questions {
		qv := questionView{Question: qq, Checked: map[int]bool{}, Verdict: verdicts[qq.ID]}
		for _, a := range given[qq.ID] {
			if n, err := strconv.Atoi(a); err == nil {
				qv.Checked[n] = true
			}
		}
		if vals := given[qq.ID]; len(vals) > 0 {
			qv.Given = vals[0]
		}
		v.Questions = append(v.Questions, qv)
	}
	return v
}
