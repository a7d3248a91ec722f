package yamldecode

import (
	"errors"
	"testing"
)

type doc struct {
	Name  string `yaml:"name"`
	Count int    `yaml:"count"`
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		offset   int
		wantLine int
		wantErr  bool
	}{
		{name: "ok", in: "name: a\ncount: 3\n"},
		{name: "unknown field", in: "name: a\ncolour: red\n", wantLine: 2, wantErr: true},
		{name: "type error", in: "name: a\ncount: many\n", wantLine: 2, wantErr: true},
		{name: "offset applied", in: "name: a\n\ncount: x\n", offset: 1, wantLine: 4, wantErr: true},
		{name: "duplicate key", in: "name: a\nname: b\n", wantLine: 2, wantErr: true},
		{name: "syntax", in: "name: [a\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d doc
			err := Decode("f.yaml", []byte(tt.in), tt.offset, &d)
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v (%T), want *Error", err, err)
			}
			if e.File != "f.yaml" || e.Msg == "" {
				t.Errorf("got %+v", e)
			}
			if tt.wantLine != 0 && e.Line != tt.wantLine {
				t.Errorf("line = %d, want %d (%v)", e.Line, tt.wantLine, err)
			}
		})
	}
}
