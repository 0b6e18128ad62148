package gguf

import "testing"

func BenchmarkParse(b *testing.B) {
	for _, rel := range []string{stories, "models/gguf/synthetic/gptoss-g1-mxfp4.gguf"} {
		data := readShared(b, rel)
		b.Run(rel[len("models/gguf/"):], func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
