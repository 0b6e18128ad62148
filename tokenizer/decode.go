package tokenizer

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// buildPieces computes every token's output bytes once (llama.cpp also
// caches them, in cache_token_to_piece).
func (t *Tokenizer) buildPieces() {
	t.pieceOff = make([]uint32, len(t.tokens)+1)
	t.pieceData = make([]byte, 0, len(t.tokens)*6)
	for id := range t.tokens {
		t.pieceData = t.appendPiece(t.pieceData, int32(id))
		t.pieceOff[id+1] = uint32(len(t.pieceData))
	}
}

// appendPiece is llama.cpp's token_to_piece with special=false.
func (t *Tokenizer) appendPiece(b []byte, id int32) []byte {
	text, a := t.tokens[id], t.attrs[id]
	switch {
	case a&(attrUnknown|attrControl) != 0:
		// Control and unknown tokens (<s>, </s>, <unk>, <|endoftext|>)
		// print nothing.
		return b
	case a&attrUserDefined != 0:
		return append(b, text...)
	case a&attrNormal != 0:
		if t.kind == KindSPM {
			return append(b, strings.ReplaceAll(text, spmSpace, " ")...)
		}
		return appendByteDecoded(b, text)
	case a&attrByte != 0:
		return append(b, byteTokenValue(text))
	}
	// Unused and undefined tokens print nothing either.
	return b
}

// byteTokenValue reads NN out of "<0xNN>" the way llama.cpp does (strtol on
// the two characters after "<0x": a malformed value reads as far as it can).
func byteTokenValue(text string) byte {
	if len(text) < 4 {
		return 0
	}
	hex := text[3:min(5, len(text))]
	for len(hex) > 0 {
		if v, err := strconv.ParseUint(hex, 16, 8); err == nil {
			return byte(v)
		}
		hex = hex[:len(hex)-1]
	}
	return 0
}

// appendByteDecoded reverses the gpt2 byte-to-unicode mapping. A code point
// outside the mapping is not a byte; llama.cpp writes a marker for it rather
// than failing, and so do we.
func appendByteDecoded(b []byte, text string) []byte {
	for _, c := range decodeCodepoints(text) {
		if c >= 0 && int(c) < len(unicodeToByte) && unicodeToByte[c] >= 0 {
			b = append(b, byte(unicodeToByte[c]))
			continue
		}
		b = append(b, "[UNK_BYTE_0x"...)
		for _, x := range appendCodepoint(nil, c) {
			b = fmt.Appendf(b, "%02x", x)
		}
		b = append(b, text...)
		b = append(b, ']')
	}
	return b
}

// piece returns the cached output bytes of id (nil outside the vocabulary).
// The slice aliases the cache and must not be modified.
func (t *Tokenizer) piece(id int32) []byte {
	if id < 0 || int(id) >= len(t.tokens) {
		return nil
	}
	return t.pieceData[t.pieceOff[id]:t.pieceOff[id+1]:t.pieceOff[id+1]]
}

// DecodeOptions says how token ids become text.
type DecodeOptions struct {
	// Special writes control and unknown tokens as their text ("<|end|>",
	// "<s>") instead of nothing: llama.cpp's token_to_piece with
	// special=true. It is what a harmony output parser or a "decode
	// round-trips the text" check on text with special tokens needs.
	Special bool
}

// pieceWith is piece, with control and unknown tokens written as their text
// when o.Special is set.
func (t *Tokenizer) pieceWith(id int32, o DecodeOptions) []byte {
	if o.Special && id >= 0 && int(id) < len(t.tokens) && t.attrs[id]&(attrUnknown|attrControl) != 0 {
		return []byte(t.tokens[id])
	}
	return t.piece(id)
}

// TokenBytes returns the bytes token id contributes to output text: for SPM
// "▁" becomes " " and <0xNN> the byte NN; for gpt2 the byte-level mapping is
// reversed; control, unknown and unused tokens give nothing, and so does an
// id outside the vocabulary. A token may hold part of a UTF-8 character.
// The result is a fresh slice.
func (t *Tokenizer) TokenBytes(id int32) []byte {
	return append([]byte(nil), t.piece(id)...)
}

// Decode concatenates the output bytes of ids. Nothing is stripped (an SPM
// prompt decodes with its leading space) and invalid UTF-8, e.g. from a byte
// token cut off mid-character, is kept as raw bytes in the string. Ids outside
// the vocabulary contribute nothing.
func (t *Tokenizer) Decode(ids []int32) string {
	return t.DecodeWith(ids, DecodeOptions{})
}

// DecodeWith is Decode with options.
func (t *Tokenizer) DecodeWith(ids []int32, o DecodeOptions) string {
	n := 0
	for _, id := range ids {
		n += len(t.pieceWith(id, o))
	}
	b := make([]byte, 0, n)
	for _, id := range ids {
		b = append(b, t.pieceWith(id, o)...)
	}
	return string(b)
}

// StreamDecoder turns tokens into text one at a time without ever splitting a
// UTF-8 character: byte tokens that hold the first bytes of a character are
// held back until the rest arrives. Everything it returns is valid UTF-8.
// A StreamDecoder is not safe for concurrent use.
type StreamDecoder struct {
	t       *Tokenizer
	o       DecodeOptions
	pending []byte // an incomplete UTF-8 sequence, at most 3 bytes
}

// NewStreamDecoder starts a stream of tokens.
func (t *Tokenizer) NewStreamDecoder() *StreamDecoder {
	return &StreamDecoder{t: t}
}

// NewStreamDecoderWith starts a stream of tokens decoded with options (e.g.
// Special, so that a harmony parser sees "<|channel|>" and "<|return|>").
func (t *Tokenizer) NewStreamDecoderWith(o DecodeOptions) *StreamDecoder {
	return &StreamDecoder{t: t, o: o}
}

// Add appends token id and returns the text that is complete so far and not
// returned before. Bytes that cannot start or continue a character come out
// as U+FFFD right away; a valid but unfinished character stays pending.
func (d *StreamDecoder) Add(id int32) string {
	d.pending = append(d.pending, d.t.pieceWith(id, d.o)...)
	var out strings.Builder
	p := d.pending
	for len(p) > 0 {
		if !utf8.FullRune(p) {
			break // a prefix of a valid character: wait for more bytes
		}
		r, size := utf8.DecodeRune(p)
		if r == utf8.RuneError && size == 1 {
			out.WriteRune(utf8.RuneError)
			p = p[invalidLen(p):]
			continue
		}
		out.Write(p[:size])
		p = p[size:]
	}
	d.pending = append(d.pending[:0], p...)
	return out.String()
}

// Flush returns what is still pending, an unfinished character, as U+FFFD,
// and resets the decoder for a new stream.
func (d *StreamDecoder) Flush() string {
	var out strings.Builder
	for p := d.pending; len(p) > 0; p = p[invalidLen(p):] {
		out.WriteRune(utf8.RuneError)
	}
	d.pending = d.pending[:0]
	return out.String()
}

// invalidLen is how many bytes at the start of p (which does not begin with a
// valid character) one U+FFFD replaces: the longest prefix that could still
// have become a character, at least one byte. This is the "maximal subpart"
// rule of Unicode and of Python's errors="replace", which the golden
// gen_text files use.
func invalidLen(p []byte) int {
	for k := min(len(p), 3); k > 1; k-- {
		if !utf8.FullRune(p[:k]) {
			return k
		}
	}
	return 1
}

// TemplateSpecials are the texts of the special tokens this tokenizer has,
// under the names chat templates use for them (bos_token, eos_token,
// unk_token, pad_token: transformers' special_tokens_map).
func (t *Tokenizer) TemplateSpecials() map[string]string {
	m := map[string]string{}
	for k, id := range map[string]int32{"bos_token": t.BOS(), "eos_token": t.EOS(), "unk_token": t.UNK(), "pad_token": t.PAD()} {
		if id >= 0 {
			m[k] = t.DecodeWith([]int32{id}, DecodeOptions{Special: true})
		}
	}
	return m
}
