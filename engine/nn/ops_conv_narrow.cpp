// Convolutions of at most cl::kNarrowConvMaxOut output channels as direct convolutions (kernels/conv_narrow.cl):
// the VAE decoder's conv_out and TAESD's last conv, which as products fill a few rows of tiles made for many more
// output channels. Chosen by conv2d() (and, at load, instead of Winograd) where the device's tuning takes the map.
#include "nn/ops_internal.hpp"

namespace sdt::nn {

std::optional<cl::NarrowConvConfig> detail::narrow_conv_tile(const cl::Context& ctx, std::int64_t O, int k,
                                                             const ConvGeometry& g, std::int64_t out_h,
                                                             std::int64_t out_w) {
  if ((k != 1 && k != 3) || g.stride != 1 || g.upsample2x) return std::nullopt;
  return ctx.tuning().narrow_conv(O, out_h, out_w);
}

bool detail::run_narrow_conv(cl::Context& ctx, const cl::NarrowConvConfig& tile, const Tensor& x, const Tensor& w,
                             const Tensor* b, const ConvGeometry& g, const ConvFusion& fusion, const Tensor& out) {
  const int O = static_cast<int>(w.dim(0)), C = static_cast<int>(x.dim(0)), k = static_cast<int>(w.dim(2));
  const std::string options = tile.defines() + " -DNC_O=" + std::to_string(O) + " -DNC_KS=" + std::to_string(k) +
                              half_define("W_HALF", &w) + half_define("BIAS_HALF", b);
  cl_kernel kernel = ctx.kernel("conv_narrow", "conv_narrow", options);
  if (ctx.work_group_limit(kernel) < static_cast<std::size_t>(tile.threads())) return false;
  const int out_h = static_cast<int>(out.dim(1)), out_w = static_cast<int>(out.dim(2));
  const std::size_t rows = static_cast<std::size_t>(tile.ly) * tile.py;
  const cl::Range global((out_w + tile.tw - 1) / tile.tw * static_cast<std::size_t>(tile.tw),
                         (out_h + rows - 1) / rows * static_cast<std::size_t>(tile.ly));
  const cl::Range local(static_cast<std::size_t>(tile.tw), static_cast<std::size_t>(tile.ly));
  const int norm_mode = fusion.input_norm ? (fusion.input_silu ? 2 : 1) : 0;
  const int act = conv_act_code(fusion);
  ctx.launch(kernel, global, local, C, static_cast<int>(x.dim(1)), static_cast<int>(x.dim(2)), out_h, out_w, g.pad_top,
             g.pad_left, x.buffer.get(), w.buffer.get(), b ? b->buffer.get() : cl_mem{nullptr},
             fusion.input_norm ? fusion.input_norm->buffer.get() : cl_mem{nullptr}, norm_mode,
             fusion.residual ? fusion.residual->buffer.get() : cl_mem{nullptr}, act, out.buffer.get());
  ctx.add_flops(2.0 * O * out_h * out_w * static_cast<double>(C) * k * k);
  return true;
}

}  // namespace sdt::nn
