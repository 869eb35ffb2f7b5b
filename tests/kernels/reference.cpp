// The reference loops of reference.hpp.
#include "reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sdt::ref {

double act(double v, Act a) {
  switch (a) {
    case Act::SiLU:
      return v / (1.0 + std::exp(-v));
    case Act::GELU:
      return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    case Act::ReLU:
      return v > 0 ? v : 0.0;
    case Act::None:
      break;
  }
  return v;
}

std::vector<float> round_to_half(const std::vector<float>& v) {
  // The compiler's own binary16 conversion (round to nearest even), independent of the engine's.
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(static_cast<_Float16>(v[i]));
  return out;
}

std::vector<float> linear(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>* b, int M,
                          int K, int N, Act a, const std::vector<float>* residual) {
  std::vector<float> y(static_cast<std::size_t>(M) * N);
  for (int m = 0; m < M; ++m) {
    const float* xr = &x[static_cast<std::size_t>(m) * K];
    for (int n = 0; n < N; ++n) {
      const float* wr = &w[static_cast<std::size_t>(n) * K];
      double acc = 0;
      for (int k = 0; k < K; ++k) acc += static_cast<double>(xr[k]) * wr[k];
      if (b) acc += (*b)[n];
      acc = act(acc, a);
      if (residual) acc += (*residual)[static_cast<std::size_t>(m) * N + n];
      y[static_cast<std::size_t>(m) * N + n] = static_cast<float>(acc);
    }
  }
  return y;
}

int ConvShape::out_h() const {
  return (H * (upsample2x ? 2 : 1) + pad_top + pad_bottom - k) / stride + 1;
}
int ConvShape::out_w() const {
  return (W * (upsample2x ? 2 : 1) + pad_left + pad_right - k) / stride + 1;
}

std::vector<float> conv2d(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>* b,
                          const ConvShape& s, const std::vector<float>* residual) {
  const int up = s.upsample2x ? 2 : 1;
  const int VH = s.H * up, VW = s.W * up;  // the (virtual) input map
  const int OH = s.out_h(), OW = s.out_w();
  const std::size_t plane = static_cast<std::size_t>(OH) * OW;
  std::vector<float> y(static_cast<std::size_t>(s.O) * plane);
  std::vector<double> acc(plane);
  for (int o = 0; o < s.O; ++o) {
    std::fill(acc.begin(), acc.end(), b ? (*b)[o] : 0.0);
    for (int c = 0; c < s.C; ++c) {
      const float* xc = &x[static_cast<std::size_t>(c) * s.H * s.W];
      for (int ky = 0; ky < s.k; ++ky)
        for (int kx = 0; kx < s.k; ++kx) {
          const double wv = w[((static_cast<std::size_t>(o) * s.C + c) * s.k + ky) * s.k + kx];
          for (int oy = 0; oy < OH; ++oy) {
            const int iy = oy * s.stride - s.pad_top + ky;
            if (iy < 0 || iy >= VH) continue;
            const float* xrow = xc + static_cast<std::size_t>(iy / up) * s.W;
            double* arow = &acc[static_cast<std::size_t>(oy) * OW];
            for (int ox = 0; ox < OW; ++ox) {
              const int ix = ox * s.stride - s.pad_left + kx;
              if (ix >= 0 && ix < VW) arow[ox] += wv * xrow[ix / up];
            }
          }
        }
    }
    for (std::size_t i = 0; i < plane; ++i) {
      double v = acc[i];
      if (residual) v += (*residual)[o * plane + i];
      y[o * plane + i] = static_cast<float>(v);
    }
  }
  return y;
}

std::vector<float> group_norm(const std::vector<float>& x, const std::vector<float>& gamma,
                              const std::vector<float>& beta, int C, int S, int groups, double eps, bool silu) {
  std::vector<float> y(x.size());
  const int cpg = C / groups;
  const std::size_t n = static_cast<std::size_t>(cpg) * S;
  for (int g = 0; g < groups; ++g) {
    const std::size_t begin = static_cast<std::size_t>(g) * n;
    double mean = 0;
    for (std::size_t i = 0; i < n; ++i) mean += x[begin + i];
    mean /= static_cast<double>(n);
    double var = 0;
    for (std::size_t i = 0; i < n; ++i) var += (x[begin + i] - mean) * (x[begin + i] - mean);
    var /= static_cast<double>(n);
    const double rstd = 1.0 / std::sqrt(var + eps);
    for (std::size_t i = 0; i < n; ++i) {
      const int c = g * cpg + static_cast<int>(i / S);
      double v = (x[begin + i] - mean) * rstd * gamma[c] + beta[c];
      if (silu) v = act(v, Act::SiLU);
      y[begin + i] = static_cast<float>(v);
    }
  }
  return y;
}

std::vector<float> layer_norm(const std::vector<float>& x, const std::vector<float>& gamma,
                              const std::vector<float>& beta, int T, int C, double eps) {
  std::vector<float> y(x.size());
  for (int t = 0; t < T; ++t) {
    const float* row = &x[static_cast<std::size_t>(t) * C];
    double mean = 0, var = 0;
    for (int c = 0; c < C; ++c) mean += row[c];
    mean /= C;
    for (int c = 0; c < C; ++c) var += (row[c] - mean) * (row[c] - mean);
    var /= C;
    const double rstd = 1.0 / std::sqrt(var + eps);
    for (int c = 0; c < C; ++c)
      y[static_cast<std::size_t>(t) * C + c] = static_cast<float>((row[c] - mean) * rstd * gamma[c] + beta[c]);
  }
  return y;
}

std::vector<float> attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                             int Tq, int Tk, int heads, int D, bool causal) {
  const int width = heads * D;
  std::vector<float> out(static_cast<std::size_t>(Tq) * width);
  std::vector<double> p(Tk), o(D);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < Tq; ++i) {
      const int keys = causal ? std::min(Tk, i + 1) : Tk;
      const float* qi = &q[static_cast<std::size_t>(i) * width + h * D];
      double mx = -std::numeric_limits<double>::infinity();
      for (int j = 0; j < keys; ++j) {
        const float* kj = &k[static_cast<std::size_t>(j) * width + h * D];
        double s = 0;
        for (int d = 0; d < D; ++d) s += static_cast<double>(qi[d]) * kj[d];
        p[j] = s * scale;
        mx = std::max(mx, p[j]);
      }
      double sum = 0;
      for (int j = 0; j < keys; ++j) sum += (p[j] = std::exp(p[j] - mx));
      std::fill(o.begin(), o.end(), 0.0);
      for (int j = 0; j < keys; ++j) {
        const float* vj = &v[static_cast<std::size_t>(j) * width + h * D];
        for (int d = 0; d < D; ++d) o[d] += p[j] * vj[d];
      }
      for (int d = 0; d < D; ++d) out[static_cast<std::size_t>(i) * width + h * D + d] = static_cast<float>(o[d] / sum);
    }
  return out;
}

std::vector<float> timestep_embedding(float t, int dim, bool flip_sin_to_cos, float shift) {
  const int half = dim / 2;
  std::vector<float> emb(dim, 0.0f);
  for (int i = 0; i < half; ++i) {
    // torch: exponent = float(-ln 10000) * arange(half) / (half - shift), all float32; exp; t * freq.
    volatile float exponent = static_cast<float>(-std::log(10000.0)) * static_cast<float>(i);
    exponent = exponent / (static_cast<float>(half) - shift);
    const float freq = static_cast<float>(std::exp(static_cast<double>(exponent)));
    volatile float arg = t * freq;
    const float s = static_cast<float>(std::sin(static_cast<double>(arg)));
    const float c = static_cast<float>(std::cos(static_cast<double>(arg)));
    emb[i] = flip_sin_to_cos ? c : s;
    emb[half + i] = flip_sin_to_cos ? s : c;
  }
  return emb;
}

std::vector<std::uint8_t> to_rgb8(const std::vector<float>& x, int H, int W, float a, float b) {
  const std::size_t n = static_cast<std::size_t>(H) * W;
  std::vector<std::uint8_t> out(n * 3);
  for (std::size_t i = 0; i < n; ++i)
    for (int c = 0; c < 3; ++c) {
      volatile float scaled = x[c * n + i] * a;  // volatile: no fused multiply-add, as torch rounds each step
      float v = scaled + b;
      v = std::isnan(v) ? 0.0f : std::clamp(v, 0.0f, 1.0f);
      volatile float level = v * 255.0f;
      out[3 * i + c] = static_cast<std::uint8_t>(std::nearbyint(level));  // default mode: half to even
    }
  return out;
}

}  // namespace sdt::ref
