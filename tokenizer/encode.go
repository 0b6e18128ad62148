package tokenizer

import (
	"strings"

	"golang.org/x/text/unicode/norm"
)

// EncodeOptions says how Encode treats a text.
type EncodeOptions struct {
	// AddBOS prepends the BOS id (when the vocabulary has one). EOS is
	// never appended.
	AddBOS bool

	// ParseSpecial makes special-token text written in the input (control
	// tokens such as "<|im_start|>", "<|start|>", "</s>", and unknown
	// ones such as "<unk>") become those tokens' ids, longest match first;
	// without it they are ordinary text. Prompts typed by a user are
	// normally encoded without it; text rendered by a chat template, which
	// writes the control tokens on purpose, with it. user_defined tokens
	// are matched either way, as in llama.cpp.
	ParseSpecial bool
}

// Encode tokenizes text as ordinary text (no special-token parsing). With
// addBOS the BOS id is prepended (when the vocabulary has one). It is
// EncodeWith(text, EncodeOptions{AddBOS: addBOS}).
func (t *Tokenizer) Encode(text string, addBOS bool) []int32 {
	return t.EncodeWith(text, EncodeOptions{AddBOS: addBOS})
}

// EncodeWith tokenizes text. Invalid UTF-8 never makes it fail: SPM keeps the
// raw bytes (as byte tokens), gpt2 reads each invalid byte as U+FFFD, as
// llama.cpp does.
//
// This is llama.cpp's llama_tokenize with add_special=o.AddBOS and
// parse_special=o.ParseSpecial.
func (t *Tokenizer) EncodeWith(text string, o EncodeOptions) []int32 {
	out := make([]int32, 0, len(text)/3+2)
	if o.AddBOS && t.bos >= 0 {
		out = append(out, t.bos)
	}
	if text == "" {
		return out
	}
	frags := t.partition(text, o.ParseSpecial)
	switch t.kind {
	case KindSPM:
		// llama.cpp prefixes a space to the first raw fragment and to every
		// fragment that follows a special token: "previous is special".
		prevSpecial := true
		for _, f := range frags {
			if f.id >= 0 {
				out = append(out, f.id)
				prevSpecial = true
				continue
			}
			s := f.text
			if t.spacePrefix && prevSpecial {
				s = " " + s
			}
			out = t.encodeSPM(strings.ReplaceAll(s, " ", spmSpace), out)
			prevSpecial = false
		}
	case KindBPE:
		for _, f := range frags {
			if f.id >= 0 {
				out = append(out, f.id)
				continue
			}
			s := f.text
			if t.nfc {
				// Hugging Face normalizes each piece between added tokens.
				s = norm.NFC.String(s)
			}
			out = t.encodeBPE(s, out)
		}
	}
	return out
}
