package tokenizer

import "strings"

// fragment is a piece of the input: raw text to tokenize, or (when id >= 0) a
// user_defined token that was found literally in the text.
type fragment struct {
	text string
	id   int32
}

// Encode tokenizes text. With addBOS the BOS id is prepended (when the
// vocabulary has one); EOS is never appended. Special-token text such as
// "<s>" is ordinary text. Invalid UTF-8 never makes Encode fail: SPM keeps the
// raw bytes (as byte tokens), gpt2 reads each invalid byte as U+FFFD, as
// llama.cpp does.
//
// This is llama.cpp's llama_tokenize with add_special=addBOS and
// parse_special=false.
func (t *Tokenizer) Encode(text string, addBOS bool) []int32 {
	out := make([]int32, 0, len(text)/3+2)
	if addBOS && t.bos >= 0 {
		out = append(out, t.bos)
	}
	if text == "" {
		return out
	}
	frags := t.partition(text)
	switch t.kind {
	case KindSPM:
		// llama.cpp prefixes a space to the first raw fragment and to every
		// fragment that follows a (user_defined) token: "previous is special".
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
			out = t.encodeBPE(f.text, out)
		}
	}
	return out
}

// partition cuts user_defined tokens out of text (llama.cpp's
// tokenizer_st_partition with parse_special=false): each token, longest
// first, is searched in what is still raw text, leftmost match first.
func (t *Tokenizer) partition(text string) []fragment {
	frags := []fragment{{text: text, id: -1}}
	for _, id := range t.userDefined {
		tok := t.tokens[id]
		found := false
		for _, f := range frags {
			if f.id < 0 && strings.Contains(f.text, tok) {
				found = true
				break
			}
		}
		if !found {
			continue // the common case: keep the list as it is
		}
		var next []fragment
		for _, f := range frags {
			if f.id >= 0 || !strings.Contains(f.text, tok) {
				next = append(next, f)
				continue
			}
			s := f.text
			for {
				i := strings.Index(s, tok)
				if i < 0 {
					break
				}
				if i > 0 {
					next = append(next, fragment{text: s[:i], id: -1})
				}
				next = append(next, fragment{id: id})
				s = s[i+len(tok):]
			}
			if s != "" {
				next = append(next, fragment{text: s, id: -1})
			}
		}
		frags = next
	}
	return frags
}
