// The KV pool's storage: zero without a memset, released on destruction, movable; its blocks
// laid out in groups (kv_pool.h), so a fresh block's first write commits only its group's pages.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

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

TEST(KvPoolLayout, EveryLayerBlockAndHeadHasItsOwnSlot) {
  // 37 blocks: two whole groups of 16 and a partial one; a local pool of 21 beside.
  model_config c;
  c.n_layer = 5;
  c.n_embd = 128;
  c.n_head = 2;
  c.n_head_kv = 2;
  c.head_dim = 64;
  c.n_swa = 64;
  c.layer_is_swa = {1, 0, 1, 0, 1};
  ASSERT_TRUE(c.has_swa());
  kv_pool pool(c, kv_pool_options{16, 37 * 16, 0, kv_cache_dtype::f16, 21});
  ASSERT_EQ(pool.n_blocks(), 37);
  const size_t n = pool.head_block_bytes();
  uint8_t id = 1;
  auto each = [&](auto&& f) {
    for (uint32_t l = 0; l < c.n_layer; ++l) {
      const int32_t blocks = pool.in_local_pool(l) ? pool.n_local_blocks() : pool.n_blocks();
      for (int32_t b = 0; b < blocks; ++b) {
        for (uint32_t h = 0; h < c.n_head_kv; ++h) f(pool.k_bytes(l, b, h), pool.v_bytes(l, b, h));
      }
    }
  };
  each([&](std::byte* k, std::byte* v) {  // a whole slot of one value each, K and V apart
    std::memset(k, id, n);
    std::memset(v, id ^ 0x80, n);
    id = static_cast<uint8_t>(id % 127 + 1);
  });
  id = 1;
  each([&](std::byte* k, std::byte* v) {  // none overwrote another
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(static_cast<uint8_t>(k[i]), id);
      ASSERT_EQ(static_cast<uint8_t>(v[i]), id ^ 0x80);
    }
    id = static_cast<uint8_t>(id % 127 + 1);
  });
  EXPECT_EQ(pool.bytes(), size_t{37} * pool.block_bytes() + size_t{21} * pool.block_bytes(true));
}

TEST(KvPoolLayout, AFreshBlockCommitsItsGroupOnly) {
  // SmolLM2-135M's shape: 30 layers of 3 KV heads of 64, 6 KiB a layer a block. With one
  // array per layer, writing block 0 everywhere (as a step does) touched 30 pages 1.5 MiB
  // apart in K alone (43 MiB from first to last), each a 2 MiB huge page where the kernel
  // grants them; grouped, block 0 of every layer lies within its group's 2.9 MiB (two huge
  // pages at most).
  model_config c;
  c.n_layer = 30;
  c.n_embd = 576;
  c.n_head = 9;
  c.n_head_kv = 3;
  c.head_dim = 64;
  kv_pool pool(c, kv_pool_options{16, 256 * 16});
  for (uint32_t l = 0; l < c.n_layer; ++l) {
    for (uint32_t h = 0; h < c.n_head_kv; ++h) pool.k(l, 0, h)[0] = 1;
  }
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t k_bytes = pool.bytes() / 2;  // 45 MiB
  auto* base = reinterpret_cast<std::byte*>(pool.k(0, 0, 0));
  ASSERT_EQ(reinterpret_cast<uintptr_t>(base) % page, 0u);
  std::vector<unsigned char> in_core((k_bytes + page - 1) / page);
  ASSERT_EQ(::mincore(base, k_bytes, in_core.data()), 0);
  // Where the resident pages lie, whatever page size the kernel chose.
  size_t first = in_core.size(), last = 0, resident = 0;
  for (size_t i = 0; i < in_core.size(); ++i) {
    if ((in_core[i] & 1) == 0) continue;
    first = std::min(first, i);
    last = i;
    ++resident;
  }
  ASSERT_GE(resident, 30u);
  EXPECT_LT((last - first) * page, size_t{5} << 20) << "block 0's K spans " << (last - first) * page << " bytes";
}
