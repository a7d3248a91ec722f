package nccl

import (
	"fmt"
	"io"
	"strings"
)

// WriteText reads the verdict out: the symptom, the causes with why and
// what to run, the lines it rests on, and what would make it firmer.
func (v *Verdict) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "symptom: %s — %s (%s)\n", v.Symptom.ID, v.Symptom.Title, v.Symptom.TitleZH)
	fmt.Fprintf(&b, "  %d lines, %d bytes read", v.Input.Lines, v.Input.Bytes)
	if v.NCCLVersion != "" {
		fmt.Fprintf(&b, "; NCCL %s", v.NCCLVersion)
	}
	fmt.Fprintf(&b, "; model %s\n", v.Model)
	if v.Input.Truncated {
		b.WriteString("  input longer than the limit: only its start was read\n")
	}
	if v.Input.Binary != "" {
		fmt.Fprintf(&b, "  not read: %s\n", v.Input.Binary)
	}
	if len(v.Causes) > 0 {
		b.WriteString("likely causes:\n")
		for i, c := range v.Causes {
			fmt.Fprintf(&b, "  %d. %s: %s\n     why: %s\n", i+1, c.ID, c.Title, c.Why)
		}
	}
	if len(v.Next) > 0 {
		b.WriteString("next commands:\n")
		for _, c := range v.Next {
			fmt.Fprintf(&b, "  $ %s\n", c)
		}
	}
	if len(v.Evidence) > 0 {
		b.WriteString("evidence:\n")
		for _, e := range v.Evidence {
			fmt.Fprintf(&b, "  line %d (%s): %s\n", e.Line, e.Symptom, e.Says)
			if e.Versions != "" {
				fmt.Fprintf(&b, "    form of %s\n", e.Versions)
			}
			if e.Text != "" {
				fmt.Fprintf(&b, "    | %s\n", e.Text)
			}
		}
	}
	if len(v.Also) > 0 {
		fmt.Fprintf(&b, "also seen: %s\n", strings.Join(v.Also, ", "))
	}
	for _, n := range v.Needs {
		fmt.Fprintf(&b, "needs: %s\n", n)
	}
	fmt.Fprintf(&b, "chapters: %s\n", strings.Join(v.Symptom.Chapters, ", "))
	_, err := io.WriteString(w, b.String())
	return err
}
