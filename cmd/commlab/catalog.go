package main

import (
	"fmt"
	"os"
	"path"
	"sort"

	"github.com/commlab/commlab/bench"
	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/exam"
	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs/topology"
	"github.com/commlab/commlab/scenarios"
)

// content is the course and the lab scenarios, validated against each other, the
// built-in topologies and the injector's fault kinds.
type content struct {
	course    *course.Course
	scenarios *scenarios.Catalog
	exams     *exam.Set
}

// loadContent loads and cross-checks the course and the embedded scenarios. courseDir
// overrides the embedded course (authors); problems are returned with repository-relative
// paths.
func loadContent(courseDir string) (*content, []string) { return loadContentFrom(courseDir, "") }

// loadContentFrom is loadContent with scenarioDir, when set, read instead of the
// embedded catalog (authors checking scenario files outside the binary). A course
// that cannot load at all is reported alone: every scenario would otherwise
// follow with an "unknown chapter" of its own.
func loadContentFrom(courseDir, scenarioDir string) (*content, []string) {
	reg, err := injector.NewRegistry(injector.Builtin()...)
	if err != nil {
		return nil, []string{err.Error()}
	}
	cfs, prefix := contentFS(courseDir)
	// The chapters a scenario may name are those of the manifest, whatever is written.
	chapterIDs := map[string]bool{}
	probe, pprobs := course.Load(cfs, course.Options{LabExists: func(string) bool { return true }})
	if probe == nil {
		return nil, located(pprobs, prefix)
	}
	for _, ch := range probe.Chapters() {
		chapterIDs[ch.ID] = true
	}
	sfs, sdir, sprefix := scenarios.Embedded(), scenarios.CatalogDir, "scenarios"
	if scenarioDir != "" {
		r, err := os.OpenRoot(scenarioDir)
		if err != nil {
			return nil, []string{err.Error()}
		}
		defer r.Close()
		sfs, sdir, sprefix = r.FS(), ".", scenarioDir
	}
	cat, sprobs := scenarios.Load(sfs, sdir, scenarios.Options{
		Topology: topology.BuiltinNodesAndNICs,
		CheckFault: func(kind string, params map[string]string) error {
			f, err := reg.Parse(kind, params)
			if err != nil {
				return err
			}
			return f.Validate()
		},
		ChapterExists: func(id string) bool { return chapterIDs[id] },
		CheckBench: func(argv []string) error {
			_, _, err := bench.ParseArgs(argv)
			return err
		},
	})
	opts := course.Options{LabExists: func(id string) bool { _, ok := cat.Get(id); return ok }}
	c, cprobs := course.Load(cfs, opts)
	// The manifest's own problems first: the others often follow from them.
	sort.SliceStable(cprobs, func(i, j int) bool {
		return cprobs[i].File == course.ManifestFile && cprobs[j].File != course.ManifestFile
	})
	probs := located(cprobs, prefix)
	for _, p := range sprobs {
		probs = append(probs, path.Join(sprefix, p.Error()))
	}
	// Every scenario belongs to a written chapter that lists it.
	if c != nil && cat != nil {
		for _, s := range cat.All() {
			ch, ok := c.Chapter(s.Chapter)
			if ok && ch.Written() && !contains(ch.Labs, s.ID) {
				probs = append(probs, fmt.Sprintf("%s: scenario %s belongs to %s, but %s does not list it in labs:", path.Join(sprefix, s.File), s.ID, s.Chapter, path.Join(prefix, ch.File)))
			}
		}
	}
	ct := &content{course: c, scenarios: cat}
	if c != nil && cat != nil {
		var eprobs []string
		ct.exams, eprobs = loadExams(cat, c)
		probs = append(probs, eprobs...)
	}
	return ct, probs
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
