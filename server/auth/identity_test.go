package auth

import (
	"strings"
	"testing"
)

func TestNormalizeEmail(t *testing.T) {
	long := strings.Repeat("a", 64) + "@" + strings.Repeat("b", 185) + ".org" // 254 bytes
	tests := []struct {
		in      string
		want    string
		wantErr string
	}{
		{in: "Ada@Example.ORG", want: "ada@example.org"},
		{in: "  bob.smith+lab@gpu.example.org \n", want: "bob.smith+lab@gpu.example.org"},
		{in: "user@localhost", want: "user@localhost"},
		{in: "Émile@exemple.fr", want: "émile@exemple.fr"},
		{in: long, want: long},
		{in: "", wantErr: "empty"},
		{in: "   ", wantErr: "empty"},
		{in: "a" + long, wantErr: "too long: 255"},
		{in: strings.Repeat("a", 65) + "@example.org", wantErr: "before @ is 65"},
		{in: "ada", wantErr: "not an email address"},
		{in: "ada@", wantErr: "not an email address"},
		{in: "@example.org", wantErr: "not an email address"},
		{in: "Ada <ada@example.org>", wantErr: "not an email address"},
		{in: "<ada@example.org>", wantErr: "not an email address"},
		{in: "ada@example.org, eve@example.org", wantErr: "not an email address"},
		{in: "ada@example.org (comment)", wantErr: "not an email address"},
		{in: "ada@exa mple.org", wantErr: "not an email address"},
		{in: "ada@[127.0.0.1]", wantErr: "not a host name"},
		{in: "ada@example..org", wantErr: "not"},
		{in: "ada@example.org.", wantErr: "not"},
	}
	for _, tc := range tests {
		got, err := NormalizeEmail(tc.in)
		if tc.wantErr == "" {
			if err != nil || got != tc.want {
				t.Errorf("NormalizeEmail(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("NormalizeEmail(%q) = %q, %v; want error containing %q", tc.in, got, err, tc.wantErr)
		}
	}
}

func TestValidateName(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr string
	}{
		{in: "Ada Lovelace", want: "Ada Lovelace"},
		{in: "  Grace Hopper\t", want: "Grace Hopper"},
		{in: "李小龙", want: "李小龙"},
		{in: "José 👩‍💻", want: "José 👩‍💻"}, // ZWJ emoji sequence is not a control
		{in: strings.Repeat("é", 64), want: strings.Repeat("é", 64)},
		{in: strings.Repeat("é", 65), wantErr: "too long: 65 characters, at most 64"},
		{in: "", wantErr: "empty"},
		{in: " \t ", wantErr: "empty"},
		{in: "Ada\nLovelace", wantErr: "control character (U+000A) at byte 3"},
		{in: "Ada\x00", wantErr: "control character (U+0000)"},
		{in: "Ada\u202Eecalevol", wantErr: "control character (U+202E)"},
		{in: "Ada\u2066x", wantErr: "U+2066"},
		{in: "Ada\x9b", wantErr: "not valid UTF-8"},
	}
	for _, tc := range tests {
		got, err := ValidateName(tc.in)
		if tc.wantErr == "" {
			if err != nil || got != tc.want {
				t.Errorf("ValidateName(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("ValidateName(%q) = %q, %v; want error containing %q", tc.in, got, err, tc.wantErr)
		}
	}
}
