package course

import (
	"bytes"

	"github.com/commlab/commlab/internal/yamldecode"
)

// frontMatter is the YAML block at the top of a chapter file.
type frontMatter struct {
	ID     string   `yaml:"id"`
	Title  string   `yaml:"title"`
	Module int      `yaml:"module"`
	Order  int      `yaml:"order"`
	Labs   []string `yaml:"labs"`
	Quiz   string   `yaml:"quiz"`
}

var fence = []byte("---")

// splitFrontMatter parses the front matter of a chapter and returns it with the body and
// the 1-based line on which the body starts.
func splitFrontMatter(file string, src []byte) (frontMatter, []byte, int, error) {
	var fm frontMatter
	src = bytes.TrimPrefix(src, []byte("\ufeff"))
	first, rest, _ := bytes.Cut(src, []byte("\n"))
	if !bytes.Equal(bytes.TrimRight(first, "\r "), fence) {
		return fm, nil, 0, &yamldecode.Error{File: file, Line: 1, Msg: "a chapter must start with a '---' line opening its front matter"}
	}
	// Find the closing fence: a line that is exactly "---".
	off, line := 0, 2
	for {
		lineEnd := bytes.IndexByte(rest[off:], '\n')
		var l []byte
		if lineEnd < 0 {
			l = rest[off:]
		} else {
			l = rest[off : off+lineEnd]
		}
		if bytes.Equal(bytes.TrimRight(l, "\r "), fence) {
			yml := rest[:off]
			var body []byte
			if lineEnd >= 0 {
				body = rest[off+lineEnd+1:]
			}
			if err := yamldecode.Decode(file, yml, 1, &fm); err != nil {
				return fm, nil, 0, err
			}
			return fm, body, line + 1, nil
		}
		if lineEnd < 0 {
			return fm, nil, 0, &yamldecode.Error{File: file, Line: 1, Msg: "front matter is not closed by a '---' line"}
		}
		off += lineEnd + 1
		line++
	}
}

// check compares the front matter with the chapter's place in the manifest.
func (fm frontMatter) check(ch *Chapter, src []byte, opts Options, probs *Problems) {
	at := func(key string) int {
		if l := lineOf(src, "\n"+key+":", 1); l > 0 {
			return l + 1
		}
		return 1
	}
	if fm.ID != ch.ID {
		probs.add(ch.File, at("id"), "front matter id %q does not match the file name (want %q)", fm.ID, ch.ID)
	}
	if fm.Title == "" {
		probs.add(ch.File, at("title"), "front matter has no title")
	} else if fm.Title != ch.Title {
		probs.add(ch.File, at("title"), "title %q differs from %s (%q)", fm.Title, ManifestFile, ch.Title)
	}
	if fm.Module != ch.Module {
		probs.add(ch.File, at("module"), "module %d differs from %s, which places %s in module %d", fm.Module, ManifestFile, ch.ID, ch.Module)
	}
	if fm.Order != ch.Order {
		probs.add(ch.File, at("order"), "order %d differs from %s, which lists %s as chapter %d of its module", fm.Order, ManifestFile, ch.ID, ch.Order)
	}
	seen := map[string]bool{}
	for _, lab := range fm.Labs {
		switch {
		case seen[lab]:
			probs.add(ch.File, at("labs"), "lab %q listed twice", lab)
		case opts.LabExists == nil || !opts.LabExists(lab):
			probs.add(ch.File, lineOrDefault(lineOf(src, lab, 1), at("labs")), "unknown lab id %q (no scenario has this id)", lab)
		}
		seen[lab] = true
	}
}

func lineOrDefault(l, def int) int {
	if l > 0 {
		return l
	}
	return def
}
