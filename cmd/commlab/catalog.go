package main

import (
	"fmt"
	"path"

	"github.com/commlab/commlab/course"
	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs/topology"
	"github.com/commlab/commlab/scenarios"
)

// content is the course and the lab scenarios, validated against each other, the
// built-in topologies and the injector's fault kinds.
type content struct {
	course    *course.Course
	scenarios *scenarios.Catalog
}

// loadContent loads and cross-checks the course and the scenarios. courseDir overrides
// the embedded course (authors); problems are returned with repository-relative paths.
func loadContent(courseDir string) (*content, []string) {
	reg, err := injector.NewRegistry(injector.Builtin()...)
	if err != nil {
		return nil, []string{err.Error()}
	}
	cfs, prefix := contentFS(courseDir)
	// The chapters a scenario may name are those of the manifest, whatever is written.
	chapterIDs := map[string]bool{}
	if probe, _ := course.Load(cfs, course.Options{LabExists: func(string) bool { return true }}); probe != nil {
		for _, ch := range probe.Chapters() {
			chapterIDs[ch.ID] = true
		}
	}
	cat, sprobs := scenarios.Load(scenarios.Embedded(), scenarios.CatalogDir, scenarios.Options{
		Topology: func(name string) ([]string, []string, bool) {
			t, err := topology.Builtin(name)
			if err != nil {
				return nil, nil, false
			}
			var nics []string
			seen := map[string]bool{}
			for _, n := range t.Nodes {
				for _, nic := range n.NICs {
					if !seen[nic.Name] {
						seen[nic.Name] = true
						nics = append(nics, nic.Name)
					}
				}
			}
			return t.NodeNames(), nics, true
		},
		CheckFault: func(kind string, params map[string]string) error {
			f, err := reg.Parse(kind, params)
			if err != nil {
				return err
			}
			return f.Validate()
		},
		ChapterExists: func(id string) bool { return chapterIDs[id] },
	})
	var probs []string
	for _, p := range sprobs {
		probs = append(probs, path.Join("scenarios", p.Error()))
	}
	opts := course.Options{LabExists: func(id string) bool { _, ok := cat.Get(id); return ok }}
	c, cprobs := course.Load(cfs, opts)
	if len(cprobs) > 0 {
		probs = append(probs, located(cprobs, prefix)...)
	}
	// Every scenario belongs to a written chapter that lists it.
	if c != nil && cat != nil {
		for _, s := range cat.All() {
			ch, ok := c.Chapter(s.Chapter)
			if ok && ch.Written() && !contains(ch.Labs, s.ID) {
				probs = append(probs, fmt.Sprintf("%s: scenario %s belongs to %s, but %s does not list it in labs:", path.Join("scenarios", s.File), s.ID, s.Chapter, path.Join(prefix, ch.File)))
			}
		}
	}
	return &content{course: c, scenarios: cat}, probs
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
