// The prompt-embedding cache: text-encoder outputs kept on the device, keyed by token ids (two prompts that
// tokenize alike share an entry), least recently used evicted first. A second generation with the same prompt
// and another seed skips the text encoder.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <utility>
#include <vector>

#include "nn/tensor.hpp"

namespace sdt::pipeline {

class PromptCache {
 public:
  explicit PromptCache(std::size_t capacity = 16) : capacity_(capacity > 0 ? capacity : 1) {}

  // The cached hidden states for these ids (and marks them most recently used), or null.
  const nn::Tensor* find(const std::vector<std::int32_t>& ids);
  // Stores hidden states [T, C]; evicts the least recently used entry beyond capacity. Returns the stored tensor.
  const nn::Tensor& insert(std::vector<std::int32_t> ids, nn::Tensor hidden);
  void clear() { entries_.clear(); }
  std::size_t size() const { return entries_.size(); }
  std::size_t capacity() const { return capacity_; }

 private:
  std::size_t capacity_;
  std::list<std::pair<std::vector<std::int32_t>, nn::Tensor>> entries_;  // front: most recently used
};

}  // namespace sdt::pipeline
