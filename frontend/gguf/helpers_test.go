package gguf

import (
	"encoding/binary"
	"os"
	"testing"

	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/stretchr/testify/require"
)

// realFiles are every GGUF file in the shared data, relative to shared/.
var realFiles = []string{
	"models/gguf/stories260K.gguf",
	"models/gguf/llama-2-tiny-random.gguf",
	"models/gguf/vocab/ggml-vocab-gpt-2.gguf",
	"models/gguf/vocab/ggml-vocab-llama-spm.gguf",
	"models/gguf/synthetic/gptoss-g1-mxfp4.gguf",
	"models/gguf/synthetic/gptoss-g1-q8emb.gguf",
	"models/gguf/synthetic/llama-p-F16.gguf",
	"models/gguf/synthetic/llama-p-F32.gguf",
	"models/gguf/synthetic/llama-p-Q2_K.gguf",
	"models/gguf/synthetic/llama-p-Q3_K.gguf",
	"models/gguf/synthetic/llama-p-Q4_0.gguf",
	"models/gguf/synthetic/llama-p-Q4_1.gguf",
	"models/gguf/synthetic/llama-p-Q4_K.gguf",
	"models/gguf/synthetic/llama-p-Q5_0.gguf",
	"models/gguf/synthetic/llama-p-Q5_1.gguf",
	"models/gguf/synthetic/llama-p-Q5_K.gguf",
	"models/gguf/synthetic/llama-p-Q6_K.gguf",
	"models/gguf/synthetic/llama-p-Q8_0.gguf",
	"models/gguf/synthetic/llama-spm32k-f32.gguf",
}

const stories = "models/gguf/stories260K.gguf"

func readShared(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(shared.Path(t, rel))
	require.NoError(t, err)
	return b
}

// layout records where the fields of a valid file are. It is a second,
// deliberately naive walker (no checks at all), so that corruption tests
// do not depend on the parser they test to find their targets.
type layout struct {
	kvs       []kvPos
	tensors   []tensorPos
	headerEnd int // end of the last tensor info, where the padding starts
}

type kvPos struct {
	key               string
	at, typeAt, valAt int // start of key length, value type, value
	end               int
}

type tensorPos struct {
	name                            string
	at, ndAt, dimsAt, typeAt, offAt int
	end                             int
}

func walk(t testing.TB, b []byte) layout {
	t.Helper()
	le := binary.LittleEndian
	off := 24
	u32 := func() uint32 { v := le.Uint32(b[off:]); off += 4; return v }
	u64 := func() uint64 { v := le.Uint64(b[off:]); off += 8; return v }
	str := func() string { n := int(u64()); s := string(b[off : off+n]); off += n; return s }
	var value func(typ uint32)
	value = func(typ uint32) {
		switch ValueType(typ) {
		case TypeString:
			str()
		case TypeArray:
			et := u32()
			n := int(u64())
			for i := 0; i < n; i++ {
				value(et)
			}
		default:
			off += ValueType(typ).fixedSize()
		}
	}
	var l layout
	nt, nkv := int(le.Uint64(b[8:])), int(le.Uint64(b[16:]))
	for i := 0; i < nkv; i++ {
		var p kvPos
		p.at = off
		p.key = str()
		p.typeAt = off
		typ := u32()
		p.valAt = off
		value(typ)
		p.end = off
		l.kvs = append(l.kvs, p)
	}
	for i := 0; i < nt; i++ {
		var p tensorPos
		p.at = off
		p.name = str()
		p.ndAt = off
		nd := int(u32())
		p.dimsAt = off
		off += 8 * nd
		p.typeAt = off
		off += 4
		p.offAt = off
		off += 8
		p.end = off
		l.tensors = append(l.tensors, p)
	}
	l.headerEnd = off
	return l
}

func (l layout) kv(t testing.TB, key string) kvPos {
	for _, p := range l.kvs {
		if p.key == key {
			return p
		}
	}
	t.Fatalf("no kv %q", key)
	return kvPos{}
}

func (l layout) tensor(t testing.TB, name string) tensorPos {
	for _, p := range l.tensors {
		if p.name == name {
			return p
		}
	}
	t.Fatalf("no tensor %q", name)
	return tensorPos{}
}

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o644) }
