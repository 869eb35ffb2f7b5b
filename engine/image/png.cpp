// PNG files for generated images and init images, with libpng: 8-bit RGB out, with the generation
// parameters as text chunks (tEXt, or iTXt for text beyond ASCII); any PNG in (palette, grey, alpha, 16-bit,
// interlaced) read back as RGB8. Implements engine/include/sdt/image.hpp. Reference: the PNG specification (iTXt, chunk
// order) and libpng's manual (libpng-manual.txt: error handling with setjmp, memory I/O, input transformations).
//
// libpng reports errors with longjmp. A longjmp that skips a C++ destructor is undefined behaviour, so every
// libpng call runs inside encode_rows()/decode() below, whose frames own no object with a destructor
// (everything they fill is owned by the caller), and callbacks never let a C++ exception cross libpng: they
// catch it, then report through png_error.
#include <png.h>

#include <algorithm>
#include <cerrno>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <system_error>

#include "base/log.hpp"
#include "base/utf8.hpp"
#include "sdt/error.hpp"
#include "sdt/files.hpp"
#include "sdt/image.hpp"
#include "sdt/utf8_path.hpp"

namespace sdt {

namespace {

constexpr std::uint32_t kMaxDimension = 16384;           // far beyond what the engine makes or accepts
constexpr std::uintmax_t kMaxPngFileBytes = 512u << 20;  // an init image of 16384^2 RGBA barely compresses
constexpr int kZlibLevel = 6;                            // fixed, so identical input gives identical bytes

// What the libpng callbacks share with the code that set them up. Plain data only (see the file comment).
struct PngIo {
  char error[256] = {};
  // writing: the output, owned by the caller
  std::vector<std::uint8_t>* out = nullptr;
  // reading: the input
  const std::uint8_t* in = nullptr;
  std::size_t in_size = 0;
  std::size_t in_pos = 0;
};

void on_error(png_structp png, png_const_charp message) {
  auto* io = static_cast<PngIo*>(png_get_error_ptr(png));
  std::snprintf(io->error, sizeof io->error, "%s", message ? message : "libpng error");
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp message) {
  sdt::log::get("engine")->debug("libpng: {}", message ? message : "");
}

void on_write(png_structp png, png_bytep data, png_size_t length) {
  auto* io = static_cast<PngIo*>(png_get_io_ptr(png));
  bool failed = false;
  try {
    io->out->insert(io->out->end(), data, data + length);
  } catch (...) {
    failed = true;
  }
  if (failed) png_error(png, "out of memory while encoding");
}

void on_flush(png_structp) {}

void on_read(png_structp png, png_bytep data, png_size_t length) {
  auto* io = static_cast<PngIo*>(png_get_io_ptr(png));
  if (io->in_size - io->in_pos < length) png_error(png, "file is truncated");
  std::memcpy(data, io->in + io->in_pos, length);
  io->in_pos += length;
}

bool is_valid_key(const std::string& key) {
  // PNG keywords: 1-79 Latin-1 printable characters, no leading, trailing or double spaces.
  if (key.empty() || key.size() > 79 || key.front() == ' ' || key.back() == ' ') return false;
  for (std::size_t i = 0; i < key.size(); ++i) {
    const auto c = static_cast<unsigned char>(key[i]);
    if (c < 32 || (c > 126 && c < 161)) return false;
    if (c == ' ' && i > 0 && key[i - 1] == ' ') return false;
  }
  return true;
}

// Text chunks are written as A1111 writes them (PIL's PngInfo.add_text: tEXt when the text encodes as Latin-1,
// otherwise iTXt, never compressed), except that a Latin-1 text beyond ASCII goes into iTXt too: ComfyUI's reader
// (ComfyUI_frontend, src/scripts/metadata/png.ts) decodes tEXt as UTF-8, and ignores iTXt's compression flag, so
// "café" in a Latin-1 tEXt or a compressed iTXt would reach it garbled. Printable ASCII and line breaks read the
// same in every reader.
bool fits_text_chunk(const std::string& text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return (c >= 0x20 && c < 0x7F) || c == '\n'; });
}

// All libpng calls of encoding. Returns false (message in io.error) on a libpng error.
bool encode_rows(PngIo& io, const Image& image, png_text* texts, int text_count) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &io, on_error, on_warning);
  if (!png) {
    std::snprintf(io.error, sizeof io.error, "png_create_write_struct failed");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(png_jmpbuf(png))) {
    if (!info) std::snprintf(io.error, sizeof io.error, "png_create_info_struct failed");
    png_destroy_write_struct(&png, &info);
    return false;
  }
  png_set_write_fn(png, &io, on_write, on_flush);
  png_set_compression_level(png, kZlibLevel);
  png_set_IHDR(png, info, static_cast<png_uint_32>(image.width), static_cast<png_uint_32>(image.height), 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (text_count > 0) png_set_text(png, info, texts, text_count);  // written before the image data
  png_write_info(png, info);
  const std::size_t stride = static_cast<std::size_t>(image.width) * 3;
  for (int y = 0; y < image.height; ++y)
    png_write_row(png, const_cast<png_bytep>(image.rgb.data() + static_cast<std::size_t>(y) * stride));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

struct DecodedHeader {
  png_uint_32 width = 0;
  png_uint_32 height = 0;
};

// All libpng calls of decoding: RGB8 rows into `rgb` (sized here, before any row is read) and the text
// chunks into `texts` (which may be null). Returns false (message in io.error) on a libpng error.
bool decode(PngIo& io, std::vector<std::uint8_t>& rgb, DecodedHeader& header, std::vector<PngText>* texts) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &io, on_error, on_warning);
  if (!png) {
    std::snprintf(io.error, sizeof io.error, "png_create_read_struct failed");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  png_infop end_info = info ? png_create_info_struct(png) : nullptr;
  if (!end_info || setjmp(png_jmpbuf(png))) {
    if (!end_info) std::snprintf(io.error, sizeof io.error, "png_create_info_struct failed");
    png_destroy_read_struct(&png, info ? &info : nullptr, end_info ? &end_info : nullptr);
    return false;
  }
  png_set_read_fn(png, &io, on_read);
  png_set_user_limits(png, kMaxDimension, kMaxDimension);
  png_read_info(png, info);
  header.width = png_get_image_width(png, info);
  header.height = png_get_image_height(png, info);
  const int color_type = png_get_color_type(png, info);
  // Whatever the file holds, the rows come out as 8-bit RGB: palette and low-bit grey expanded, 16-bit
  // reduced, grey replicated, alpha dropped (PIL's convert("RGB") also drops it rather than compositing).
  png_set_expand(png);
  png_set_strip_16(png);
  png_set_strip_alpha(png);
  if (color_type == PNG_COLOR_TYPE_GRAY || color_type == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  const int passes = png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != static_cast<std::size_t>(header.width) * 3)
    png_error(png, "unexpected row layout after conversion to RGB");
  // No exception may leave this frame, and png_error must not run inside a handler: catch, then report.
  const std::size_t stride = static_cast<std::size_t>(header.width) * 3;
  bool allocated = true;
  try {
    rgb.resize(stride * header.height);
  } catch (...) {
    allocated = false;
  }
  if (!allocated) png_error(png, "out of memory for the image");
  for (int pass = 0; pass < passes; ++pass)
    for (png_uint_32 y = 0; y < header.height; ++y) png_read_row(png, rgb.data() + y * stride, nullptr);
  png_read_end(png, end_info);
  if (texts) {
    for (png_infop source : {info, end_info}) {
      png_textp text = nullptr;
      int count = 0;
      png_get_text(png, source, &text, &count);
      for (int i = 0; i < count; ++i) {
        const bool utf8 =
            text[i].compression == PNG_ITXT_COMPRESSION_NONE || text[i].compression == PNG_ITXT_COMPRESSION_zTXt;
        const std::size_t length = utf8 ? text[i].itxt_length : text[i].text_length;
        bool failed = false;
        try {
          texts->push_back({latin1_to_utf8(text[i].key), utf8 ? std::string(text[i].text, length)
                                                               : latin1_to_utf8(std::string_view(text[i].text, length))});
        } catch (...) {
          failed = true;
        }
        if (failed) png_error(png, "out of memory for the text chunks");
      }
    }
  }
  png_destroy_read_struct(&png, &info, &end_info);
  return true;
}

std::string os_error(int code) {
  return std::system_category().message(code);
}

}  // namespace

std::vector<std::uint8_t> encode_png(const Image& image, const std::vector<PngText>& texts) {
  if (image.width <= 0 || image.height <= 0 || static_cast<std::uint32_t>(image.width) > kMaxDimension ||
      static_cast<std::uint32_t>(image.height) > kMaxDimension ||
      image.rgb.size() != static_cast<std::size_t>(image.width) * static_cast<std::size_t>(image.height) * 3)
    throw Error(ErrorKind::Internal, "encode_png: image is " + std::to_string(image.width) + "x" +
                                         std::to_string(image.height) + " with " + std::to_string(image.rgb.size()) +
                                         " bytes; expected width*height*3 bytes, sides 1 to " +
                                         std::to_string(kMaxDimension));
  std::vector<std::string> values;
  std::vector<png_text> chunks(texts.size());
  values.reserve(texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    if (!is_valid_key(texts[i].key))
      throw Error(ErrorKind::BadRequest,
                  "PNG text key \"" + texts[i].key + "\" is not a PNG keyword (1-79 printable Latin-1 characters)");
    // iTXt text must be UTF-8 and libpng measures it with strlen: invalid sequences and NUL become U+FFFD.
    values.push_back(to_valid_utf8(texts[i].value, /*replace_nul=*/true));
    png_text& chunk = chunks[i];
    std::memset(&chunk, 0, sizeof chunk);
    chunk.key = const_cast<char*>(texts[i].key.c_str());
    chunk.text = const_cast<char*>(values.back().c_str());
    if (fits_text_chunk(values.back())) {
      chunk.compression = PNG_TEXT_COMPRESSION_NONE;
      chunk.text_length = values.back().size();
    } else {
      chunk.compression = PNG_ITXT_COMPRESSION_NONE;
      chunk.itxt_length = values.back().size();
      chunk.lang = const_cast<char*>("");
      chunk.lang_key = const_cast<char*>("");
    }
  }
  std::vector<std::uint8_t> out;
  out.reserve(static_cast<std::size_t>(image.width) * static_cast<std::size_t>(image.height) + 4096);
  PngIo io;
  io.out = &out;
  if (!encode_rows(io, image, chunks.data(), static_cast<int>(chunks.size())))
    throw Error(ErrorKind::Internal, std::string("encode_png: libpng: ") + io.error);
  return out;
}

void write_png(const std::filesystem::path& path, const Image& image, const std::vector<PngText>& texts) {
  const std::vector<std::uint8_t> bytes = encode_png(image, texts);
  write_file_atomically(path, bytes.data(), bytes.size());
}

Image read_png(const std::filesystem::path& path, std::vector<PngText>* texts) {
  auto fail = [&](const std::string& what) -> Error {
    return Error(ErrorKind::BadRequest, "cannot read image " + path_to_utf8(path) + ": " + what,
                 "use an 8- or 16-bit PNG file (RGB, RGBA, grey or palette)");
  };
  // Before opening: a FIFO would block the read for ever.
  if (const std::string problem = regular_file_problem(path); !problem.empty()) throw fail("it " + problem);
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw fail(ec.message());
  if (size > kMaxPngFileBytes) throw fail("the file is " + std::to_string(size) + " bytes; too large for an image");
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw fail("cannot open: " + os_error(errno));
    in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (static_cast<std::size_t>(in.gcount()) != bytes.size()) throw fail("read failed");
  }
  if (bytes.size() < 8 || png_sig_cmp(bytes.data(), 0, 8) != 0) throw fail("not a PNG file (no PNG signature)");
  PngIo io;
  io.in = bytes.data();
  io.in_size = bytes.size();
  Image image;
  DecodedHeader header;
  std::vector<PngText> found;
  if (!decode(io, image.rgb, header, texts ? &found : nullptr)) throw fail(std::string("corrupt PNG: ") + io.error);
  image.width = static_cast<int>(header.width);
  image.height = static_cast<int>(header.height);
  if (texts) *texts = std::move(found);
  return image;
}

}  // namespace sdt
