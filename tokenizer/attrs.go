package tokenizer

// Token attribute bits, mirroring llama_token_attr. A token can carry more
// than one (llama.cpp adds "control" to end-of-generation tokens by name).
const (
	attrUndefined   uint8 = 0
	attrUnknown     uint8 = 1 << 0
	attrUnused      uint8 = 1 << 1
	attrNormal      uint8 = 1 << 2
	attrControl     uint8 = 1 << 3
	attrUserDefined uint8 = 1 << 4
	attrByte        uint8 = 1 << 5
)

// eogNames are token texts that llama.cpp always treats as end-of-generation
// and forces to be control tokens, whatever type the GGUF gives them (see
// llama_vocab::impl::load). It matters for output: control tokens print
// nothing, and they are not matched in input text.
var eogNames = map[string]bool{
	"<|eot_id|>": true, "<|im_end|>": true, "<|end|>": true, "<|return|>": true,
	"<|call|>": true, "<|flush|>": true, "<|calls|>": true, "<end_of_turn>": true,
	"<|endoftext|>": true, "</s>": true, "<|eom_id|>": true, "<EOT>": true,
	"_<EOT>": true, "[EOT]": true, "[EOS]": true, "<|end_of_text|>": true,
	"<end_of_utterance>": true, "<eos>": true, "<turn|>": true,
	"<|tool_response>": true, "<｜end▁of▁sentence｜>": true, "[e~[": true,
}

// fimNames lists, per fill-in-the-middle role (prefix, suffix, middle, pad,
// repo, file separator), the token texts llama.cpp recognises. When the GGUF
// names no token for a role, llama.cpp takes the first match and forces it to
// be a control token; we take the lowest id (llama.cpp's pick follows hash
// map order, which only matters if a vocabulary has two candidates).
var fimNames = [][]string{
	{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"},
	{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"},
	{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"},
	{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"},
	{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"},
	{"<|file_sep|>"},
}

// typeAttr maps a GGUF token type to llama.cpp's attribute bits.
func typeAttr(tt TokenType) uint8 {
	switch tt {
	case TypeNormal:
		return attrNormal
	case TypeUnknown:
		return attrUnknown
	case TypeControl:
		return attrControl
	case TypeUserDefined:
		return attrUserDefined
	case TypeUnused:
		return attrUnused
	case TypeByte:
		return attrByte
	}
	return attrUndefined
}

// alwaysUserDefined are the gpt-oss (o200k_harmony) tokens the reference
// engine makes plain USER_DEFINED tokens whatever the vocabulary says, so
// that they are always printed and always matched in input text, even
// without special-token parsing (ik_llama.cpp: "quick hack for gpt-oss, always
// render these tokens"). The goldens of o200k-harmony-special.jsonl show it.
var alwaysUserDefined = []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}

// assignAttrs gives every token its llama.cpp attributes: the GGUF type, then
// the overrides llama_vocab::impl::load applies by token text, in its order.
// It also fills t.eog, the end-of-generation set.
func (t *Tokenizer) assignAttrs() {
	t.attrs = make([]uint8, len(t.tokens))
	for i, tt := range t.types {
		t.attrs[i] = typeAttr(tt)
	}
	t.eog = map[int32]bool{}

	// Fill-in-the-middle tokens found by name become control; pad, repo
	// and file separator also end generation.
	for role, names := range fimNames {
		best := int32(-1)
		for _, name := range names {
			if id, ok := t.ids[name]; ok && (best < 0 || id < best) {
				best = id
			}
		}
		if best >= 0 {
			t.attrs[best] |= attrControl
			if role >= 3 {
				t.eog[best] = true
			}
		}
	}
	for name := range eogNames {
		if id, ok := t.ids[name]; ok {
			t.attrs[id] |= attrControl
			t.eog[id] = true
		}
	}
	for _, name := range alwaysUserDefined {
		if id, ok := t.ids[name]; ok {
			t.attrs[id] = attrUserDefined
		}
	}
	if t.eos >= 0 {
		t.eog[t.eos] = true
	}

	// In a harmony vocabulary (<|return|> and <|call|>, or solar-open's
	// <|calls|> and <|flush|>) <|end|> closes a message, not the
	// generation: the reference takes it out of the EOG set and makes it a
	// plain USER_DEFINED token, so it prints and is matched in text.
	has := func(name string) bool {
		id, ok := t.ids[name]
		return ok && t.eog[id]
	}
	call := has("<|call|>") || has("<|calls|>")
	if end, ok := t.ids["<|end|>"]; ok && t.eog[end] && (has("<|return|>") && call || call && has("<|flush|>")) {
		delete(t.eog, end)
		t.attrs[end] = attrUserDefined
	}
	// Gemma 4 and PaddleOCR: with <|tool_response>, </s> is an ordinary
	// token.
	if s, ok := t.ids["</s>"]; ok && t.eog[s] && has("<|tool_response>") {
		delete(t.eog, s)
		t.attrs[s] = attrNormal
	}
}

// IsEOG reports whether token id ends generation, as llama.cpp's
// llama_vocab_is_eog says: EOS, the end-of-turn tokens it knows by name
// (<|eot_id|>, <|im_end|>, <|return|>, <|call|>, <|endoftext|> …) and the
// FIM pad/repo/separator tokens. In a harmony vocabulary <|end|> is not one.
func (t *Tokenizer) IsEOG(id int32) bool { return t.eog[id] }
