#include "textflag.h"

// AMX instructions as bytes (Go's assembler has no mnemonics for them).
// Registers: DI the configuration, SI a, CX b, BX c, DX the row stride (64).
//
//	LDTILECFG (DI)            C4 E2 78 49 07
//	TILELOADD tmm1, (SI)(DX)  C4 E2 7B 4B 0C 16
//	TILELOADD tmm2, (CX)(DX)  C4 E2 7B 4B 14 11
//	TILEZERO tmmN             C4 E2 7B 49 C0|N<<3
//	TDPBUSD tmmN, tmm1, tmm2  C4 E2 69 5E C1|N<<3   (tmm1 unsigned, tmm2 signed)
//	TILESTORED (BX)(DX), tmm0 C4 E2 7A 4B 04 13
//	TILERELEASE               C4 E2 78 49 C0
#define LDTILECFG_DI BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0x07
#define TILELOADD_1_SI BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x0C; BYTE $0x16
#define TILELOADD_2_CX BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x14; BYTE $0x11
#define TILEZERO(n) BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $(0xC0|(n<<3))
#define TDPBUSD_12(n) BYTE $0xC4; BYTE $0xE2; BYTE $0x69; BYTE $0x5E; BYTE $(0xC1|(n<<3))
#define TILESTORED_BX_0 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x04; BYTE $0x13
#define TILERELEASE BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0xC0

// LOAD_TILES loads the arguments, the configuration and the tiles a (tmm1)
// and b (tmm2), and zeroes tmm0.
#define LOAD_TILES \
	MOVQ cfg+0(FP), DI; \
	MOVQ a+8(FP), SI; \
	MOVQ b+16(FP), CX; \
	MOVQ c+24(FP), BX; \
	MOVQ iters+32(FP), AX; \
	MOVQ $64, DX; \
	LDTILECFG_DI; \
	TILELOADD_1_SI; \
	TILELOADD_2_CX; \
	TILEZERO(0)

// func dotTile(cfg *[64]byte, a, b *[1024]byte, c *[256]int32, iters int)
TEXT ·dotTile(SB), NOSPLIT, $0-40
	LOAD_TILES
	TESTQ AX, AX
	JZ   store
loop:
	TDPBUSD_12(0)
	DECQ AX
	JNZ  loop
store:
	TILESTORED_BX_0
	TILERELEASE
	RET

// func dotTile6(cfg *[64]byte, a, b *[1024]byte, c *[256]int32, iters int)
TEXT ·dotTile6(SB), NOSPLIT, $0-40
	LOAD_TILES
	TILEZERO(3)
	TILEZERO(4)
	TILEZERO(5)
	TILEZERO(6)
	TILEZERO(7)
	TESTQ AX, AX
	JZ   store6
loop6:
	TDPBUSD_12(0)
	TDPBUSD_12(3)
	TDPBUSD_12(4)
	TDPBUSD_12(5)
	TDPBUSD_12(6)
	TDPBUSD_12(7)
	DECQ AX
	JNZ  loop6
store6:
	TILESTORED_BX_0
	TILERELEASE
	RET
