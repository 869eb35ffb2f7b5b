// The self-check's plain C++ loops; see reference.hpp.
#include "check/reference.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

#include "io/tensor_view.hpp"

namespace sdt::check::ref {

namespace {

// Runs part(begin, end) over [0, rows) on every core: the products of the larger cases take a few hundred million
// multiply-adds, which one core would make the check wait for.
template <typename Part>
void parallel_rows(int rows, Part&& part) {
  const int threads = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 16);
  if (threads == 1 || rows < 2) {
    part(0, rows);
    return;
  }
  std::vector<std::thread> pool;
  const int chunk = (rows + threads - 1) / threads;
  for (int begin = 0; begin < rows; begin += chunk) pool.emplace_back(part, begin, std::min(rows, begin + chunk));
  for (auto& t : pool) t.join();
}

}  // namespace

double act(double v, nn::Act a) {
  switch (a) {
    case nn::Act::SiLU: return v / (1.0 + std::exp(-v));
    case nn::Act::GELU: return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    case nn::Act::ReLU: return v > 0 ? v : 0.0;
    case nn::Act::None: break;
  }
  return v;
}

std::vector<float> linear(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b, int M,
                          int K, int N, nn::Act a, const std::vector<float>& residual) {
  std::vector<float> y(static_cast<std::size_t>(M) * N);
  parallel_rows(M, [&](int begin, int end) {
    for (int m = begin; m < end; ++m) {
      const float* xr = &x[static_cast<std::size_t>(m) * K];
      for (int n = 0; n < N; ++n) {
        const float* wr = &w[static_cast<std::size_t>(n) * K];
        double acc = b.empty() ? 0.0 : b[n];
        for (int k = 0; k < K; ++k) acc += static_cast<double>(xr[k]) * wr[k];
        acc = act(acc, a);
        if (!residual.empty()) acc += residual[static_cast<std::size_t>(m) * N + n];
        y[static_cast<std::size_t>(m) * N + n] = static_cast<float>(acc);
      }
    }
  });
  return y;
}

int ConvShape::out_h() const {
  const auto& g = geometry;
  return (H * (g.upsample2x ? 2 : 1) + g.pad_top + g.pad_bottom - k) / g.stride + 1;
}
int ConvShape::out_w() const {
  const auto& g = geometry;
  return (W * (g.upsample2x ? 2 : 1) + g.pad_left + g.pad_right - k) / g.stride + 1;
}

std::vector<float> conv2d(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                          const ConvShape& s, const std::vector<float>& residual) {
  const auto& g = s.geometry;
  const int up = g.upsample2x ? 2 : 1;
  const int VH = s.H * up, VW = s.W * up;  // the input as the convolution reads it (nearest-upsampled or not)
  const int OH = s.out_h(), OW = s.out_w();
  const std::size_t plane = static_cast<std::size_t>(OH) * OW;
  std::vector<float> y(static_cast<std::size_t>(s.O) * plane);
  parallel_rows(s.O, [&](int begin, int end) {
    std::vector<double> acc(plane);
    for (int o = begin; o < end; ++o) {
      std::fill(acc.begin(), acc.end(), b.empty() ? 0.0 : b[o]);
      for (int c = 0; c < s.C; ++c) {
        const float* xc = &x[static_cast<std::size_t>(c) * s.H * s.W];
        for (int ky = 0; ky < s.k; ++ky)
          for (int kx = 0; kx < s.k; ++kx) {
            const double wv = w[((static_cast<std::size_t>(o) * s.C + c) * s.k + ky) * s.k + kx];
            for (int oy = 0; oy < OH; ++oy) {
              const int iy = oy * g.stride - g.pad_top + ky;
              if (iy < 0 || iy >= VH) continue;
              const float* xrow = xc + static_cast<std::size_t>(iy / up) * s.W;
              double* arow = &acc[static_cast<std::size_t>(oy) * OW];
              for (int ox = 0; ox < OW; ++ox) {
                const int ix = ox * g.stride - g.pad_left + kx;
                if (ix >= 0 && ix < VW) arow[ox] += wv * xrow[ix / up];
              }
            }
          }
      }
      for (std::size_t i = 0; i < plane; ++i) {
        const double r = residual.empty() ? 0.0 : residual[static_cast<std::size_t>(o) * plane + i];
        y[static_cast<std::size_t>(o) * plane + i] = static_cast<float>(acc[i] + r);
      }
    }
  });
  return y;
}

std::vector<float> group_norm(const std::vector<float>& x, const std::vector<float>& gamma,
                              const std::vector<float>& beta, int C, int S, int groups, double eps, bool silu) {
  std::vector<float> y(x.size());
  const int per_group = C / groups;
  for (int g = 0; g < groups; ++g) {
    const std::size_t begin = static_cast<std::size_t>(g) * per_group * S, count = static_cast<std::size_t>(per_group) * S;
    double mean = 0, var = 0;
    for (std::size_t i = 0; i < count; ++i) mean += x[begin + i];
    mean /= static_cast<double>(count);
    for (std::size_t i = 0; i < count; ++i) var += (x[begin + i] - mean) * (x[begin + i] - mean);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(count) + eps);
    for (int c = g * per_group; c < (g + 1) * per_group; ++c)
      for (int s = 0; s < S; ++s) {
        const std::size_t i = static_cast<std::size_t>(c) * S + s;
        const double v = (x[i] - mean) * inv * gamma[c] + beta[c];
        y[i] = static_cast<float>(silu ? act(v, nn::Act::SiLU) : v);
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
    const double inv = 1.0 / std::sqrt(var / C + eps);
    for (int c = 0; c < C; ++c)
      y[static_cast<std::size_t>(t) * C + c] = static_cast<float>((row[c] - mean) * inv * gamma[c] + beta[c]);
  }
  return y;
}

std::vector<float> attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                             int Tq, int Tk, int heads, int D, bool causal) {
  const int width = heads * D;
  std::vector<float> out(static_cast<std::size_t>(Tq) * width);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  parallel_rows(Tq, [&](int begin, int end) {
    std::vector<double> scores(Tk), acc(D);
    for (int i = begin; i < end; ++i)
      for (int h = 0; h < heads; ++h) {
        const int keys = causal ? std::min(Tk, i + 1) : Tk;
        double top = -1e300;
        for (int j = 0; j < keys; ++j) {
          double dot = 0;
          for (int d = 0; d < D; ++d)
            dot += static_cast<double>(q[static_cast<std::size_t>(i) * width + h * D + d]) *
                   k[static_cast<std::size_t>(j) * width + h * D + d];
          scores[j] = dot * scale;
          top = std::max(top, scores[j]);
        }
        double sum = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int j = 0; j < keys; ++j) {
          const double p = std::exp(scores[j] - top);
          sum += p;
          for (int d = 0; d < D; ++d) acc[d] += p * v[static_cast<std::size_t>(j) * width + h * D + d];
        }
        for (int d = 0; d < D; ++d) out[static_cast<std::size_t>(i) * width + h * D + d] = static_cast<float>(acc[d] / sum);
      }
  });
  return out;
}

std::vector<float> timestep_embedding(float t, int dim, bool flip_sin_to_cos, float shift) {
  const int half = dim / 2;
  std::vector<float> out(static_cast<std::size_t>(dim), 0.0f);
  for (int i = 0; i < half; ++i) {
    // torch: exponent = -ln(10000) · arange(half) in float32, / (half − shift), exp, times t: each step a float.
    // volatile: each step rounded to float, never fused into a multiply-add the compiler may choose.
    volatile float exponent = static_cast<float>(-std::log(10000.0)) * static_cast<float>(i);
    exponent = exponent / (static_cast<float>(half) - shift);
    const float freq = static_cast<float>(std::exp(static_cast<double>(exponent)));
    volatile float arg = t * freq;
    const float s = static_cast<float>(std::sin(static_cast<double>(arg)));
    const float c = static_cast<float>(std::cos(static_cast<double>(arg)));
    out[i] = flip_sin_to_cos ? c : s;
    out[half + i] = flip_sin_to_cos ? s : c;
  }
  return out;
}

std::vector<std::uint8_t> to_rgb8(const std::vector<float>& x, int H, int W, float a, float b) {
  const std::size_t n = static_cast<std::size_t>(H) * W;
  std::vector<std::uint8_t> rgb(3 * n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t c = 0; c < 3; ++c) {
      volatile float scaled = x[c * n + i] * a;  // volatile: no fused multiply-add, as torch rounds each step
      float v = scaled + b;
      v = std::isnan(v) ? 0.0f : std::clamp(v, 0.0f, 1.0f);
      volatile float level = v * 255.0f;
      rgb[3 * i + c] = static_cast<std::uint8_t>(std::nearbyint(level));  // half to even in the default mode
    }
  return rgb;
}

std::vector<float> rounded_to_half(const std::vector<float>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = io::half_to_float(io::float_to_half(v[i]));
  return out;
}

}  // namespace sdt::check::ref
