package tokenizer

import (
	"errors"
	"fmt"
)

// hfNode is one component of a tokenizer.json pipeline (normalizer,
// pre-tokenizer, post-processor or decoder): every kind's fields in one
// struct, since only the few kinds below are understood.
type hfNode struct {
	Type string `json:"type"`

	// Sequence
	Normalizers   []hfNode `json:"normalizers"`
	Pretokenizers []hfNode `json:"pretokenizers"`
	Processors    []hfNode `json:"processors"`
	Decoders      []hfNode `json:"decoders"`

	Prepend  string     `json:"prepend"` // Prepend normalizer
	Pattern  *hfPattern `json:"pattern"` // Replace, Split
	Content  string     `json:"content"` // Replace, Strip decoder
	Behavior string     `json:"behavior"`
	Invert   bool       `json:"invert"`

	AddPrefixSpace bool  `json:"add_prefix_space"` // ByteLevel
	UseRegex       *bool `json:"use_regex"`        // ByteLevel; absent means true

	Start int `json:"start"` // Strip decoder
	Stop  int `json:"stop"`

	Single []hfTemplatePiece `json:"single"` // TemplateProcessing
}

type hfPattern struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

type hfTemplatePiece struct {
	SpecialToken *struct {
		ID string `json:"id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID string `json:"id"`
	} `json:"Sequence"`
}

// describe names a component for an error message.
func (n *hfNode) describe() string {
	if n.Type == "" {
		return "(without a type)"
	}
	return fmt.Sprintf("%q", n.Type)
}

// flatten returns the components of a Sequence (recursively), or n itself.
func (n *hfNode) flatten() []*hfNode {
	if n == nil {
		return nil
	}
	if n.Type != "Sequence" {
		return []*hfNode{n}
	}
	var out []*hfNode
	for _, list := range [][]hfNode{n.Normalizers, n.Pretokenizers, n.Processors, n.Decoders} {
		for i := range list {
			out = append(out, list[i].flatten()...)
		}
	}
	return out
}

// hfIsByteLevel says whether the pre-tokenizer makes a byte-level BPE.
func hfIsByteLevel(pre *hfNode) (bool, error) {
	for _, n := range pre.flatten() {
		if n.Type == "ByteLevel" {
			return true, nil
		}
	}
	return false, nil
}

// hfSplitRegexes maps the Split regexes we have a splitter for to the
// pre-tokenizer names New knows, given ignore_merges. The regexes are those
// the models' tokenizer.json files carry, plus llama.cpp's ASCII-case
// spellings of the same rules.
var hfSplitRegexes = map[string]func(ignoreMerges bool) string{
	// GPT-2 (ByteLevel's own regex, written out as a Split).
	`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`: func(bool) string { return "gpt-2" },
	`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`:     func(bool) string { return "gpt-2" },
	// Llama-3: with ignore_merges (Llama-3 itself) llama.cpp's llama-bpe,
	// without it the same regex as dbrx/smaug-bpe.
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`:                              llama3Pre,
	`(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: llama3Pre,
	// Qwen2 (single digits).
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`:                              func(bool) string { return "qwen2" },
	`(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: func(bool) string { return "qwen2" },
	// o200k (GPT-4o, gpt-oss): the real regex, matched exactly.
	`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`: func(bool) string { return preO200kName },
}

func llama3Pre(ignoreMerges bool) string {
	if ignoreMerges {
		return "llama-bpe"
	}
	return "smaug-bpe"
}

// hfByteLevelPre maps a byte-level pre-tokenizer to a pre-tokenizer name:
// ByteLevel with its own (GPT-2) regex, or Split(known regex, Isolated)
// followed by ByteLevel without a regex.
func hfByteLevelPre(pre *hfNode, ignoreMerges bool) (string, error) {
	parts := pre.flatten()
	last := parts[len(parts)-1]
	if last.Type != "ByteLevel" {
		return "", fmt.Errorf("pre-tokenizer %s after ByteLevel is not supported", last.describe())
	}
	if last.AddPrefixSpace {
		return "", errors.New("ByteLevel add_prefix_space is not supported")
	}
	useRegex := last.UseRegex == nil || *last.UseRegex
	switch {
	case len(parts) == 1 && useRegex:
		return "gpt-2", nil
	case len(parts) == 2 && !useRegex && parts[0].Type == "Split":
		s := parts[0]
		if s.Pattern == nil || s.Pattern.Regex == nil {
			return "", errors.New("a Split pre-tokenizer without a regex pattern is not supported")
		}
		if s.Behavior != "Isolated" || s.Invert {
			return "", fmt.Errorf("Split behavior %q (invert %v) is not supported (only Isolated)", s.Behavior, s.Invert)
		}
		name, ok := hfSplitRegexes[*s.Pattern.Regex]
		if !ok {
			return "", fmt.Errorf("Split regex %q is not one of the known pre-tokenizers (GPT-2, Llama-3, Qwen2, o200k)", *s.Pattern.Regex)
		}
		return name(ignoreMerges), nil
	}
	var types []string
	for _, p := range parts {
		types = append(types, p.describe())
	}
	return "", fmt.Errorf("pre-tokenizer sequence %v is not supported (only ByteLevel, or Split then ByteLevel without its regex)", types)
}

// hfByteLevelNormalizer accepts no normalizer or NFC (Qwen's) for byte-level
// BPE and reports whether it is NFC.
func hfByteLevelNormalizer(n *hfNode) (bool, error) {
	nfc := false
	for _, p := range n.flatten() {
		if p.Type != "NFC" || nfc {
			return false, fmt.Errorf("normalizer %s is not supported for byte-level BPE (only NFC)", p.describe())
		}
		nfc = true
	}
	return nfc, nil
}

// hfSPMNormalizer accepts the legacy SentencePiece normalizer, Prepend("▁")
// (optional) then Replace(" " → "▁"), and reports whether it prepends: that
// is llama.cpp's add_space_prefix, applied to every piece between special
// tokens, as Hugging Face normalizes each such piece.
func hfSPMNormalizer(n *hfNode) (bool, error) {
	parts := n.flatten()
	prepend := len(parts) > 0 && parts[0].Type == "Prepend"
	if prepend {
		if parts[0].Prepend != spmSpace {
			return false, fmt.Errorf("Prepend normalizer of %q is not supported (only %q)", parts[0].Prepend, spmSpace)
		}
		parts = parts[1:]
	}
	if len(parts) != 1 || parts[0].Type != "Replace" || parts[0].Pattern == nil ||
		parts[0].Pattern.String == nil || *parts[0].Pattern.String != " " || parts[0].Content != spmSpace {
		return false, errors.New(`normalizer is not SentencePiece's Prepend("▁") + Replace(" " → "▁"), the only one supported without ByteLevel`)
	}
	return prepend, nil
}

// hfCheckDecoder makes sure the decoder is the one that undoes the kind's
// encoding, which is what Decode does: ByteLevel for byte-level BPE;
// Replace("▁" → " "), ByteFallback, Fuse and Strip of the prefixed space
// (or Metaspace) for SentencePiece style. (Decode keeps the prefixed space,
// as llama.cpp does; a Strip decoder would drop it.)
func hfCheckDecoder(d *hfNode, byteLevel bool) error {
	parts := d.flatten()
	if len(parts) == 0 {
		return errors.New("there is no decoder")
	}
	for _, p := range parts {
		ok := false
		switch p.Type {
		case "ByteLevel":
			ok = byteLevel
		case "Replace":
			ok = !byteLevel && p.Pattern != nil && p.Pattern.String != nil && *p.Pattern.String == spmSpace && p.Content == " "
		case "ByteFallback", "Fuse", "Metaspace":
			ok = !byteLevel
		case "Strip":
			ok = !byteLevel && p.Content == " " && p.Start <= 1 && p.Stop == 0
		}
		if !ok {
			return fmt.Errorf("decoder %s is not supported for this model", p.describe())
		}
	}
	return nil
}

// hfTemplateEnds returns the special tokens a TemplateProcessing
// post-processor puts before and after a single sequence ("" for none).
// ByteLevel post-processing only adjusts offsets.
func hfTemplateEnds(pp *hfNode) (first, last string, err error) {
	for _, p := range pp.flatten() {
		switch p.Type {
		case "ByteLevel":
		case "TemplateProcessing":
			if len(p.Single) > 1 {
				if s := p.Single[0].SpecialToken; s != nil {
					first = s.ID
				}
				if s := p.Single[len(p.Single)-1].SpecialToken; s != nil {
					last = s.ID
				}
			}
		default:
			return "", "", fmt.Errorf("post-processor %s is not supported", p.describe())
		}
	}
	return first, last, nil
}
