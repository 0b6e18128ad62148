package gguf

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValueAccessors(t *testing.T) {
	type want struct {
		i     int64
		iok   bool
		u     uint64
		uok   bool
		f     float64
		fok   bool
		str   string
		shown string
	}
	for _, tc := range []struct {
		v    Value
		typ  ValueType
		want want
	}{
		{Uint8(200), TypeUint8, want{200, true, 200, true, 200, true, "", "200"}},
		{Int8(-3), TypeInt8, want{-3, true, 0, false, -3, true, "", "-3"}},
		{Uint16(65535), TypeUint16, want{65535, true, 65535, true, 65535, true, "", "65535"}},
		{Int16(300), TypeInt16, want{300, true, 300, true, 300, true, "", "300"}},
		{Uint32(math.MaxUint32), TypeUint32, want{math.MaxUint32, true, math.MaxUint32, true, math.MaxUint32, true, "", "4294967295"}},
		{Int32(math.MinInt32), TypeInt32, want{math.MinInt32, true, 0, false, math.MinInt32, true, "", "-2147483648"}},
		{Uint64(math.MaxUint64), TypeUint64, want{0, false, math.MaxUint64, true, math.MaxUint64, true, "", "18446744073709551615"}},
		{Int64(math.MinInt64), TypeInt64, want{math.MinInt64, true, 0, false, math.MinInt64, true, "", "-9223372036854775808"}},
		{Float32(1e-5), TypeFloat32, want{0, false, 0, false, float64(float32(1e-5)), true, "", "1e-05"}},
		{Float64(0.1), TypeFloat64, want{0, false, 0, false, 0.1, true, "", "0.1"}},
		{Bool(true), TypeBool, want{0, false, 0, false, 0, false, "", "true"}},
		{String("llama"), TypeString, want{0, false, 0, false, 0, false, "llama", `"llama"`}},
		{String("a\nb"), TypeString, want{0, false, 0, false, 0, false, "a\nb", `"a\nb"`}},
		{Value{}, TypeInvalid, want{0, false, 0, false, 0, false, "", "<invalid>"}},
	} {
		t.Run(tc.want.shown, func(t *testing.T) {
			v := tc.v
			require.Equal(t, tc.typ, v.Type())
			i, ok := v.Int()
			require.Equal(t, tc.want.iok, ok)
			require.Equal(t, tc.want.i, i)
			u, ok := v.Uint()
			require.Equal(t, tc.want.uok, ok)
			require.Equal(t, tc.want.u, u)
			f, ok := v.Float()
			require.Equal(t, tc.want.fok, ok)
			require.Equal(t, tc.want.f, f)
			s, ok := v.Str()
			require.Equal(t, tc.typ == TypeString, ok)
			require.Equal(t, tc.want.str, s)
			_, ok = v.Bool()
			require.Equal(t, tc.typ == TypeBool, ok)
			require.Equal(t, tc.want.shown, v.String())
			// Scalars are not arrays.
			require.Equal(t, TypeInvalid, v.ElemType())
			require.Zero(t, v.Len())
			require.Equal(t, TypeInvalid, v.Index(0).Type())
			_, ok = v.Strings()
			require.False(t, ok)
			require.True(t, v.Equal(v))
		})
	}
	b, ok := Bool(false).Bool()
	require.True(t, ok)
	require.False(t, b)
}

func TestArrays(t *testing.T) {
	tokens := StringArray([]string{"<unk>", "<s>", "</s>"})
	require.Equal(t, TypeArray, tokens.Type())
	require.Equal(t, TypeString, tokens.ElemType())
	require.Equal(t, 3, tokens.Len())
	s, _ := tokens.Index(1).Str()
	require.Equal(t, "<s>", s)
	ss, ok := tokens.Strings()
	require.True(t, ok)
	ss[0] = "changed"
	again, _ := tokens.Strings()
	require.Equal(t, "<unk>", again[0], "Strings returns a copy")
	_, ok = tokens.Float32s()
	require.False(t, ok)
	_, ok = tokens.Int32s()
	require.False(t, ok)
	require.Equal(t, TypeInvalid, tokens.Index(3).Type())
	require.Equal(t, TypeInvalid, tokens.Index(-1).Type())
	require.True(t, tokens.Equal(Array(TypeString, []Value{String("<unk>"), String("<s>"), String("</s>")})))
	require.False(t, tokens.Equal(StringArray([]string{"<unk>", "<s>"})))

	scores := Float32Array([]float32{-1.5, 0, 2})
	fs, ok := scores.Float32s()
	require.True(t, ok)
	require.Equal(t, []float32{-1.5, 0, 2}, fs)
	f, _ := scores.Index(0).Float()
	require.Equal(t, -1.5, f)
	require.True(t, scores.Equal(Array(TypeFloat32, []Value{Float32(-1.5), Float32(0), Float32(2)})))

	// Int32s accepts any integer element type whose values fit.
	for _, v := range []Value{
		Array(TypeUint8, []Value{Uint8(1), Uint8(255)}),
		Array(TypeInt16, []Value{Int16(1), Int16(255)}),
		Array(TypeUint64, []Value{Uint64(1), Uint64(255)}),
		Array(TypeInt64, []Value{Int64(1), Int64(255)}),
	} {
		is, ok := v.Int32s()
		require.True(t, ok, v.ElemType().String())
		require.Equal(t, []int32{1, 255}, is)
	}
	_, ok = Array(TypeUint32, []Value{Uint32(1 << 31)}).Int32s()
	require.False(t, ok, "2^31 does not fit")
	_, ok = Array(TypeInt64, []Value{Int64(math.MinInt32 - 1)}).Int32s()
	require.False(t, ok)
	is, ok := Int32Array([]int32{math.MinInt32, -1}).Int32s()
	require.True(t, ok)
	require.Equal(t, []int32{math.MinInt32, -1}, is)

	nested := Array(TypeArray, []Value{Int32Array([]int32{1, 2}), StringArray([]string{"x"})})
	require.Equal(t, TypeArray, nested.ElemType())
	inner := nested.Index(1)
	require.Equal(t, TypeString, inner.ElemType())
	x, _ := inner.Index(0).Str()
	require.Equal(t, "x", x)
	require.Equal(t, `[[1, 2], ["x"]]`, nested.String())

	bad := Array(TypeUint8, []Value{Uint8(1), String("no")})
	require.Equal(t, TypeInvalid, bad.Index(0).Type())
	require.Contains(t, bad.String(), "invalid array")

	empty := Array(TypeFloat32, nil)
	require.Equal(t, "[]", empty.String())
	require.True(t, empty.Equal(Float32Array(nil)))
	require.True(t, empty.Equal(Float32Array([]float32{})))
	require.False(t, empty.Equal(Array(TypeInt32, nil)))
}

func TestValueString(t *testing.T) {
	long := make([]int32, 100)
	for i := range long {
		long[i] = int32(i)
	}
	require.Equal(t, "[0, 1, 2, 3, 4, 5, 6, 7, ... 92 more]", Int32Array(long).String())
	require.Equal(t, `["a", "b"]`, StringArray([]string{"a", "b"}).String())
	require.Equal(t, "[true, false]", Array(TypeBool, []Value{Bool(true), Bool(false)}).String())
	require.Equal(t, "NaN", Float32(float32(math.NaN())).String())
	require.Equal(t, "[0.5, -2]", Float32Array([]float32{0.5, -2}).String())
	require.False(t, strings.Contains(StringArray([]string{"a\nb"}).String(), "\n"), "one line")
}

func TestValueTypeString(t *testing.T) {
	require.Equal(t, "uint8", TypeUint8.String())
	require.Equal(t, "float64", TypeFloat64.String())
	require.Equal(t, "array", TypeArray.String())
	require.Equal(t, "type(13)", ValueType(13).String())
	require.Equal(t, "invalid", TypeInvalid.String())
	require.True(t, TypeFloat64.Valid())
	require.False(t, ValueType(13).Valid())
}
