// The prompt-embedding cache: hits by token ids, least recently used evicted first.
#include <gtest/gtest.h>

#include "pipeline/prompt_cache.hpp"
#include "test_common.hpp"

namespace sdt::test {
namespace {

TEST(PromptCache, FindsByTokenIdsAndEvictsTheLeastRecentlyUsed) {
  auto ctx = make_context();
  pipeline::PromptCache cache(2);
  auto hidden = [&](float v) { return nn::upload(*ctx, std::vector<float>(8, v), {2, 4}); };
  const std::vector<std::int32_t> a = {49406, 320, 49407}, b = {49406, 321, 49407}, c = {49406, 322, 49407};
  cache.insert(a, hidden(1));
  cache.insert(b, hidden(2));
  ASSERT_NE(cache.find(a), nullptr);  // a is now the most recently used
  cache.insert(c, hidden(3));         // evicts b
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.find(b), nullptr);
  ASSERT_NE(cache.find(a), nullptr);
  ASSERT_NE(cache.find(c), nullptr);
  EXPECT_EQ(nn::download(*ctx, *cache.find(c))[0], 3.0f);
  EXPECT_EQ(nn::download(*ctx, *cache.find(a))[0], 1.0f);
}

TEST(PromptCache, ReplacesAnEntryInsertedTwice) {
  auto ctx = make_context();
  pipeline::PromptCache cache(4);
  const std::vector<std::int32_t> a = {49406, 320, 49407};
  cache.insert(a, nn::upload(*ctx, std::vector<float>(4, 1.0f), {1, 4}));
  cache.insert(a, nn::upload(*ctx, std::vector<float>(4, 5.0f), {1, 4}));
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(nn::download(*ctx, *cache.find(a))[0], 5.0f);
}

}  // namespace
}  // namespace sdt::test
