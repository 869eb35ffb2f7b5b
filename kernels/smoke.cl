// Small kernels used by the runtime's own checks (device self-test, cache tests).

// y[i] = a * x[i] + y[i]      x, y: [n] fp32
__kernel void saxpy(const int n, const float a, __global const float* x, __global float* y) {
  const int i = get_global_id(0);
  if (i < n) y[i] = a * x[i] + y[i];
}

// out[i] = value    out: [n] fp32. Used to poison outputs before a kernel under test writes them.
__kernel void fill_f32(const int n, const float value, __global float* out) {
  const int i = get_global_id(0);
  if (i < n) out[i] = value;
}
