package sched

import (
	"reflect"
	"testing"
)

func TestCount(t *testing.T) {
	for _, c := range []struct {
		d    GridDim
		T    int
		want int64
	}{
		{GridDim{N: 7}, 100, 7},
		{GridDim{N: 3, PerToken: true}, 5, 15},
		{GridDim{N: 2, PerToken: true, Tile: 64}, 64, 2},
		{GridDim{N: 2, PerToken: true, Tile: 64}, 65, 4},
		{GridDim{N: 1, PerToken: true, Tile: 64}, 1, 1},
	} {
		if got := c.d.Count(c.T); got != c.want {
			t.Errorf("%+v.Count(%d) = %d, want %d", c.d, c.T, got, c.want)
		}
	}
}

// A product's decode and prefill launches: a step runs exactly one.
func TestStep(t *testing.T) {
	ls := []Launch{{Kernel: "embed"}, {Kernel: "mv", MaxT: 1}, {Kernel: "mm", MinT: 2}, {Kernel: "norm"}}
	names := func(ls []Launch) []string {
		var out []string
		for _, l := range ls {
			out = append(out, l.Kernel)
		}
		return out
	}
	if got := names(Step(ls, 1)); !reflect.DeepEqual(got, []string{"embed", "mv", "norm"}) {
		t.Errorf("T=1: %v", got)
	}
	if got := names(Step(ls, 9)); !reflect.DeepEqual(got, []string{"embed", "mm", "norm"}) {
		t.Errorf("T=9: %v", got)
	}
}
