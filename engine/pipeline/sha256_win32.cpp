// SHA-256 with Windows' CNG (BCrypt, in bcrypt.dll since Vista); see sha256.hpp.
#include <windows.h>
// windows.h first: bcrypt.h needs its types.
#include <bcrypt.h>

#include <cstdio>
#include <string>

#include "pipeline/sha256.hpp"
#include "sdt/error.hpp"

namespace sdt::pipeline {

namespace {

bool ok(NTSTATUS status) {
  return status >= 0;
}

[[noreturn]] void fail(const char* call, NTSTATUS status) {
  char code[16];
  std::snprintf(code, sizeof code, "0x%08lx", static_cast<unsigned long>(status));
  throw Error(ErrorKind::Internal, std::string("SHA-256: ") + call + " failed with NTSTATUS " + code);
}

}  // namespace

struct Sha256::State {
  BCRYPT_ALG_HANDLE algorithm = nullptr;
  BCRYPT_HASH_HANDLE hash = nullptr;
  ~State() {
    if (hash) BCryptDestroyHash(hash);
    if (algorithm) BCryptCloseAlgorithmProvider(algorithm, 0);
  }
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
  NTSTATUS status = BCryptOpenAlgorithmProvider(&state_->algorithm, BCRYPT_SHA256_ALGORITHM, nullptr, 0);
  if (!ok(status)) fail("BCryptOpenAlgorithmProvider", status);
  // No hash-object buffer: CNG allocates it (Windows 7 and later).
  status = BCryptCreateHash(state_->algorithm, &state_->hash, nullptr, 0, nullptr, 0, 0);
  if (!ok(status)) fail("BCryptCreateHash", status);
}

Sha256::~Sha256() = default;

void Sha256::update(const void* data, std::size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  while (size > 0) {  // ULONG lengths: feed at most 1 GiB at a time
    const ULONG part = static_cast<ULONG>(size < (1u << 30) ? size : (1u << 30));
    const NTSTATUS status = BCryptHashData(state_->hash, const_cast<PUCHAR>(bytes), part, 0);
    if (!ok(status)) fail("BCryptHashData", status);
    bytes += part;
    size -= part;
  }
}

std::array<std::uint8_t, 32> Sha256::finish() {
  std::array<std::uint8_t, 32> digest{};
  const NTSTATUS status = BCryptFinishHash(state_->hash, digest.data(), static_cast<ULONG>(digest.size()), 0);
  if (!ok(status)) fail("BCryptFinishHash", status);
  return digest;
}

void lower_current_thread_priority() {
  SetThreadPriority(GetCurrentThread(), THREAD_PRIORITY_BELOW_NORMAL);
}

}  // namespace sdt::pipeline
