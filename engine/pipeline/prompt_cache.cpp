#include "pipeline/prompt_cache.hpp"

namespace sdt::pipeline {

const nn::Tensor* PromptCache::find(const std::vector<std::int32_t>& ids) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->first == ids) {
      entries_.splice(entries_.begin(), entries_, it);
      return &entries_.front().second;
    }
  }
  return nullptr;
}

const nn::Tensor& PromptCache::insert(std::vector<std::int32_t> ids, nn::Tensor hidden) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->first == ids) {
      entries_.erase(it);
      break;
    }
  }
  entries_.emplace_front(std::move(ids), std::move(hidden));
  while (entries_.size() > capacity_) entries_.pop_back();
  return entries_.front().second;
}

}  // namespace sdt::pipeline
