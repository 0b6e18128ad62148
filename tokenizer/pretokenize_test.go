package tokenizer

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSplitters pins the word boundaries each pre-tokenizer draws on the
// cases the regexes spell out: contractions, digit groups, the lead
// character before a word, Unicode whitespace (NBSP, U+3000, U+2028, vertical
// tab, NEL, which Go's regexp would not count as \s), \s+(?!\S) leaving one
// space to the next word, and o200k's case classes. The goldens check the
// same splitters through whole vocabularies; this says where a failure is.
func TestSplitters(t *testing.T) {
	tests := []struct {
		pre  preTokenizer
		text string
		want []string
	}{
		{preGPT2, "I'm  here", []string{"I", "'m", " ", " here"}},
		{preGPT2, "IT'S", []string{"IT", "'", "S"}},

		{preLlama3, "IT'S we'Ll", []string{"IT", "'S", " we", "'Ll"}},
		{preLlama3, "1234567", []string{"123", "456", "7"}},
		{preLlama3, "a\u00a0\u00a0b", []string{"a", "\u00a0", "\u00a0b"}},
		{preLlama3, "x\u3000y\u2028z", []string{"x", "\u3000y", "\u2028z"}},
		{preLlama3, "a \v\n\n b", []string{"a", " \v\n\n", " b"}},
		{preLlama3, "a\u0085\u0085", []string{"a", "\u0085\u0085"}},
		{preLlama3, "end.\r\n\r\nNext", []string{"end", ".\r\n\r\n", "Next"}},
		{preLlama3, "(x)", []string{"(x", ")"}},
		{preQwen2, "1234 x", []string{"1", "2", "3", "4", " x"}},

		{preGPT4o, "HTTPServer iPhone", []string{"HTTPServer", " i", "Phone"}},
		{preGPT4o, "camelCase", []string{"camel", "Case"}},
		{preGPT4o, "ABC'S", []string{"ABC'S"}},
		{preGPT4o, "a/b//\nc", []string{"a", "/b", "//\n", "c"}},
		{preGPT4o, "1234567", []string{"123", "456", "7"}},
		{preGPT4o, "  \n  \n", []string{"  \n  \n"}},
		{preGPT4o, "x\u00a0\u00a0y", []string{"x", "\u00a0", "\u00a0y"}},
		// llama.cpp's adaptation: a combining mark is no letter, and a
		// non-ASCII letter is upper and lower case at once.
		{preGPT4o, "ne\u0301e", []string{"ne", "\u0301e"}},
		{preGPT4o, "aÉ", []string{"aÉ"}},
		// The real o200k regex: marks belong to words, case is Unicode's.
		{preO200k, "ne\u0301e", []string{"ne\u0301e"}},
		{preO200k, "aÉ", []string{"a", "É"}},
		{preO200k, "DON'ſ", []string{"DON'ſ"}},
		{preGPT4o, "DON'ſ", []string{"DON", "'ſ"}},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, tc.pre.split(tc.text), "pre %d, text %q", tc.pre, tc.text)
	}
}
