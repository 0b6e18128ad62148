package tokenizer_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/tokenizer"
)

// FuzzEncode: Encode never panics, every id is in the vocabulary, valid UTF-8
// round-trips through Decode, and the stream decoder agrees with Decode.
// Run it with e.g.
//
//	go test -run XXX -fuzz FuzzEncode -fuzztime 60s -fuzzminimizetime 5s ./tokenizer
//
// (minimizing an interesting input with the default 60 s budget can take up
// the whole run).
func FuzzEncode(f *testing.F) {
	for _, c := range readVocabTests(f, spmVocabPath) {
		f.Add(c.text)
	}
	for _, c := range readGolden(f, storiesGolden) {
		f.Add(c.Text)
	}
	for _, s := range streamTexts {
		f.Add(s)
	}
	for _, s := range []string{"\xff\xfe", "a\xc3", "\xed\xa0\x80", "\xc0\x80", "\xf4\x90\x80\x80", "'s 're  \t\n x"} {
		f.Add(s)
	}

	spm := loadTokenizer(f, storiesPath)
	gpt2 := loadTokenizer(f, gpt2VocabPath)

	f.Fuzz(func(t *testing.T, s string) {
		for _, tc := range []struct {
			name   string
			tok    *tokenizer.Tokenizer
			prefix string // what Decode adds in front: SPM's space prefix
		}{{"spm", spm, " "}, {"gpt2", gpt2, ""}} {
			ids := tc.tok.Encode(s, true)
			for _, id := range ids {
				require.True(t, id >= 0 && int(id) < tc.tok.VocabSize(), "%s: id %d", tc.name, id)
			}
			got := tc.tok.Decode(ids)
			if utf8.ValidString(s) {
				want := s
				if s != "" {
					want = tc.prefix + s
				}
				require.Equal(t, want, got, tc.name)
			}

			d := tc.tok.NewStreamDecoder()
			var sb strings.Builder
			for _, id := range ids {
				chunk := d.Add(id)
				require.True(t, utf8.ValidString(chunk), "%s: chunk %q", tc.name, chunk)
				sb.WriteString(chunk)
			}
			flushed := d.Flush()
			require.True(t, utf8.ValidString(flushed), "%s: flush %q", tc.name, flushed)
			sb.WriteString(flushed)
			if utf8.ValidString(got) {
				require.Equal(t, got, sb.String(), tc.name)
			}
		}
	})
}
