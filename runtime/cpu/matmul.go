package cpu

import (
	"fmt"

	"github.com/minerva-llm/minerva/ir"
)

// rowChunk is the least number of output features one work item computes.
// Every output feature is computed by one dot per activation row whatever
// the split, so the split of work never changes a result, only how well the
// workers share it.
const rowChunk = 16

// chunkWork is the number of weight elements × activation rows one work item
// should cover at least, so that handing out an item (an atomic add on a
// shared counter) stays cheap beside the dots it runs: in decode (one
// activation row) a 16-row item of a narrow matrix is only a few hundred
// nanoseconds of work.
const chunkWork = 1 << 16

// chunkRows returns the output features per work item for an n×k weight
// matrix times r activation rows: about chunkWork elements each, at least
// rowChunk rows, and still at least four items per worker while that many
// rowChunk-sized items exist.
func (p *program) chunkRows(n, k, r int) int {
	c := max(rowChunk, chunkWork/max(1, k*r))
	if lim := n / (4 * p.pool.n); c > lim {
		c = max(rowChunk, lim)
	}
	return c
}

// matmul runs the matmul family: an optional RMSNorm prologue in float,
// the activation rows quantized once to the weight type's partner format,
// then every output feature computed by one worker as kern dots, with the
// op's epilogue (bias, residual, swiglu gating, rope and KV writes).
func (e *exec) matmul(nd *node) error {
	v := nd.v
	var parts ir.Parts
	if v.Op == ir.OpMatMul {
		parts = ir.Parts{X: v.Args[0], W: v.Args[1]}
		if len(v.Args) == 3 {
			parts.Bias = v.Args[2]
		}
	} else {
		var err error
		if parts, err = ir.MatMulParts(v); err != nil {
			return err
		}
	}
	p := e.p
	c := p.consts[p.index[parts.W]]
	N, K, rb, err := c.matrix()
	if err != nil {
		return err
	}
	x := e.f32(p.index[parts.X])
	R := len(x) / K
	if parts.Norm {
		var gain []float32
		if parts.Gain != nil {
			gain = e.f32(p.index[parts.Gain])
		}
		p.xnorm = growF32(p.xnorm, R*K)
		xn := p.xnorm
		p.pool.run(R, func(_, r int) { rmsnormRow(x[r*K:(r+1)*K], xn[r*K:(r+1)*K], parts.Eps, gain) })
		x = xn
	}
	at := actType(c.dt)
	ab := actBytes(c.dt, K)
	if cap(p.acts) < R*ab {
		p.acts = alignedBytes(R * ab)
	}
	acts := p.acts[:R*ab]
	p.pool.run(R, func(_, r int) { quantizeActs(at, x[r*K:(r+1)*K], acts[r*ab:(r+1)*ab]) })
	wt, data := c.dt, c.data
	var bias []float32
	if parts.Bias != nil {
		bias = e.f32(p.index[parts.Bias])
	}
	switch v.Op {
	case ir.OpMatMul, ir.OpFusedMatMul:
		var res []float32
		if parts.Residual != nil {
			res = e.f32(p.index[parts.Residual])
		}
		out := e.out(nd)
		ch := p.chunkRows(N, K, R)
		p.pool.run((N+ch-1)/ch, func(_, it int) {
			for j := it * ch; j < min(N, (it+1)*ch); j++ {
				wr := data[j*rb : (j+1)*rb]
				for r := 0; r < R; r++ {
					s := dot(wt, K, wr, acts[r*ab:(r+1)*ab])
					if bias != nil {
						s += bias[j]
					}
					if res != nil {
						s += res[r*N+j]
					}
					out[r*N+j] = s
				}
			}
		})
	case ir.OpSwiGLU:
		F := N / 2
		out := e.out(nd)
		ch := p.chunkRows(F, 2*K, R)
		p.pool.run((F+ch-1)/ch, func(_, it int) {
			for j := it * ch; j < min(F, (it+1)*ch); j++ {
				gr, ur := data[j*rb:(j+1)*rb], data[(F+j)*rb:(F+j+1)*rb]
				for r := 0; r < R; r++ {
					a := acts[r*ab : (r+1)*ab]
					g, u := dot(wt, K, gr, a), dot(wt, K, ur, a)
					out[r*F+j] = float32(silu(float64(g))) * u
				}
			}
		})
	case ir.OpQKVRoPE:
		return e.qkv(nd, parts, R, K, rb, acts, ab, bias)
	}
	return nil
}

func (e *exec) qkv(nd *node, parts ir.Parts, R, K, rb int, acts []byte, ab int, bias []float32) error {
	p := e.p
	a := nd.v.Attrs
	H, Hkv, hd := int(a.Int("n_head", 0)), int(a.Int("n_kv_head", 0)), int(a.Int("head_dim", 0))
	pos, err := e.i32(p.index[parts.Pos])
	if err != nil {
		return err
	}
	if len(pos) != R {
		return fmt.Errorf("%d positions for %d rows", len(pos), R)
	}
	kst, kbase := e.cache(p.stOf[p.index[parts.KCache]])
	vst, vbase := e.cache(p.stOf[p.index[parts.VCache]])
	kw := kst.info.Width
	rope := newRope(a, pos)
	c := p.consts[p.index[parts.W]]
	wt, data := c.dt, c.data
	out := e.out(nd)
	qd := H * hd
	p.pool.run(H+2*Hkv, func(w, h int) {
		tmp := growF32(p.scratch[w], R*hd)
		p.scratch[w] = tmp
		for j := 0; j < hd; j++ {
			row := h*hd + j
			wr := data[row*rb : (row+1)*rb]
			for r := 0; r < R; r++ {
				s := dot(wt, K, wr, acts[r*ab:(r+1)*ab])
				if bias != nil {
					s += bias[row]
				}
				tmp[r*hd+j] = s
			}
		}
		for r := 0; r < R; r++ {
			hv := tmp[r*hd : (r+1)*hd]
			switch {
			case h < H:
				rope.apply(r, hv)
				copy(out[r*qd+h*hd:r*qd+(h+1)*hd], hv)
			case h < H+Hkv:
				rope.apply(r, hv)
				writeRow(kst, kbase+int(pos[r])*kw+(h-H)*hd, hv)
			default:
				writeRow(vst, vbase+int(pos[r])*vst.info.Width+(h-H-Hkv)*hd, hv)
			}
		}
	})
	return nil
}
