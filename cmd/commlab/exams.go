package main

import (
	"path"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/exam"
	"github.com/commlab/commlab/scenarios"
	"github.com/commlab/commlab/scenarios/exams"
)

// loadExams loads the shipped exams against the scenarios and the course;
// problems carry repository-relative paths.
func loadExams(cat *scenarios.Catalog, c *course.Course) (*exam.Set, []string) {
	set, errs := exam.Load(exams.Embedded(), ".", cat, c)
	var probs []string
	for _, err := range errs {
		probs = append(probs, path.Join("scenarios/exams", err.Error()))
	}
	return set, probs
}
