// Package yamldecode decodes commlab's YAML files strictly (unknown fields are errors)
// and reports every problem as file:line:column, the form editors jump to.
package yamldecode

import (
	"errors"
	"fmt"

	"github.com/goccy/go-yaml"
)

// Error is a decoding problem at a position in a file.
type Error struct {
	File   string
	Line   int // 1-based; 0 when unknown
	Column int // 1-based; 0 when unknown
	Msg    string
}

func (e *Error) Error() string {
	switch {
	case e.Line > 0 && e.Column > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	default:
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
}

// Decode unmarshals data into v, rejecting unknown fields and duplicate keys.
// lineOffset is added to reported lines, for YAML embedded in a larger file
// (front matter starts on line 2 of a chapter, so its offset is 1).
func Decode(file string, data []byte, lineOffset int, v any) error {
	err := yaml.UnmarshalWithOptions(data, v, yaml.Strict(), yaml.DisallowUnknownField())
	if err == nil {
		return nil
	}
	var ye yaml.Error
	if errors.As(err, &ye) {
		e := &Error{File: file, Msg: ye.GetMessage()}
		if tok := ye.GetToken(); tok != nil && tok.Position != nil {
			e.Line = tok.Position.Line + lineOffset
			e.Column = tok.Position.Column
		}
		return e
	}
	return &Error{File: file, Line: 1 + lineOffset, Msg: err.Error()}
}
