package plan_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/plan"
)

// base holds the plans the broken variants are made from.
type base struct {
	stories  *compiled
	embedded []byte // stories260K with its weights
	spans    map[string]plan.Span
}

func newBase(t testing.TB) *base {
	b := &base{stories: compileFile(t, shared.Path(t, "models/gguf/stories260K.gguf"), "reference")}
	b.embedded = encode(t, b.stories.plan, b.stories.model.Weights)
	spans, err := plan.Sections(b.embedded)
	require.NoError(t, err)
	b.spans = map[string]plan.Span{}
	for _, s := range spans {
		b.spans[s.Name] = s
	}
	return b
}

// flip changes one byte in the middle of a section.
func (b *base) flip(section string) []byte {
	d := bytes.Clone(b.embedded)
	s := b.spans[section]
	d[s.Offset+s.Length/2] ^= 0x20
	return d
}

// cut ends the file in the middle of a section.
func (b *base) cut(section string) []byte {
	s := b.spans[section]
	return bytes.Clone(b.embedded[:s.Offset+s.Length/2])
}

// edited writes the stories plan (embedded) with one section replaced.
func (b *base) edited(t testing.TB, section string, data []byte) []byte {
	var buf bytes.Buffer
	require.NoError(t, plan.WriteEdited(&buf, b.stories.plan, b.stories.model.Weights, map[string][]byte{section: data}))
	return buf.Bytes()
}

type brokenCase struct {
	name string
	data []byte                    // plan bytes; or
	file func(t *testing.T) string // a plan file made by the case
	open func(path string) error   // default: plan.Open's error
	kind error                     // the sentinel the error wraps
	want string                    // a substring of the error
}

func brokenCases(t *testing.T, b *base) []brokenCase {
	version := bytes.Clone(b.embedded)
	binary.LittleEndian.PutUint32(version[8:], plan.FormatVersion+1)
	trailing := append(bytes.Clone(b.embedded), 0)
	gguf, err := os.ReadFile(shared.Path(t, "models/gguf/stories260K.gguf"))
	require.NoError(t, err)
	checkTarget := func(target string) func(string) error {
		return func(path string) error {
			l, err := plan.Open(path)
			if err != nil {
				return err
			}
			defer l.Close()
			return l.Check(target)
		}
	}

	cases := []brokenCase{
		{name: "empty file", data: []byte{}, kind: plan.ErrNotPlan, want: "file is empty: not a plan"},
		{name: "not a plan", data: []byte("#!/bin/sh\necho hello\n"), kind: plan.ErrNotPlan, want: `not a plan file (it starts with "#!/bin/s", not "MNRVPLAN")`},
		{name: "a GGUF model", data: gguf, kind: plan.ErrNotPlan, want: "not a plan but a GGUF model file"},
		{name: "format version+1", data: version, kind: plan.ErrVersion, want: fmt.Sprintf("format version %d (this minervac reads version %d; recompile the model)", plan.FormatVersion+1, plan.FormatVersion)},
		{name: "cut in the magic", data: b.embedded[:5], kind: plan.ErrTruncated, want: "inside the magic"},
		{name: "cut in the fixed header", data: b.embedded[:17], kind: plan.ErrTruncated, want: "inside the 24-byte fixed header"},
		{name: "cut in the header", data: b.cut("header"), kind: plan.ErrTruncated, want: "truncated inside the header: it spans bytes [0, "},
		{name: "flip in the header", data: b.flip("header"), kind: plan.ErrChecksum, want: "checksum mismatch in the header"},
		{name: "trailing bytes", data: trailing, kind: plan.ErrCorrupt, want: "1 unexpected bytes after the end of the plan"},
		{name: "graph undecodable", data: b.edited(t, "graph", []byte("graph \"x\" {\n  %0 = bogus : f32[1]\n}\n")), kind: plan.ErrCorrupt, want: `section "graph" does not decode: 2:`},
		{name: "tokenizer undecodable", data: b.edited(t, "tokenizer", []byte{5, 0, 0, 0, 'l'}), kind: plan.ErrCorrupt, want: `section "tokenizer" does not decode: ends inside the model name`},
		{name: "tokenizer forged count", data: b.edited(t, "tokenizer", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff}), kind: plan.ErrCorrupt, want: `section "tokenizer" does not decode: ends inside the tokens count`},
		{name: "config undecodable", data: b.edited(t, "config", []byte(`{"config": 1}`)), kind: plan.ErrCorrupt, want: `section "config" does not decode: json`},
		{name: "config without context", data: b.edited(t, "config", []byte(`{"config": {}}`)), kind: plan.ErrCorrupt, want: `section "config" does not decode: default context 0 is not positive`},
		{name: "sampling undecodable", data: b.edited(t, "sampling", []byte(`{"temperature": -1}`)), kind: plan.ErrCorrupt, want: `section "sampling" does not decode: sampling temperature -1`},
		{name: "memory disagrees", data: b.edited(t, "memory", []byte(`{"arena_bytes_per_token": 1}`)), kind: plan.ErrCorrupt, want: `section "memory" disagrees with the graph`},
		{name: "missing tokenizer", data: b.edited(t, "tokenizer", nil), kind: plan.ErrCorrupt, want: `missing required section "tokenizer"`},
		{name: "missing weights", data: b.edited(t, "weights", nil), kind: plan.ErrCorrupt, want: `missing required section "weights" (the header says the weights are embedded)`},
		{name: "wrong target", file: func(t *testing.T) string {
			c := compileFile(t, shared.Path(t, "models/gguf/stories260K.gguf"), "cuda")
			path, _ := writePlan(t, c.plan, nil)
			return path
		}, open: checkTarget("reference"), kind: plan.ErrTarget, want: "compiled for target cuda, not reference: recompile with -target reference"},
		{name: "plan file missing", file: func(t *testing.T) string { return filepath.Join(t.TempDir(), "nope.bin") }, want: "no such file"},
	}
	for _, s := range []string{"graph", "tokenizer", "config", "sampling", "memory", "weights"} {
		cases = append(cases,
			brokenCase{name: "cut in " + s, data: b.cut(s), kind: plan.ErrTruncated, want: `truncated inside section "` + s + `": it spans bytes [`},
			brokenCase{name: "flip in " + s, data: b.flip(s), kind: plan.ErrChecksum, want: `checksum mismatch in section "` + s + `"`},
		)
	}
	return cases
}

// Every broken plan is a one-line error that says what is wrong.
func TestBrokenPlans(t *testing.T) {
	b := newBase(t)
	cases := brokenCases(t, b)
	require.GreaterOrEqual(t, len(cases), 12)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var path string
			if tc.file != nil {
				path = tc.file(t)
			} else {
				path = filepath.Join(t.TempDir(), "plan.bin")
				require.NoError(t, os.WriteFile(path, tc.data, 0o644))
			}
			open := tc.open
			if open == nil {
				open = func(path string) error {
					l, err := plan.Open(path)
					if err == nil {
						l.Close()
					}
					return err
				}
			}
			err := open(path)
			require.Error(t, err)
			if tc.kind != nil {
				require.ErrorIs(t, err, tc.kind)
			}
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "\n")
			require.Less(t, len(err.Error()), 400, "one short line: %s", err)
			t.Log(err)

			if tc.data != nil {
				// Parse, which Open uses, agrees without any file.
				_, perr := plan.Parse(tc.data, plan.ParseOptions{})
				require.ErrorIs(t, perr, tc.kind)
				require.ErrorContains(t, perr, tc.want)
			}
		})
	}
}

// Cutting a plan anywhere is an error, never a panic.
func TestEveryTruncation(t *testing.T) {
	c := compileFile(t, shared.Path(t, "models/gguf/stories260K.gguf"), "reference")
	data := encode(t, c.plan, nil)
	for n := range len(data) {
		_, err := plan.Parse(data[:n], plan.ParseOptions{})
		require.Error(t, err, "cut at %d", n)
	}
	_, err := plan.Parse(data, plan.ParseOptions{})
	require.NoError(t, err)
}

// Every byte of a plan is checked: changing any one is an error.
func TestEveryByteChecked(t *testing.T) {
	c := compileFile(t, shared.Path(t, "models/gguf/stories260K.gguf"), "reference")
	data := encode(t, c.plan, nil)
	for i := range data {
		data[i] ^= 0x01
		_, err := plan.Parse(data, plan.ParseOptions{})
		require.Error(t, err, "byte %d", i)
		data[i] ^= 0x01
	}
}
