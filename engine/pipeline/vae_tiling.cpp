// See vae_tiling.hpp. Host code: the decoder runs on the device tile by tile; the blending is a few passes over
// the image, negligible beside the decoder.
#include "pipeline/vae_tiling.hpp"

#include <algorithm>
#include <cstddef>

#include "sdt/error.hpp"

namespace sdt::pipeline {
namespace {

// A decoded tile: [channels, rows, cols].
struct Tile {
  std::vector<float> data;
  int rows = 0, cols = 0;
  float& at(int c, int y, int x) { return data[(static_cast<std::size_t>(c) * rows + y) * cols + x]; }
};

}  // namespace

std::vector<int> tile_starts(int size, int tile) {
  const int stride = tile - tile / 4;
  std::vector<int> starts;
  for (int s = 0; s < size; s += stride) starts.push_back(s);
  return starts;
}

std::vector<float> decode_in_tiles(const std::vector<float>& latents, int L, int h, int w, int tile,
                                   const TiledShape& shape, const TileDecoder& decode) {
  if (tile < 4 || tile % 4 != 0 || L <= 0 || h <= 0 || w <= 0 ||
      latents.size() != static_cast<std::size_t>(L) * static_cast<std::size_t>(h) * static_cast<std::size_t>(w))
    throw Error(ErrorKind::Internal, "decode_in_tiles: a tile of " + std::to_string(tile) + " latents for [" +
                                         std::to_string(L) + ", " + std::to_string(h) + ", " + std::to_string(w) +
                                         "] latents");
  const int C = shape.channels, f = shape.factor;
  const int blend = tile * f / 4;     // pixels blended across a seam
  const int keep = tile * f - blend;  // pixels of each tile kept
  const std::vector<int> ys = tile_starts(h, tile), xs = tile_starts(w, tile);

  // Decode every tile.
  std::vector<std::vector<Tile>> grid(ys.size(), std::vector<Tile>(xs.size()));
  for (std::size_t i = 0; i < ys.size(); ++i) {
    for (std::size_t j = 0; j < xs.size(); ++j) {
      const int th = std::min(tile, h - ys[i]), tw = std::min(tile, w - xs[j]);
      std::vector<float> part(static_cast<std::size_t>(L) * th * tw);
      for (int c = 0; c < L; ++c)
        for (int y = 0; y < th; ++y)
          std::copy_n(&latents[(static_cast<std::size_t>(c) * h + ys[i] + y) * w + xs[j]], tw,
                      &part[(static_cast<std::size_t>(c) * th + y) * tw]);
      Tile& t = grid[i][j];
      t.rows = th * f;
      t.cols = tw * f;
      t.data = decode(part, th, tw);
      if (t.data.size() != static_cast<std::size_t>(C) * t.rows * t.cols)
        throw Error(ErrorKind::Internal, "decode_in_tiles: a decoded tile has " + std::to_string(t.data.size()) +
                                             " values, expected " + std::to_string(C * t.rows * t.cols));
    }
  }

  // Blend each tile into the one above and the one to its left (both already blended), then keep its top-left
  // part. The weights are diffusers': over n = min(blend, both sizes) rows, the neighbour's last n fade out as this
  // tile's first n fade in.
  const int H = h * f, W = w * f;
  std::vector<float> image(static_cast<std::size_t>(C) * H * W);
  int out_y = 0;
  for (std::size_t i = 0; i < ys.size(); ++i) {
    int out_x = 0;
    int kept_rows = 0;
    for (std::size_t j = 0; j < xs.size(); ++j) {
      Tile& t = grid[i][j];
      if (i > 0) {
        Tile& above = grid[i - 1][j];
        const int n = std::min({above.rows, t.rows, blend});
        for (int c = 0; c < C; ++c)
          for (int y = 0; y < n; ++y) {
            const float a = static_cast<float>(y) / static_cast<float>(n);
            for (int x = 0; x < std::min(t.cols, above.cols); ++x)
              t.at(c, y, x) = above.at(c, above.rows - n + y, x) * (1.0f - a) + t.at(c, y, x) * a;
          }
      }
      if (j > 0) {
        Tile& left = grid[i][j - 1];
        const int n = std::min({left.cols, t.cols, blend});
        for (int c = 0; c < C; ++c)
          for (int y = 0; y < std::min(t.rows, left.rows); ++y)
            for (int x = 0; x < n; ++x) {
              const float a = static_cast<float>(x) / static_cast<float>(n);
              t.at(c, y, x) = left.at(c, y, left.cols - n + x) * (1.0f - a) + t.at(c, y, x) * a;
            }
      }
      const int rows = std::min(keep, t.rows), cols = std::min(keep, t.cols);
      for (int c = 0; c < C; ++c)
        for (int y = 0; y < rows && out_y + y < H; ++y)
          for (int x = 0; x < cols && out_x + x < W; ++x)
            image[(static_cast<std::size_t>(c) * H + out_y + y) * W + out_x + x] = t.at(c, y, x);
      out_x += cols;
      kept_rows = rows;
    }
    out_y += kept_rows;
  }
  return image;
}

}  // namespace sdt::pipeline
