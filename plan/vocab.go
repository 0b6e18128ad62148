package plan

import (
	"fmt"
	"math"

	"github.com/minerva-llm/minerva/tokenizer"
)

// nilList marks a nil slice in the tokenizer section, so that a vocabulary
// round-trips exactly (nil scores mean "all 0", an empty list does not exist).
const nilList = math.MaxUint32

// Vocabulary flag bits.
const (
	vocabAddBOS = 1 << iota
	vocabAddEOS
	vocabNoSpacePrefix
	vocabFlags = vocabAddBOS | vocabAddEOS | vocabNoSpacePrefix
)

// encodeVocab writes the tokenizer section (layout in doc.go). Binary rather
// than JSON: token texts need not be valid UTF-8 and scores may be infinite,
// and both must survive exactly.
func encodeVocab(v tokenizer.Vocab) ([]byte, error) {
	e := &enc{}
	e.str(v.Model)
	e.str(v.Pre)
	lists := []struct {
		name  string
		n     int
		isNil bool
	}{
		{"tokens", len(v.Tokens), v.Tokens == nil},
		{"scores", len(v.Scores), v.Scores == nil},
		{"types", len(v.Types), v.Types == nil},
		{"merges", len(v.Merges), v.Merges == nil},
	}
	for _, l := range lists {
		if uint64(l.n) >= nilList {
			return nil, fmt.Errorf("vocabulary has too many %s (%d)", l.name, l.n)
		}
	}
	listLen := func(n int, isNil bool) {
		if isNil {
			e.u32(nilList)
		} else {
			e.u32(uint32(n))
		}
	}
	listLen(len(v.Tokens), v.Tokens == nil)
	for _, s := range v.Tokens {
		e.str(s)
	}
	listLen(len(v.Scores), v.Scores == nil)
	for _, f := range v.Scores {
		e.u32(math.Float32bits(f))
	}
	listLen(len(v.Types), v.Types == nil)
	for _, t := range v.Types {
		e.i32(t)
	}
	listLen(len(v.Merges), v.Merges == nil)
	for _, s := range v.Merges {
		e.str(s)
	}
	for _, id := range []int32{v.BOS, v.EOS, v.UNK, v.PAD} {
		e.i32(id)
	}
	var flags uint8
	if v.AddBOS {
		flags |= vocabAddBOS
	}
	if v.AddEOS {
		flags |= vocabAddEOS
	}
	if v.NoSpacePrefix {
		flags |= vocabNoSpacePrefix
	}
	e.u8(flags)
	return e.b, nil
}

// decodeVocab reads the tokenizer section. Every count is checked against
// the bytes left before a slice is made.
func decodeVocab(b []byte) (tokenizer.Vocab, error) {
	d := &dec{b: b}
	var v tokenizer.Vocab
	v.Model = d.str("model name")
	v.Pre = d.str("pre-tokenizer name")
	// list reads a count (nilList: nil) for elements of at least size bytes.
	list := func(size int, what string) (n int, isNil bool) {
		if d.short {
			return 0, true
		}
		if d.rem() >= 4 && d.b[d.off] == 0xff && d.b[d.off+1] == 0xff && d.b[d.off+2] == 0xff && d.b[d.off+3] == 0xff {
			d.off += 4
			return 0, true
		}
		return d.count(size, what+" count"), false
	}
	if n, isNil := list(4, "tokens"); !isNil {
		v.Tokens = make([]string, n)
		for i := range v.Tokens {
			v.Tokens[i] = d.str("token text")
		}
	}
	if n, isNil := list(4, "scores"); !isNil {
		v.Scores = make([]float32, n)
		for i := range v.Scores {
			v.Scores[i] = math.Float32frombits(d.u32("score"))
		}
	}
	if n, isNil := list(4, "token types"); !isNil {
		v.Types = make([]int32, n)
		for i := range v.Types {
			v.Types[i] = d.i32("token type")
		}
	}
	if n, isNil := list(4, "merges"); !isNil {
		v.Merges = make([]string, n)
		for i := range v.Merges {
			v.Merges[i] = d.str("merge")
		}
	}
	v.BOS, v.EOS, v.UNK, v.PAD = d.i32("BOS id"), d.i32("EOS id"), d.i32("UNK id"), d.i32("PAD id")
	flags := d.u8("flags")
	switch {
	case d.short:
		return tokenizer.Vocab{}, fmt.Errorf("ends inside the %s at byte %d of %d", d.what, d.off, len(b))
	case d.rem() != 0:
		return tokenizer.Vocab{}, fmt.Errorf("%d bytes left over after the vocabulary", d.rem())
	case flags&^vocabFlags != 0:
		return tokenizer.Vocab{}, fmt.Errorf("unknown flags %#x", flags)
	}
	v.AddBOS = flags&vocabAddBOS != 0
	v.AddEOS = flags&vocabAddEOS != 0
	v.NoSpacePrefix = flags&vocabNoSpacePrefix != 0
	return v, nil
}
