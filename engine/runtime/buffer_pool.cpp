#include "runtime/buffer_pool.hpp"

#include <algorithm>
#include <iterator>
#include <numeric>

namespace sdt::cl {

void PoolState::note_request(std::size_t bytes, std::size_t held) {
  in_use_bytes_ += held;
  requested_bytes_ += bytes;
  requested_high_ = std::max(requested_high_, requested_bytes_);
  if (is_large(bytes)) {
    large_requested_ += bytes;
    large_high_ = std::max(large_high_, large_requested_);
  }
}

void PoolState::record(std::size_t bytes, PoolTag& tag) {
  tag.epoch = epoch_;
  if (!record_complete_) return;
  if (record_.size() >= kMaxRecorded) {
    record_complete_ = false;
    record_.clear();
    return;
  }
  tag.trace = static_cast<std::uint32_t>(record_.size());
  record_.push_back({bytes, ++events_, 0});
}

PoolState::Decision PoolState::take(std::size_t bytes) {
  Decision d;
  d.tag.requested = bytes;
  if (!is_large(bytes)) {
    d.bytes = bytes;
    if (auto it = free_.find(bytes); it != free_.end()) {
      d.mem = std::move(it->second.mem);
      free_.erase(it);
      note_request(bytes, bytes);
    }
    return d;
  }
  const std::size_t index = large_index_++;
  if (planned_) {
    if (index < plan_slot_.size() && planned_from_[index].bytes == bytes) {
      const std::uint32_t slot = plan_slot_[index];
      if (slot_free_[slot] != free_.end()) {
        auto it = slot_free_[slot];
        slot_free_[slot] = free_.end();
        d.mem = std::move(it->second.mem);
        d.bytes = it->first;
        free_.erase(it);
        d.tag.slot = slot;
        whole_large_in_use_ += d.bytes;
        note_request(bytes, d.bytes);
        record(bytes, d.tag);
        return d;
      }
      if (!slot_made_[slot]) {  // its first use: the caller makes it, at the planned size
        d.bytes = slot_bytes_[slot];
        d.tag.slot = slot;
        d.tag.epoch = epoch_;
        return d;
      }
    }
    drop_plan();  // this generation departs from the last one
  }
  return take_dynamic(bytes);
}

PoolState::Decision PoolState::take_dynamic(std::size_t bytes) {
  Decision d;
  d.tag.requested = bytes;
  if (auto it = free_.lower_bound(bytes); it != free_.end()) {
    // A larger buffer within the slack, and only while the bytes held, counted in full, stay within the
    // high-water mark of what was asked for, so that a larger buffer never makes the pool grow later.
    const std::size_t size = it->first;
    if (size == bytes || (size / kMaxSlack <= bytes && whole_large_in_use_ + size <= large_high_)) {
      d.mem = std::move(it->second.mem);
      d.bytes = size;
      free_.erase(it);
      whole_large_in_use_ += size;
      note_request(bytes, size);
      record(bytes, d.tag);
      return d;
    }
  }
  d.bytes = bytes;
  const std::uint64_t high = std::max(large_high_, large_requested_ + bytes);
  const std::uint64_t allowed = std::max(high + high / kHeadroomDivisor, whole_large_in_use_ + bytes);
  if (whole_large_bytes_ + bytes <= allowed) return d;
  // Largest first (then the longest free): the fewest releases make the room, and what goes is typically a
  // size the work has moved past (a level the VAE has left), not the smaller ones every stage reuses.
  std::vector<FreeList::iterator> order;
  for (auto it = free_.lower_bound(kLargeBytes); it != free_.end(); ++it) order.push_back(it);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a->first != b->first ? a->first > b->first : a->second.returned < b->second.returned;
  });
  for (auto it : order) {
    if (whole_large_bytes_ + bytes <= allowed) break;
    remove_free(it, d.release);
  }
  return d;
}

void PoolState::note_created(std::size_t bytes, PoolTag& tag) {
  pooled_bytes_ += bytes;
  ++allocations_;
  note_request(tag.requested, bytes);
  if (is_large(bytes)) {
    whole_large_bytes_ += bytes;
    whole_large_in_use_ += bytes;
  }
  if (tag.slot != PoolTag::kNone) {
    if (planned_ && tag.epoch == epoch_ && tag.slot < slot_made_.size())
      slot_made_[tag.slot] = true;
    else
      tag.slot = PoolTag::kNone;  // the plan was dropped meanwhile
  }
  if (is_large(tag.requested)) record(tag.requested, tag);
  update_peak();
}

void PoolState::give_back(MemHandle mem, std::size_t bytes, const PoolTag& tag) {
  in_use_bytes_ -= bytes;
  requested_bytes_ -= tag.requested;
  if (is_large(tag.requested)) large_requested_ -= tag.requested;
  if (is_large(bytes)) whole_large_in_use_ -= bytes;
  const bool current = tag.epoch == epoch_;
  if (current && tag.trace < record_.size()) record_[tag.trace].returned = ++events_;
  const bool slotted = current && planned_ && tag.slot < slot_free_.size();
  auto it = free_.emplace(bytes, FreeBuffer{std::move(mem), ++clock_, slotted ? tag.slot : PoolTag::kNone});
  if (slotted) slot_free_[tag.slot] = it;
}

void PoolState::drop_plan() {
  for (auto it : slot_free_)
    if (it != free_.end()) it->second.slot = PoolTag::kNone;
  // The plan itself (slot_bytes_, plan_slot_) stays with the record it was made from: the next generation that
  // requests the same gets it back without planning (make_plan).
  planned_ = false;
  slot_free_.clear();
  slot_made_.clear();
}

namespace {

struct Plan {
  std::vector<std::size_t> slot_bytes;
  std::vector<std::uint32_t> slot_of;  // per request
  std::uint64_t total() const { return std::accumulate(slot_bytes.begin(), slot_bytes.end(), std::uint64_t(0)); }
};

// Greedy by size: the largest requests first, each into the smallest planned buffer that is free for its whole
// lifetime (a buffer returned at event t serves a request made after t), else a new buffer of its size.
template <typename Recorded>
Plan plan_by_size(const std::vector<Recorded>& record) {
  const std::size_t n = record.size();
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return record[a].bytes > record[b].bytes; });
  Plan plan;
  plan.slot_of.assign(n, 0);
  std::vector<std::map<std::uint64_t, std::uint64_t>> busy;  // per planned buffer: made → returned
  for (std::uint32_t i : order) {
    const std::uint64_t made = record[i].made, returned = record[i].returned;
    std::uint32_t best = PoolTag::kNone;
    for (std::uint32_t s = 0; s < busy.size(); ++s) {
      if (best != PoolTag::kNone && plan.slot_bytes[s] >= plan.slot_bytes[best]) continue;
      auto next = busy[s].lower_bound(made);
      if (next != busy[s].end() && next->first < returned) continue;
      if (next != busy[s].begin() && std::prev(next)->second > made) continue;
      best = s;
    }
    if (best == PoolTag::kNone) {
      best = static_cast<std::uint32_t>(busy.size());
      busy.emplace_back();
      plan.slot_bytes.push_back(record[i].bytes);
    }
    busy[best].emplace(made, returned);
    plan.slot_of[i] = best;
  }
  return plan;
}

// Greedy in request order: each request into a planned buffer already free, the one that has to grow least
// (then the closest in size), else a new one. Better than by size where a large tensor is made while smaller
// ones are still alive (the VAE's upsampling convolutions).
template <typename Recorded>
Plan plan_by_time(const std::vector<Recorded>& record) {
  Plan plan;
  plan.slot_of.assign(record.size(), 0);
  std::vector<std::uint64_t> free_at;
  for (std::uint32_t i = 0; i < record.size(); ++i) {
    const std::size_t bytes = record[i].bytes;
    std::uint32_t best = PoolTag::kNone;
    std::size_t best_growth = 0, best_distance = 0;
    for (std::uint32_t s = 0; s < free_at.size(); ++s) {
      if (free_at[s] > record[i].made) continue;
      const std::size_t have = plan.slot_bytes[s];
      const std::size_t growth = bytes > have ? bytes - have : 0;
      const std::size_t distance = bytes > have ? bytes - have : have - bytes;
      if (best == PoolTag::kNone || growth < best_growth || (growth == best_growth && distance < best_distance)) {
        best = s;
        best_growth = growth;
        best_distance = distance;
      }
    }
    if (best == PoolTag::kNone) {
      best = static_cast<std::uint32_t>(free_at.size());
      free_at.push_back(0);
      plan.slot_bytes.push_back(bytes);
    }
    plan.slot_bytes[best] = std::max(plan.slot_bytes[best], bytes);
    free_at[best] = record[i].returned;
    plan.slot_of[i] = best;
  }
  return plan;
}

}  // namespace

void PoolState::make_plan() {
  // The planners are functions of the record alone: the same record as the last plan's, the same plan.
  if (record_ != planned_from_) {
    // Two greedy assignments, the one with fewer bytes kept: neither is best on every generation of SD-Turbo
    // (at 512² with the full VAE: 758 MiB by size, 708 by time, for a live peak of 640).
    Plan by_size = plan_by_size(record_);
    Plan by_time = plan_by_time(record_);
    Plan& plan = by_time.total() <= by_size.total() ? by_time : by_size;
    planned_from_ = record_;
    slot_bytes_ = std::move(plan.slot_bytes);
    plan_slot_ = std::move(plan.slot_of);
    ++plans_made_;
  }
  planned_ = true;
}

std::vector<MemHandle> PoolState::settle() {
  std::vector<MemHandle> released;
  const bool complete = record_complete_ && !record_.empty() && whole_large_in_use_ == 0 &&
                        std::all_of(record_.begin(), record_.end(), [](const Recorded& r) { return r.returned; });
  drop_plan();
  if (complete) {
    make_plan();
    // The free large buffers of a planned size become those planned buffers; the others go (the queue is idle,
    // so releasing them waits for nothing). Planned buffers not there yet are made on first use.
    slot_free_.assign(slot_bytes_.size(), free_.end());
    slot_made_.assign(slot_bytes_.size(), false);
    std::multimap<std::size_t, std::uint32_t> open;
    for (std::uint32_t s = 0; s < slot_bytes_.size(); ++s) open.emplace(slot_bytes_[s], s);
    for (auto it = free_.lower_bound(kLargeBytes); it != free_.end();) {
      if (auto match = open.find(it->first); match != open.end()) {
        it->second.slot = match->second;
        slot_free_[match->second] = it;
        slot_made_[match->second] = true;
        open.erase(match);
        ++it;
      } else {
        remove_free(it++, released);
      }
    }
  }
  ++epoch_;
  record_.clear();
  events_ = 0;
  record_complete_ = true;
  large_index_ = 0;
  return released;
}

void PoolState::remove_free(FreeList::iterator it, std::vector<MemHandle>& out) {
  pooled_bytes_ -= it->first;
  if (is_large(it->first)) whole_large_bytes_ -= it->first;
  ++releases_;
  out.push_back(std::move(it->second.mem));
  free_.erase(it);
}

std::vector<MemHandle> PoolState::take_all_free() {
  drop_plan();
  std::vector<MemHandle> released;
  released.reserve(free_.size());
  while (!free_.empty()) remove_free(free_.begin(), released);
  return released;
}

void PoolState::note_persistent(std::int64_t delta) {
  persistent_bytes_ += delta;
  update_peak();
}

MemoryStats PoolState::stats() const {
  MemoryStats s;
  s.pooled_bytes = pooled_bytes_;
  s.persistent_bytes = persistent_bytes_;
  s.peak_bytes = peak_bytes_;
  s.in_use_bytes = in_use_bytes_;
  s.requested_bytes = requested_bytes_;
  s.requested_high_bytes = requested_high_;
  s.planned_bytes = planned_ ? std::accumulate(slot_bytes_.begin(), slot_bytes_.end(), std::uint64_t(0)) : 0;
  s.allocations = allocations_;
  s.releases = releases_;
  s.plans_made = plans_made_;
  return s;
}

void PoolState::update_peak() {
  peak_bytes_ = std::max(peak_bytes_, pooled_bytes_ + persistent_bytes_);
}

}  // namespace sdt::cl
