package cuda_test

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEmuShim checks the parts of cudaemu.h the emitted kernels do not use
// yet (__shared__, __syncthreads, __shfl_xor_sync, an int __shfl_sync,
// gridDim/blockDim) with a hand-written kernel, the fibers the emulation
// runs a block's threads as (per-thread state and stacks across barriers,
// ABI stack alignment, the guard page under each stack), the warp's
// tensor-core mma against a plain product, and that non-uniform control
// flow around a barrier (a lane or thread that returned, or a deadlock of
// threads at different barriers) aborts the run rather than hanging or
// returning stale values.
func TestEmuShim(t *testing.T) {
	clang := clangxxOrSkip(t)
	for _, c := range []struct {
		name, src, want string
		fails           bool
		flags           []string
	}{
		{"block_reduce", blockReduceSrc, "ok", false, nil},
		{"fiber_state", fiberStateSrc, "ok", false, nil},
		// The ucontext fallback (architectures without the hand-written switch).
		{"fiber_state_ucontext", fiberStateSrc, "ok", false, []string{"-DCUDAEMU_UCONTEXT"}},
		{"mma", mmaSrc, "ok", false, nil},
		{"divergent_shuffle", divergentSrc, "non-uniform control flow", true, nil},
		{"returned_before_syncthreads", returnedSrc, "__syncthreads: a thread returned while others wait", true, nil},
		{"deadlock", deadlockSrc, "deadlock: 48 threads wait at __syncthreads and 16 at a warp barrier", true, nil},
		{"stack_overflow", overflowSrc, "segmentation fault", true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "k.cpp")
			if err := os.WriteFile(path, []byte(c.src), 0o644); err != nil {
				t.Fatal(err)
			}
			exe := filepath.Join(dir, "k")
			args := append(append(emuArgs(), c.flags...), "-o", exe, "-x", "c++", path)
			if out, err := exec.Command(clang, args...).CombinedOutput(); err != nil {
				t.Fatalf("clang++: %v\n%s", err, out)
			}
			out, err := exec.Command(exe).CombinedOutput()
			got := string(out)
			if err != nil {
				got += "\n" + err.Error() // "signal: segmentation fault" for the guard page
			}
			if (err != nil) != c.fails || !strings.Contains(got, c.want) {
				t.Fatalf("want %q (failing: %v), got %v\n%s", c.want, c.fails, err, out)
			}
		})
	}
}

// TestEmuHostPinned checks that cudaemu.h carries the SHA-256 of the
// shared emuhost.h it includes: the emulated CUDA driver (runtime/cuda)
// keys its cache of built kernel objects on cudaemu.h's text alone, so an
// edit of emuhost.h must change cudaemu.h too.
func TestEmuHostPinned(t *testing.T) {
	host, err := os.ReadFile(filepath.Join("..", "gpu", "gputest", "testdata", "emuhost.h"))
	if err != nil {
		t.Fatal(err)
	}
	emu, err := os.ReadFile(filepath.Join("testdata", "cudaemu.h"))
	if err != nil {
		t.Fatal(err)
	}
	pin := fmt.Sprintf("// emuhost.h sha256 %x\n", sha256.Sum256(host))
	if !strings.Contains(string(emu), pin+`#include "../../gpu/gputest/testdata/emuhost.h"`) {
		t.Errorf("testdata/cudaemu.h does not pin the emuhost.h it includes: the line before its #include must be %q", pin)
	}
}

// blockReduceSrc: each block of 96 threads sums its 96 inputs (warp
// butterfly, then the three warp sums through shared memory between two
// barriers); every thread writes the block sum and lane 5's id.
const blockReduceSrc = `
extern "C" __global__ void __launch_bounds__(96) block_sum(const float* x, float* out, int* ids) {
    __shared__ float part[3];
    const unsigned tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    const unsigned i = blockIdx.x * blockDim.x + tid;
    float v = x[i];
    for (int o = 16; o > 0; o >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, o);
    }
    if (lane == 0) {
        part[warp] = v;
    }
    __syncthreads();
    const float s = part[0] + part[1] + part[2];
    __syncthreads(); // the next block's writes wait for every read
    out[i] = s;
    ids[i] = __shfl_sync(0xffffffffu, int(i), 5) + int(gridDim.x) * 1000;
}

int main() {
    const unsigned blocks = 5, n = blocks * 96;
    std::vector<float> x(n), out(n);
    std::vector<int> ids(n);
    for (unsigned i = 0; i < n; ++i) {
        x[i] = float(i % 7) - 2.5f + float(i) / 64.0f;
    }
    cudaemu::launch(dim3{blocks, 1, 1}, dim3{96, 1, 1}, [&] { block_sum(x.data(), out.data(), ids.data()); });
    for (unsigned i = 0; i < n; ++i) {
        const unsigned b = i / 96;
        float want = 0;
        for (unsigned j = b * 96; j < b * 96 + 96; ++j) {
            want += x[j];
        }
        const int wantID = int(i / 32 * 32 + 5) + 5000;
        if (std::fabs(out[i] - want) > 1e-3f * std::fabs(want) + 1e-3f || ids[i] != wantID) {
            std::printf("thread %u: sum %g want %g, id %d want %d\n", i, out[i], want, ids[i], wantID);
            return 1;
        }
    }
    std::printf("ok\n");
    return 0;
}
`

// divergentSrc: lane 3 returns before a full-mask shuffle.
const divergentSrc = `
extern "C" __global__ void bad(float* out) {
    const unsigned lane = threadIdx.x & 31u;
    if (lane == 3) {
        return;
    }
    out[threadIdx.x] = __shfl_down_sync(0xffffffffu, 1.0f, 1);
}

int main() {
    std::vector<float> out(32);
    cudaemu::launch(dim3{1, 1, 1}, dim3{32, 1, 1}, [&] { bad(out.data()); });
    std::printf("no error\n");
    return 0;
}
`

// fiberStateSrc: every thread of 3 blocks of 160 fills a 16 KiB local array
// with its own id and checks, after each of many barriers of both kinds,
// that its array, threadIdx and blockIdx are still its own (each thread has
// its own stack and state across switches); a 16-byte-aligned local must
// be aligned on every fiber (the ABI's stack alignment at entry; checked
// behind a call so that the compiler cannot assume it). Each thread counts
// its errors into out.
const fiberStateSrc = `
__attribute__((noinline)) unsigned misaligned(const void* p) { return unsigned(reinterpret_cast<uintptr_t>(p) % 16); }

extern "C" __global__ void state(unsigned* out) {
    __shared__ unsigned turn[160];
    const unsigned tid = threadIdx.x, block = blockIdx.x;
    unsigned big[4096];
    alignas(16) float v[4] = {1, 2, 3, 4};
    unsigned bad = misaligned(v) != 0 ? 1 : 0;
    for (unsigned i = 0; i < 4096; ++i) {
        big[i] = tid * 7919u + block + i;
    }
    for (unsigned r = 0; r < 20; ++r) {
        turn[tid] = r * 1000 + tid;
        if (r % 2 == 0) {
            __syncthreads();
        } else {
            __syncwarp();
        }
        const unsigned other = r % 2 == 0 ? (tid + 37) % 160 : (tid & ~31u) | ((tid + 5) & 31u);
        bad += turn[other] != r * 1000 + other ? 1 : 0;
        bad += __shfl_down_sync(0xffffffffu, tid, 3) != ((tid & 31u) + 3 < 32 ? tid + 3 : tid) ? 1 : 0;
        bad += threadIdx.x != tid || blockIdx.x != block ? 1 : 0;
        __syncthreads(); // nobody writes turn before everyone has read it
        for (unsigned i = r; i < 4096; i += 97) {
            bad += big[i] != tid * 7919u + block + i ? 1 : 0;
        }
    }
    out[block * 160 + tid] = bad;
}

int main() {
    std::vector<unsigned> out(3 * 160, 12345);
    cudaemu::launch(dim3{3, 1, 1}, dim3{160, 1, 1}, [&] { state(out.data()); });
    for (unsigned i = 0; i < out.size(); ++i) {
        if (out[i] != 0) {
            std::printf("thread %u: %u errors\n", i, out[i]);
            return 1;
        }
    }
    std::printf("ok\n");
    return 0;
}
`

// mmaSrc: two blocks of two warps; each warp runs 5 back-to-back
// mma_16816 on its own random f16 A and B (D of one is C of the next), so
// a stale or shared exchange area shows (block 1 starts its mmas at the
// warp barrier generation block 0 ended at); each lane builds its fragments
// from row-major matrices with the PTX ISA's fragment formulas (those
// cudaemu.h documents) and the result must match a plain f32 product
// computed in the same order (k ascending), exactly.
const mmaSrc = `
static float frnd(uint32_t& s) {
    s = s * 1664525u + 1013904223u;
    return float(int(s >> 20) - 2048) / 1024.0f;
}

static float A[4][5][16][16], B[4][5][16][8], C[4][16][8], D[4][16][8];

extern "C" __global__ void mmas(float* out) {
    const unsigned lane = threadIdx.x & 31u, w = blockIdx.x * 2 + (threadIdx.x >> 5), g = lane >> 2, q = lane & 3u;
    float c[4];
    for (unsigned i = 0; i < 4; ++i) {
        c[i] = C[w][g + 8 * (i >> 1)][2 * q + (i & 1)];
    }
    for (unsigned i = 0; i < 4 * blockIdx.x; ++i) {
        __syncwarp(); // block 1's first mma is its warp barrier's 5th release, as block 0's last
    }
    for (unsigned m = 0; m < 5; ++m) {
        uint32_t a[4], b[2];
        for (unsigned r = 0; r < 4; ++r) {
            const unsigned row = g + 8 * (r & 1), col = 2 * q + 8 * (r >> 1);
            a[r] = uint32_t(cudaemu::f2h(A[w][m][row][col])) | uint32_t(cudaemu::f2h(A[w][m][row][col + 1])) << 16;
        }
        for (unsigned r = 0; r < 2; ++r) {
            const unsigned k = 2 * q + 8 * r;
            b[r] = uint32_t(cudaemu::f2h(B[w][m][k][g])) | uint32_t(cudaemu::f2h(B[w][m][k + 1][g])) << 16;
        }
        cudaemu::mma_16816(c, a, b);
    }
    for (unsigned i = 0; i < 4; ++i) {
        out[(w * 16 + g + 8 * (i >> 1)) * 8 + 2 * q + (i & 1)] = c[i];
    }
}

int main() {
    uint32_t s = 7;
    for (unsigned w = 0; w < 4; ++w) {
        for (unsigned m = 0; m < 5; ++m) {
            for (unsigned i = 0; i < 16; ++i) {
                for (unsigned k = 0; k < 16; ++k) {
                    A[w][m][i][k] = cudaemu::h2f(cudaemu::f2h(frnd(s)));
                }
            }
            for (unsigned k = 0; k < 16; ++k) {
                for (unsigned j = 0; j < 8; ++j) {
                    B[w][m][k][j] = cudaemu::h2f(cudaemu::f2h(frnd(s)));
                }
            }
        }
        for (unsigned i = 0; i < 16; ++i) {
            for (unsigned j = 0; j < 8; ++j) {
                D[w][i][j] = C[w][i][j] = frnd(s);
            }
        }
        for (unsigned m = 0; m < 5; ++m) {
            for (unsigned i = 0; i < 16; ++i) {
                for (unsigned j = 0; j < 8; ++j) {
                    float d = D[w][i][j];
                    for (unsigned k = 0; k < 16; ++k) {
                        d += A[w][m][i][k] * B[w][m][k][j];
                    }
                    D[w][i][j] = d;
                }
            }
        }
    }
    std::vector<float> out(4 * 16 * 8);
    cudaemu::launch(dim3{2, 1, 1}, dim3{64, 1, 1}, [&] { mmas(out.data()); });
    for (unsigned w = 0; w < 4; ++w) {
        for (unsigned i = 0; i < 16; ++i) {
            for (unsigned j = 0; j < 8; ++j) {
                if (out[(w * 16 + i) * 8 + j] != D[w][i][j]) {
                    std::printf("warp %u D[%u][%u] = %g, want %g\n", w, i, j, out[(w * 16 + i) * 8 + j], D[w][i][j]);
                    return 1;
                }
            }
        }
    }
    std::printf("ok\n");
    return 0;
}
`

// returnedSrc: thread 40 of 64 returns before a __syncthreads the others
// reach.
const returnedSrc = `
extern "C" __global__ void bad(float* out) {
    if (threadIdx.x == 40) {
        return;
    }
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}

int main() {
    std::vector<float> out(64);
    cudaemu::launch(dim3{1, 1, 1}, dim3{64, 1, 1}, [&] { bad(out.data()); });
    std::printf("no error\n");
    return 0;
}
`

// deadlockSrc: lanes 16-31 of warp 0 wait at __syncthreads while lanes
// 0-15 wait at __syncwarp: neither barrier can complete, and nobody
// returned.
const deadlockSrc = `
extern "C" __global__ void bad(float* out) {
    if (threadIdx.x < 16) {
        __syncwarp();
    }
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}

int main() {
    std::vector<float> out(64);
    cudaemu::launch(dim3{1, 1, 1}, dim3{64, 1, 1}, [&] { bad(out.data()); });
    std::printf("no error\n");
    return 0;
}
`

// overflowSrc: a thread recurses past its 256 KiB stack, touching every
// frame, and must fault on the guard page under it instead of writing into
// its neighbour's stack.
const overflowSrc = `
__attribute__((noinline)) unsigned deep(unsigned n) {
    volatile char frame[1024];
    frame[0] = char(n);
    frame[1023] = char(n);
    return n == 0 ? 0 : deep(n - 1) + unsigned(frame[0]) + unsigned(frame[1023]);
}

extern "C" __global__ void bad(unsigned* out) {
    out[threadIdx.x] = threadIdx.x == 33 ? deep(1000) : 0;
}

int main() {
    std::vector<unsigned> out(64);
    cudaemu::launch(dim3{1, 1, 1}, dim3{64, 1, 1}, [&] { bad(out.data()); });
    std::printf("no error\n");
    return 0;
}
`
