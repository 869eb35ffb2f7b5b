// SHA-256 with OpenSSL's libcrypto (EVP interface); see sha256.hpp.
#include <openssl/evp.h>
#include <sys/resource.h>

#include "pipeline/sha256.hpp"
#include "sdt/error.hpp"

namespace sdt::pipeline {

struct Sha256::State {
  EVP_MD_CTX* ctx = nullptr;
  ~State() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
  state_->ctx = EVP_MD_CTX_new();
  if (!state_->ctx || EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr) != 1)
    throw Error(ErrorKind::Internal, "SHA-256: OpenSSL's EVP_DigestInit_ex failed", "reinstall libssl");
}

Sha256::~Sha256() = default;

void Sha256::update(const void* data, std::size_t size) {
  if (EVP_DigestUpdate(state_->ctx, data, size) != 1)
    throw Error(ErrorKind::Internal, "SHA-256: OpenSSL's EVP_DigestUpdate failed");
}

std::array<std::uint8_t, 32> Sha256::finish() {
  std::array<std::uint8_t, 32> digest{};
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(state_->ctx, digest.data(), &length) != 1 || length != digest.size())
    throw Error(ErrorKind::Internal, "SHA-256: OpenSSL's EVP_DigestFinal_ex failed");
  return digest;
}

void lower_current_thread_priority() {
  // On Linux a thread is a task of its own: PRIO_PROCESS with 0 renices the calling thread only.
  setpriority(PRIO_PROCESS, 0, 10);
}

}  // namespace sdt::pipeline
