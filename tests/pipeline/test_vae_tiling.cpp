// Decoding the VAE image in tiles (RELIABILITY.md case 16): the blending against a plain port of diffusers'
// tiled_decode (rows of tiles, blend_v and blend_h in place, crop, concatenate) on a synthetic decoder whose tiles
// disagree, so every seam is exercised; and on the engine: one tile covering the latents is the whole decode
// bit for bit, tiles give an image of the right size named in the metadata, and a decode that does not fit into
// device memory falls back to tiles and says so, while VaeTiling::Never fails instead.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "engine_fixture.hpp"
#include "pipeline/vae_tiling.hpp"
#include "runtime/cl_error.hpp"
#include "sdt/error.hpp"

namespace sdt::test {
namespace {

using pipeline::decode_in_tiles;
using pipeline::tile_starts;
using pipeline::TiledShape;

// A stand-in decoder: every latent becomes an 8×8 block of a smooth function of the latent's value and position,
// plus an offset of its own per tile (tiles of a real VAE disagree too), so that blending changes the result.
std::vector<float> fake_decode(const std::vector<float>& tile, int L, int h, int w, int C) {
  std::vector<float> out(static_cast<std::size_t>(C) * h * 8 * w * 8);
  float tile_offset = 0;
  for (float v : tile) tile_offset += v;
  tile_offset = std::sin(tile_offset);
  for (int c = 0; c < C; ++c)
    for (int y = 0; y < h * 8; ++y)
      for (int x = 0; x < w * 8; ++x) {
        const float latent = tile[(static_cast<std::size_t>(c % L) * h + y / 8) * w + x / 8];
        out[(static_cast<std::size_t>(c) * h * 8 + y) * w * 8 + x] =
            latent + 0.01f * static_cast<float>(y - 3 * x) + tile_offset;
      }
  return out;
}

// diffusers' AutoencoderKL.tiled_decode, line by line, on [C][rows][cols] arrays.
using Plane = std::vector<std::vector<std::vector<float>>>;
std::vector<float> diffusers_tiled_decode(const std::vector<float>& z, int L, int h, int w, int tile, int C) {
  const int overlap_size = static_cast<int>(tile * (1 - 0.25));
  const int blend_extent = static_cast<int>(tile * 8 * 0.25);
  const int row_limit = tile * 8 - blend_extent;
  std::vector<std::vector<Plane>> rows;
  for (int i = 0; i < h; i += overlap_size) {
    std::vector<Plane> row;
    for (int j = 0; j < w; j += overlap_size) {
      const int th = std::min(tile, h - i), tw = std::min(tile, w - j);
      std::vector<float> part(static_cast<std::size_t>(L) * th * tw);
      for (int c = 0; c < L; ++c)
        for (int y = 0; y < th; ++y)
          for (int x = 0; x < tw; ++x) part[(c * th + y) * tw + x] = z[(c * h + i + y) * w + j + x];
      const std::vector<float> flat = fake_decode(part, L, th, tw, C);
      Plane p(C, std::vector<std::vector<float>>(th * 8, std::vector<float>(tw * 8)));
      for (int c = 0; c < C; ++c)
        for (int y = 0; y < th * 8; ++y)
          for (int x = 0; x < tw * 8; ++x) p[c][y][x] = flat[(c * th * 8 + y) * tw * 8 + x];
      row.push_back(std::move(p));
    }
    rows.push_back(std::move(row));
  }
  auto blend_v = [](const Plane& a, Plane& b, int extent) {
    extent = std::min({static_cast<int>(a[0].size()), static_cast<int>(b[0].size()), extent});
    for (int y = 0; y < extent; ++y)
      for (std::size_t c = 0; c < b.size(); ++c)
        for (std::size_t x = 0; x < b[c][y].size(); ++x)
          b[c][y][x] = a[c][a[c].size() - extent + y][x] * (1.0f - static_cast<float>(y) / static_cast<float>(extent)) +
                       b[c][y][x] * (static_cast<float>(y) / static_cast<float>(extent));
  };
  auto blend_h = [](const Plane& a, Plane& b, int extent) {
    extent = std::min({static_cast<int>(a[0][0].size()), static_cast<int>(b[0][0].size()), extent});
    for (int x = 0; x < extent; ++x)
      for (std::size_t c = 0; c < b.size(); ++c)
        for (std::size_t y = 0; y < b[c].size(); ++y)
          b[c][y][x] =
              a[c][y][a[c][y].size() - extent + x] * (1.0f - static_cast<float>(x) / static_cast<float>(extent)) +
              b[c][y][x] * (static_cast<float>(x) / static_cast<float>(extent));
  };
  const int H = h * 8, W = w * 8;
  std::vector<float> out(static_cast<std::size_t>(C) * H * W, std::nanf(""));
  int out_y = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    int out_x = 0, kept_rows = 0;
    for (std::size_t j = 0; j < rows[i].size(); ++j) {
      Plane& t = rows[i][j];
      if (i > 0) blend_v(rows[i - 1][j], t, blend_extent);
      if (j > 0) blend_h(rows[i][j - 1], t, blend_extent);
      const int r = std::min(row_limit, static_cast<int>(t[0].size()));
      const int q = std::min(row_limit, static_cast<int>(t[0][0].size()));
      for (int c = 0; c < C; ++c)
        for (int y = 0; y < r; ++y)
          for (int x = 0; x < q; ++x) out[(c * H + out_y + y) * W + out_x + x] = t[c][y][x];
      out_x += q;
      kept_rows = r;
    }
    out_y += kept_rows;
  }
  return out;
}

TEST(VaeTiling, TilesStartEveryThreeQuartersOfATile) {
  EXPECT_EQ(tile_starts(32, 16), (std::vector<int>{0, 12, 24}));
  EXPECT_EQ(tile_starts(64, 32), (std::vector<int>{0, 24, 48}));
  EXPECT_EQ(tile_starts(16, 16), (std::vector<int>{0, 12}));
  EXPECT_EQ(tile_starts(8, 8), (std::vector<int>{0, 6}));
  EXPECT_EQ(tile_starts(5, 8), (std::vector<int>{0}));
}

TEST(VaeTiling, BlendsAndCropsLikeDiffusersAtEvenAndOddGrids) {
  struct Case {
    int h, w, tile;
  };
  for (const Case& k : {Case{32, 32, 16}, Case{24, 40, 8}, Case{20, 12, 12}, Case{16, 16, 16}, Case{9, 30, 8}}) {
    const int L = 4, C = 3;
    const std::vector<float> z = random_floats(static_cast<std::size_t>(L) * k.h * k.w, 77 + k.h * 3 + k.w);
    const std::vector<float> ours = decode_in_tiles(
        z, L, k.h, k.w, k.tile, TiledShape{C, 8},
        [&](const std::vector<float>& part, int th, int tw) { return fake_decode(part, L, th, tw, C); });
    const std::vector<float> reference = diffusers_tiled_decode(z, L, k.h, k.w, k.tile, C);
    ASSERT_EQ(ours.size(), reference.size());
    std::size_t unset = 0, worst_at = 0;
    double worst = 0;
    for (std::size_t i = 0; i < ours.size(); ++i) {
      unset += std::isnan(reference[i]);
      const double d = std::abs(double(ours[i]) - double(reference[i]));
      if (d > worst) worst = d, worst_at = i;
    }
    EXPECT_EQ(unset, 0u) << "the reference left pixels unset at " << k.h << "x" << k.w;
    // The same float operations in the same order as the reference: the same bits.
    EXPECT_EQ(worst, 0.0) << k.h << "x" << k.w << " tile " << k.tile << ": worst at " << worst_at;
  }
}

TEST(VaeTiling, RejectsTilesThatAreNotMultiplesOfFour) {
  const std::vector<float> z(4 * 16 * 16, 0.5f);
  EXPECT_THROW(decode_in_tiles(z, 4, 16, 16, 6, TiledShape{3, 8}, {}), Error);
  Request r;
  r.width = r.height = 256;
  r.vae_tile = 10;
  try {
    check_request(r);
    ADD_FAILURE() << "a tile of 10 latents was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadRequest);
    EXPECT_NE(e.message().find("a multiple of 4"), std::string::npos) << e.message();
  }
}

Request fixture_sized(int side, VaeTiling tiling, int tile) {
  Request r;
  r.prompt = "a lighthouse on a cliff at dusk";
  r.seed = 99;
  r.width = r.height = side;
  r.vae_tiling = tiling;
  r.vae_tile = tile;
  return r;
}

TEST(VaeTiling, LatentsNoLargerThanATileAreDecodedWhole) {
  Engine& engine = fixture_engine();
  const Result whole = engine.generate(fixture_sized(64, VaeTiling::Never, 0));
  // 8×8 latents: as in diffusers, latents no larger than a tile are not tiled, and the result says so.
  const Result tiled = engine.generate(fixture_sized(64, VaeTiling::Always, 8));
  EXPECT_EQ(tiled.vae_tile, 0);
  EXPECT_EQ(whole.vae_tile, 0);
  EXPECT_EQ(tiled.image.rgb, whole.image.rgb);
}

TEST(VaeTiling, TilesMakeAnImageOfTheRightSizeNamedInTheMetadata) {
  Engine& engine = fixture_engine();
  const Request request = fixture_sized(128, VaeTiling::Always, 8);  // 16×16 latents: 3×3 tiles
  const Result tiled = engine.generate(request);
  ASSERT_EQ(tiled.image.width, 128);
  ASSERT_EQ(tiled.image.rgb.size(), 128u * 128u * 3u);
  EXPECT_EQ(tiled.vae_tile, 8);
  EXPECT_EQ(engine.generate(request).image.rgb, tiled.image.rgb) << "tiled decoding is not deterministic";
  const Result whole = engine.generate(fixture_sized(128, VaeTiling::Never, 0));
  EXPECT_NE(whole.image.rgb, tiled.image.rgb) << "the tiles made the whole decode's image: were they used?";
  const auto texts = engine.png_metadata(request, tiled);
  ASSERT_EQ(texts.size(), 2u);
  EXPECT_NE(texts[0].value.find("VAE tiles: 64 px"), std::string::npos) << texts[0].value;
  EXPECT_EQ(nlohmann::json::parse(texts[1].value).at("vae_tile"), 8);
  EXPECT_FALSE(nlohmann::json::parse(engine.png_metadata(request, whole)[1].value).contains("vae_tile"));
}

// A device with less memory, simulated by refusing pooled buffers above a size. The size is measured here, on the
// test device, as the largest buffer a tiled generation asks for (its text encoder, UNet and one 64-pixel tile):
// the whole decode at 128×128 asks for larger ones, so with that limit only the whole decode runs out of memory.
class SmallDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    limit_ = largest_buffer(fixture_sized(128, VaeTiling::Always, 8));
    const std::size_t whole = largest_buffer(fixture_sized(128, VaeTiling::Never, 0));
    std::printf("  largest buffer at 128x128: %zu bytes in tiles of 64 px, %zu bytes whole\n", limit_, whole);
    ASSERT_LT(limit_, whole) << "the whole decode asks for no larger buffer than the tiles: nothing to test";
    fresh_pool();
    cl::limit_allocations(limit_);
  }
  void TearDown() override { cl::limit_allocations(0); }

  // What the pool holds from earlier requests would be reused: a small device never had it.
  static void fresh_pool() {
    fixture_engine().impl().pipeline().prompt_cache().clear();
    fixture_engine().impl().context().trim_pool();
  }
  static std::size_t largest_buffer(const Request& request) {
    fresh_pool();
    cl::reset_largest_allocation();
    (void)fixture_engine().generate(request);
    return cl::largest_allocation();
  }
  std::size_t limit_ = 0;
};

TEST_F(SmallDevice, AutoFallsBackToTilesWhenTheWholeDecodeDoesNotFitAndSaysSo) {
  Engine& engine = fixture_engine();
  const Result result = engine.generate(fixture_sized(128, VaeTiling::Auto, 0));
  EXPECT_EQ(result.vae_tile, 8);  // half of the 16 latents
  ASSERT_FALSE(result.warnings.empty());
  const std::string& warning = result.warnings.back();
  EXPECT_NE(warning.find("tiles of 64×64 pixels"), std::string::npos) << warning;
  EXPECT_NE(warning.find("not pixel-identical"), std::string::npos) << warning;
  // The same as asking for those tiles on a device where everything fits.
  cl::limit_allocations(0);
  EXPECT_EQ(engine.generate(fixture_sized(128, VaeTiling::Always, 8)).image.rgb, result.image.rgb);
}

TEST_F(SmallDevice, NeverFailsWithOutOfMemoryAndTheNextRequestWorks) {
  Engine& engine = fixture_engine();
  try {
    (void)engine.generate(fixture_sized(128, VaeTiling::Never, 0));
    ADD_FAILURE() << "a decode that does not fit succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory) << e.message();
    EXPECT_NE(e.message().find("clCreateBuffer"), std::string::npos) << e.message();
  }
  cl::limit_allocations(0);
  EXPECT_EQ(engine.generate(fixture_sized(128, VaeTiling::Never, 0)).image.width, 128);
}

}  // namespace
}  // namespace sdt::test
