// The KV pool's storage: zero without a memset, released on destruction, movable.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/model/kv_pool.h"
#include "engine/model/model_config.h"
#include "engine/platform/zeroed_pages.h"

using namespace tandem;

TEST(ZeroedPages, ReadAsZeroUntilWrittenAndMove) {
  const size_t bytes = size_t{64} << 20;
  zeroed_pages a(bytes);
  ASSERT_NE(a.data(), nullptr);
  auto* p = static_cast<unsigned char*>(a.data());
  for (size_t off : {size_t{0}, size_t{4096} * 7 + 3, bytes - 1}) EXPECT_EQ(p[off], 0) << off;
  p[12345] = 42;
  zeroed_pages b(std::move(a));
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.bytes(), 0u);
  EXPECT_EQ(static_cast<unsigned char*>(b.data())[12345], 42);
  EXPECT_EQ(zeroed_pages(0).data(), nullptr);
}

TEST(ZeroedPages, AFreshKvPoolReadsZeros) {
  model_config c;
  c.n_layer = 2;
  c.n_embd = 128;
  c.n_head = 2;
  c.n_head_kv = 2;
  c.head_dim = 64;
  kv_pool_options o;
  o.block_tokens = 16;
  o.capacity_tokens = 1 << 14;
  kv_pool pool(c, o);
  EXPECT_EQ(pool.bytes(), size_t{2} * 2 * (1 << 14) * 2 * 64 * sizeof(kernels::f16_bits));
  const auto* k = pool.k(1, pool.n_blocks() - 1, 1);
  const auto* v = pool.v(1, pool.n_blocks() - 1, 1);
  for (int i = 0; i < 16 * 64; ++i) {
    ASSERT_EQ(k[i], 0);
    ASSERT_EQ(v[i], 0);
  }
}
