// The kernel tests' reference: the self-check's loops (engine/check/reference.cpp) behind this folder's
// signatures, and a binary16 rounding of its own.
#include "reference.hpp"

#include "check/reference.hpp"

namespace sdt::ref {

namespace {
const std::vector<float>& or_none(const std::vector<float>* v) {
  static const std::vector<float> none;
  return v ? *v : none;
}
}  // namespace

double act(double v, Act a) {
  return check::ref::act(v, a);
}

std::vector<float> round_to_half(const std::vector<float>& v) {
  // The compiler's own binary16 conversion (round to nearest even), independent of the engine's (io/tensor_view),
  // which the self-check's rounded_to_half uses: the weight conversion is checked against something else.
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(static_cast<_Float16>(v[i]));
  return out;
}

std::vector<float> linear(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>* b, int M,
                          int K, int N, Act a, const std::vector<float>* residual) {
  return check::ref::linear(x, w, or_none(b), M, K, N, a, or_none(residual));
}

namespace {
check::ref::ConvShape to_check(const ConvShape& s) {
  check::ref::ConvShape c;
  c.C = s.C;
  c.H = s.H;
  c.W = s.W;
  c.O = s.O;
  c.k = s.k;
  c.geometry.stride = s.stride;
  c.geometry.pad_top = s.pad_top;
  c.geometry.pad_bottom = s.pad_bottom;
  c.geometry.pad_left = s.pad_left;
  c.geometry.pad_right = s.pad_right;
  c.geometry.upsample2x = s.upsample2x;
  return c;
}
}  // namespace

int ConvShape::out_h() const {
  return to_check(*this).out_h();
}
int ConvShape::out_w() const {
  return to_check(*this).out_w();
}

std::vector<float> conv2d(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>* b,
                          const ConvShape& s, const std::vector<float>* residual) {
  return check::ref::conv2d(x, w, or_none(b), to_check(s), or_none(residual));
}

std::vector<float> group_norm(const std::vector<float>& x, const std::vector<float>& gamma,
                              const std::vector<float>& beta, int C, int S, int groups, double eps, bool silu) {
  return check::ref::group_norm(x, gamma, beta, C, S, groups, eps, silu);
}

std::vector<float> layer_norm(const std::vector<float>& x, const std::vector<float>& gamma,
                              const std::vector<float>& beta, int T, int C, double eps) {
  return check::ref::layer_norm(x, gamma, beta, T, C, eps);
}

std::vector<float> attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                             int Tq, int Tk, int heads, int D, bool causal) {
  return check::ref::attention(q, k, v, Tq, Tk, heads, D, causal);
}

std::vector<float> timestep_embedding(float t, int dim, bool flip_sin_to_cos, float shift) {
  return check::ref::timestep_embedding(t, dim, flip_sin_to_cos, shift);
}

std::vector<std::uint8_t> to_rgb8(const std::vector<float>& x, int H, int W, float a, float b) {
  return check::ref::to_rgb8(x, H, W, a, b);
}

}  // namespace sdt::ref
