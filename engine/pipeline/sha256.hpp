// SHA-256 (FIPS 180-4) from the platform's own implementation: OpenSSL's libcrypto on Linux (sha256_posix.cpp),
// Windows' CNG (bcrypt.dll, sha256_win32.cpp), so the Windows build needs no library of its own for it. Both use
// the CPU's SHA instructions where there are some: a 5 GB checkpoint hashes in seconds.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace sdt::pipeline {

class Sha256 {
 public:
  Sha256();  // throws sdt::Error (Internal) when the platform's implementation is unavailable
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, std::size_t size);
  std::array<std::uint8_t, 32> finish();  // once

 private:
  struct State;
  std::unique_ptr<State> state_;
};

std::string to_hex(const std::array<std::uint8_t, 32>& digest);  // lowercase
std::string sha256_hex(const void* data, std::size_t size);

// The current thread yields to the rest of the app (background hashing must not slow a generation on a CPU device).
void lower_current_thread_priority();

}  // namespace sdt::pipeline
