// The prefix cache's disk tier (engine/kv_disk): block files round-trip, and every file that is
// not exactly the block asked for (a flipped byte, a short file, another model's block, a
// renamed file) is a miss and is removed; the directory stays within its bounds, least
// recently used out first, also across a reopen; and the cache manager's bookkeeping for it
// (spills journaled once, imports chained behind the cached prefix) in kv_block_manager.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "engine/kv/kv_block_manager.h"
#include "engine/kv_disk/block_file.h"
#include "engine/kv_disk/disk_store.h"

namespace tandem::kv_disk {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kTokens = 16;

kv_layout small_layout(uint64_t model = 0x1234) { return {model, 0, 2, 2, 8, kTokens, 2 * 2 * 2 * 8 * 2 * kTokens}; }

struct temp_dir {
  fs::path path;
  temp_dir() {
    path = fs::temp_directory_path() / ("kv_disk_test." + std::to_string(::getpid()) + "." +
                                        std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
};

block_key key_for(uint64_t n) {
  block_key k;
  k.parent = n * 7 + 1;
  for (uint32_t i = 0; i < kTokens; ++i) k.tokens.push_back(static_cast<token_id>(n * 100 + i));
  k.hash = tandem::block_pool::hash_block(k.parent, k.tokens);
  return k;
}

std::vector<std::byte> payload_for(uint64_t n, const kv_layout& l) {
  std::vector<std::byte> p(l.block_bytes);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<std::byte>((i * 31 + n * 17) & 0xff);
  return p;
}

store_options options_in(const temp_dir& d, uint64_t max_files, const kv_layout& l = small_layout()) {
  store_options o;
  o.dir = d.path.string();
  o.layout = l;
  o.max_bytes = max_files * file_bytes(l);
  return o;
}

size_t block_files(const temp_dir& d) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(d.path)) n += e.path().extension() == ".kvb";
  return n;
}

TEST(KvDisk, RoundTripAcrossAReopen) {
  temp_dir d;
  const auto l = small_layout();
  {
    disk_store s(options_in(d, 8));
    for (uint64_t n = 0; n < 3; ++n) ASSERT_TRUE(s.put(key_for(n), payload_for(n, l)));
    EXPECT_EQ(s.stats().files, 3u);
    EXPECT_EQ(s.stats().bytes, 3 * file_bytes(l));
    const auto got = s.get(key_for(1));
    ASSERT_TRUE(got);
    EXPECT_EQ(*got, payload_for(1, l));
  }
  disk_store again(options_in(d, 8));  // a restart reads the directory back
  EXPECT_EQ(again.stats().files, 3u);
  for (uint64_t n = 0; n < 3; ++n) {
    const auto got = again.get(key_for(n));
    ASSERT_TRUE(got) << n;
    EXPECT_EQ(*got, payload_for(n, l));
  }
  EXPECT_EQ(again.stats().hits, 3u);
  EXPECT_FALSE(again.get(key_for(9)));
  EXPECT_EQ(again.stats().misses, 1u);
}

TEST(KvDisk, AFlippedByteIsAMissAndTheFileIsRemoved) {
  temp_dir d;
  const auto l = small_layout();
  disk_store s(options_in(d, 8));
  ASSERT_TRUE(s.put(key_for(0), payload_for(0, l)));
  const std::string path = s.path_of(key_for(0).hash);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(file_bytes(l) - 5));
    f.put('\x5a');
  }
  EXPECT_FALSE(s.get(key_for(0)));
  EXPECT_EQ(s.stats().corrupt, 1u);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(s.stats().files, 0u);
  EXPECT_EQ(s.stats().bytes, 0u);
}

TEST(KvDisk, AFileFoundAtOpenIsWrittenOverWhenTheBlockIsSpilledAgain) {
  temp_dir d;
  const auto l = small_layout();
  std::string path;
  {
    disk_store s(options_in(d, 8));
    ASSERT_TRUE(s.put(key_for(0), payload_for(0, l)));
    path = s.path_of(key_for(0).hash);
  }
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x01');
  }
  disk_store s(options_in(d, 8));
  ASSERT_TRUE(s.put(key_for(0), payload_for(0, l)));  // never verified: written over
  EXPECT_EQ(s.stats().writes, 1u);
  const auto got = s.get(key_for(0));
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, payload_for(0, l));
  ASSERT_TRUE(s.put(key_for(0), payload_for(0, l)));  // verified now: only used
  EXPECT_EQ(s.stats().writes, 1u);
}

TEST(KvDisk, ATruncatedFileIsAMissAndIsRemoved) {
  temp_dir d;
  const auto l = small_layout();
  disk_store s(options_in(d, 8));
  ASSERT_TRUE(s.put(key_for(0), payload_for(0, l)));
  const std::string path = s.path_of(key_for(0).hash);
  fs::resize_file(path, file_bytes(l) / 2);
  EXPECT_FALSE(s.get(key_for(0)));
  EXPECT_EQ(s.stats().corrupt, 1u);
  EXPECT_FALSE(fs::exists(path));
}

TEST(KvDisk, AnotherModelsBlocksAreNeverServed) {
  temp_dir d;
  const auto a = small_layout(0x1111), b = small_layout(0x2222);
  {
    disk_store s(options_in(d, 8, a));
    ASSERT_TRUE(s.put(key_for(0), payload_for(0, a)));
  }
  disk_store other(options_in(d, 8, b));  // the same directory, another model's identity
  EXPECT_FALSE(other.get(key_for(0)));
  // Even under the very name this model would use, model a's file is refused and removed.
  const std::string a_path = disk_store(options_in(d, 8, a)).path_of(key_for(0).hash);
  fs::copy_file(a_path, other.path_of(key_for(0).hash));
  disk_store reopened(options_in(d, 8, b));
  EXPECT_FALSE(reopened.get(key_for(0)));
  EXPECT_EQ(reopened.stats().corrupt, 1u);
  EXPECT_FALSE(fs::exists(reopened.path_of(key_for(0).hash)));
}

TEST(KvDisk, AnotherBlocksFileUnderThisNameIsRefused) {
  temp_dir d;
  const auto l = small_layout();
  disk_store s(options_in(d, 8));
  ASSERT_TRUE(s.put(key_for(0), payload_for(0, l)));
  fs::rename(s.path_of(key_for(0).hash), s.path_of(key_for(1).hash));
  disk_store reopened(options_in(d, 8));
  EXPECT_FALSE(reopened.get(key_for(1)));  // a sound file, but of block 0: never block 1's KV
  EXPECT_EQ(reopened.stats().corrupt, 1u);
}

TEST(KvDisk, TheBoundsHoldLeastRecentlyUsedOutFirst) {
  temp_dir d;
  const auto l = small_layout();
  disk_store s(options_in(d, 3));
  for (uint64_t n = 0; n < 3; ++n) ASSERT_TRUE(s.put(key_for(n), payload_for(n, l)));
  ASSERT_TRUE(s.get(key_for(0)));  // 0 is used: 1 is now the least recently used
  ASSERT_TRUE(s.put(key_for(3), payload_for(3, l)));
  EXPECT_EQ(s.stats().files, 3u);
  EXPECT_LE(s.stats().bytes, 3 * file_bytes(l));
  EXPECT_EQ(s.stats().evictions, 1u);
  EXPECT_TRUE(s.contains(key_for(0).hash));
  EXPECT_FALSE(s.contains(key_for(1).hash));
  EXPECT_FALSE(s.get(key_for(1)));
  EXPECT_EQ(block_files(d), 3u);
  // A smaller bound on reopening trims the directory to it.
  disk_store smaller(options_in(d, 2));
  EXPECT_EQ(smaller.stats().files, 2u);
  EXPECT_EQ(block_files(d), 2u);
}

TEST(KvDisk, GarbageInTheDirectoryIsRemovedOrLeftAloneWithinBounds) {
  temp_dir d;
  const auto l = small_layout();
  std::mt19937 rng(7);
  // Names of ours with a wrong size, names of ours with the right size and random bytes, a
  // leftover temp file, and files that are not ours at all.
  for (int i = 0; i < 20; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "%016x.kvb", 0x100 + i);
    std::ofstream f(d.path / name, std::ios::binary);
    const size_t n = i % 2 ? file_bytes(l) : 100 + i;
    for (size_t j = 0; j < n; ++j) f.put(static_cast<char>(rng()));
  }
  std::ofstream(d.path / "00000000000000ab.kvb.tmp") << "half";
  std::ofstream(d.path / "notes.txt") << "not ours";
  fs::create_directory(d.path / "sub");
  disk_store s(options_in(d, 4));
  EXPECT_EQ(s.stats().files, 4u);  // ten of the right size, trimmed to the bound
  EXPECT_EQ(s.stats().removed_at_open, 10u + 1u + 6u);
  EXPECT_EQ(s.stats().unknown_files, 2u);
  EXPECT_TRUE(fs::exists(d.path / "notes.txt"));
  EXPECT_EQ(block_files(d), 4u);
  // It still stores and serves.
  ASSERT_TRUE(s.put(key_for(0), payload_for(0, l)));
  EXPECT_TRUE(s.get(key_for(0)));
  EXPECT_EQ(s.stats().files, 4u);
}

TEST(KvDisk, TheSaltKeySurvivesAndIsPrivate) {
  temp_dir d;
  const uint64_t k = load_or_create_salt_key(d.path.string());
  EXPECT_NE(k, 0u);
  EXPECT_EQ(load_or_create_salt_key(d.path.string()), k);
  EXPECT_EQ(fs::status(d.path / "salt.key").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  std::ofstream(d.path / "salt.key", std::ios::trunc) << "zz";
  EXPECT_NE(load_or_create_salt_key(d.path.string()), 0u);  // unreadable: a new one
}

TEST(KvDisk, CacheManagerJournalsSpillsOnceAndImportsBehindTheCachedPrefix) {
  kv_block_manager kv(16, kTokens);
  kv.journal_spills(true);
  std::vector<token_id> prompt(4 * kTokens + 1);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<token_id>(i + 3);
  const uint64_t salt = 42;
  ASSERT_TRUE(kv.allocate(1, static_cast<uint32_t>(prompt.size()), 0, nullptr, salt));
  kv.commit(1, prompt, static_cast<uint32_t>(prompt.size()));
  auto spills = kv.take_spills();
  ASSERT_EQ(spills.size(), 4u);
  const auto hashes = block_pool::chain_hashes(prompt, kTokens, salt);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(spills[i].hash, hashes[i]);
    EXPECT_EQ(spills[i].parent, i == 0 ? block_pool::root_for(salt) : hashes[i - 1]);
  }
  kv.commit(1, prompt, static_cast<uint32_t>(prompt.size()));
  EXPECT_TRUE(kv.take_spills().empty());  // each block once
  kv.free(1);
  kv.drop_cache();  // as after a restart: nothing cached
  const std::span<const token_id> looked_up(prompt.data(), prompt.size() - 1);
  EXPECT_EQ(kv.import_blocks(looked_up, salt, 1, 3).size(), 0u);  // block 0 is not cached: a hole
  const auto imported = kv.import_blocks(looked_up, salt, 0, 4);
  ASSERT_EQ(imported.size(), 4u);
  EXPECT_TRUE(kv.take_spills().empty());  // what came from disk is not written back
  const auto hit = kv.match_prefix(prompt, salt);
  EXPECT_EQ(hit.n_tokens, 4 * kTokens);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(hit.blocks[i], imported[i].first);
  EXPECT_EQ(kv.match_prefix(prompt, salt + 1).n_tokens, 0u);  // another salt finds nothing
  std::vector<block_id> held;
  for (const auto& [b, i] : imported) held.push_back(b);
  kv.release_imports(held);
  EXPECT_EQ(kv.stats().pool.cached_free, 4u);
}

}  // namespace
}  // namespace tandem::kv_disk
