// Decoding latents in overlapping tiles, as diffusers' AutoencoderKL.tiled_decode does, for images whose whole
// decode does not fit into device memory.
//
// Tiles of `tile` latents start every `stride` = tile − tile/4 latents (the last ones in a row or column may be
// smaller); each is decoded alone, then blended into its upper and left neighbours linearly over `blend` = a quarter
// of a tile in pixels, in the order diffusers uses (row by row, each tile blended into neighbours that were blended
// already), and cropped to tile − blend pixels. The VAE decoder normalises with GroupNorm over what it sees, so a
// tiled image is not pixel-identical to a whole decode: callers must say so.
#pragma once

#include <functional>
#include <vector>

namespace sdt::pipeline {

struct TiledShape {
  int channels = 0;  // of the decoded image
  int factor = 8;    // pixels per latent
};

// Decodes a [L, h, w] tile (host, row-major) into [channels, factor·h, factor·w].
using TileDecoder = std::function<std::vector<float>(const std::vector<float>& tile, int h, int w)>;

// Where tiles start along an axis of `size` latents: 0, stride, 2·stride, ... below size.
std::vector<int> tile_starts(int size, int tile);

// The whole image [channels, factor·h, factor·w] from `latents` [L, h, w], decoded tile by tile. `tile` is a
// multiple of 4 latents.
std::vector<float> decode_in_tiles(const std::vector<float>& latents, int L, int h, int w, int tile,
                                   const TiledShape& shape, const TileDecoder& decode);

}  // namespace sdt::pipeline
