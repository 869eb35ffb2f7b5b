// Float image -> 8-bit RGB, as diffusers hands images to PIL: v = clamp(x*a + b, 0, 1) in fp32, then
// numpy's (v * 255).round() - round half to even, which is what rint() does in the default rounding mode.
// Contraction is off so x*a + b and v*255 are rounded exactly as torch and numpy round them (one fused mad
// would move values that sit on a .5 boundary).
#pragma OPENCL FP_CONTRACT OFF

// x: [3, H, W] fp32 planar -> rgb: [H, W, 3] uint8 interleaved. n = H*W.   global (n)
__kernel void to_rgb8(const int n, __global const float* restrict x, const float a, const float b,
                      __global uchar* restrict rgb) {
  const int i = get_global_id(0);
  if (i >= n) return;
  for (int c = 0; c < 3; ++c) {
    const float scaled = x[c * n + i] * a;
    float v = scaled + b;
    // NaN stays NaN through clamp; it becomes 0 rather than an undefined conversion.
    v = isnan(v) ? 0.0f : clamp(v, 0.0f, 1.0f);
    const float level = v * 255.0f;
    rgb[3 * i + c] = convert_uchar_sat(rint(level));
  }
}
