// Weight conversion on the device: the file's bytes are uploaded as they are and narrowed or widened here into the
// storage buffer, so a model whose files hold another dtype than the engine stores costs no host time to convert.
// Bit for bit what the host conversions of io/tensor_view.cpp give (the tests compare them at every edge):
//   fp32 → fp16: round to nearest even, results below half the smallest subnormal → ±0, subnormals rounded in
//                place, values rounding past 65504 → ±Inf, Inf kept, every NaN → sign | 0x7e00 (quiet, no payload);
//   fp16 → fp32: exact, subnormals normalised, Inf kept, NaN payload kept (shifted into place);
//   bf16 → fp32: the top half of an fp32 (exact); bf16 → fp16: through fp32, as the host does.
// Only integer operations on the bit patterns: no device float path (denormal flushing, vstore_half's rounding
// mode, NaN canonicalisation) can change a result.
//
// Arguments: src starts at element src_offset of the staging buffer, dst at element dst_offset of the weight's
// buffer; n elements.   global (n rounded up)

inline ushort f32_bits_to_f16(uint bits) {
  const uint sign = (bits >> 16) & 0x8000u;
  const uint magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) return (ushort)(sign | 0x7c00u | (magnitude > 0x7f800000u ? 0x200u : 0u));
  if (magnitude >= 0x477ff000u) return (ushort)(sign | 0x7c00u);  // rounds past 65504
  if (magnitude < 0x38800000u) {                                 // subnormal result (or zero)
    if (magnitude < 0x33000000u) return (ushort)sign;
    const uint exponent = magnitude >> 23;
    const uint mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    const uint shift = 126u - exponent;  // 14..24
    uint value = mantissa >> shift;
    const uint remainder = mantissa & ((1u << shift) - 1u);
    const uint halfway = 1u << (shift - 1u);
    if (remainder > halfway || (remainder == halfway && (value & 1u))) ++value;
    return (ushort)(sign | value);
  }
  const uint rebiased = magnitude - 0x38000000u;
  return (ushort)(sign | ((rebiased + 0x0fffu + ((rebiased >> 13) & 1u)) >> 13));
}

inline uint f16_to_f32_bits(ushort h) {
  const uint sign = ((uint)h & 0x8000u) << 16;
  const uint exponent = ((uint)h >> 10) & 0x1fu;
  const uint mantissa = (uint)h & 0x3ffu;
  if (exponent == 0x1fu) return sign | 0x7f800000u | (mantissa << 13);  // Inf, NaN with its payload
  if (exponent != 0) return sign | ((exponent + 112u) << 23) | (mantissa << 13);
  if (mantissa == 0) return sign;
  // Subnormal: mantissa · 2^-24 = 1.m' · 2^(e - 24) with e the index of its highest set bit.
  const uint e = 31u - clz(mantissa);
  return sign | ((e + 103u) << 23) | ((mantissa << (23u - e)) & 0x7fffffu);
}

__kernel void narrow_f32_to_f16(__global const uint* restrict src, const uint src_offset, __global ushort* restrict dst,
                                const uint dst_offset, const uint n) {
  const uint i = get_global_id(0);
  if (i < n) dst[dst_offset + i] = f32_bits_to_f16(src[src_offset + i]);
}

__kernel void widen_f16_to_f32(__global const ushort* restrict src, const uint src_offset, __global uint* restrict dst,
                               const uint dst_offset, const uint n) {
  const uint i = get_global_id(0);
  if (i < n) dst[dst_offset + i] = f16_to_f32_bits(src[src_offset + i]);
}

__kernel void widen_bf16_to_f32(__global const ushort* restrict src, const uint src_offset, __global uint* restrict dst,
                                const uint dst_offset, const uint n) {
  const uint i = get_global_id(0);
  if (i < n) dst[dst_offset + i] = (uint)src[src_offset + i] << 16;
}

__kernel void narrow_bf16_to_f16(__global const ushort* restrict src, const uint src_offset,
                                 __global ushort* restrict dst, const uint dst_offset, const uint n) {
  const uint i = get_global_id(0);
  if (i < n) dst[dst_offset + i] = f32_bits_to_f16((uint)src[src_offset + i] << 16);
}

// A convolution's weight [O, C, T] (T = k·k taps) reordered to [O, T, C] (gemm_tc.cl's mode 3 runs K as (tap,
// channel)), 16-bit or 32-bit values moved as they are (ELEMENT_T: ushort for fp16 weights, uint for fp32).
// global (round_up(C·T, ls), O): one output value a work-item, written in order.
#ifndef ELEMENT_T
#define ELEMENT_T ushort
#endif
__kernel void conv_weight_taps_first(__global const ELEMENT_T* restrict w, const int C, const int T,
                                     __global ELEMENT_T* restrict out) {
  const int i = get_global_id(0), o = get_global_id(1);
  if (i >= C * T) return;
  const int t = i / C, c = i - t * C;
  out[o * C * T + i] = w[(o * C + c) * T + t];
}
