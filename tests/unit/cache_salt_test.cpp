// engine/kv/cache_salt.h and engine/gguf/identity.h without actors: two sequences whose
// requests differ in any one of tenant group, model, adapter and non-token input never share
// a cached block, though their tokens are equal; identical ones do. A model's identity
// follows its bytes, not where the file lies.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <unistd.h>

#include "engine/gguf/identity.h"
#include "engine/kv/block_pool.h"
#include "engine/kv/cache_salt.h"
#include "engine/synthetic/synthetic_model.h"
#include "schedule_harness.h"

using namespace tandem;
using tandem::testing::run_of;
using tandem::testing::schedule_harness;

namespace {

constexpr uint64_t kKey = 0x5eed;
const cache_salt_input kBase{"tenant-a", 0x11, "", 0};

// The same request with one field changed, one variant per field.
std::vector<cache_salt_input> one_field_changed() {
  return {{"tenant-b", 0x11, "", 0},
          {"tenant-a", 0x12, "", 0},
          {"tenant-a", 0x11, "lora-1", 0},
          {"tenant-a", 0x11, "", 0x1a6e}};
}

// The cached prompt tokens a sequence with `salt` is admitted with, once another sequence
// computed the same prompt under `published`.
uint32_t hit_after(uint64_t published, uint64_t salt) {
  schedule_harness h({4, 256, 64}, 64, 4);
  const auto prompt = run_of(100, 33);
  h.planner.add(1, "t", 1, prompt, published);
  for (const auto& p : h.plan().seqs) h.complete(p, std::vector<token_id>{900});
  h.remove(1);  // its blocks stay cached
  h.planner.add(2, "t", 1, prompt, salt);
  const auto plan = h.plan();
  return plan.seqs.empty() ? 0 : plan.seqs[0].n_cached;
}

}  // namespace

TEST(CacheSalt, EqualInputsGiveEqualSaltsAndEachFieldChangesIt) {
  EXPECT_EQ(cache_salt(kBase, kKey), cache_salt(kBase, kKey));
  std::set<uint64_t> salts{cache_salt(kBase, kKey)};
  for (const auto& v : one_field_changed()) salts.insert(cache_salt(v, kKey));
  EXPECT_EQ(salts.size(), 5u);
  EXPECT_NE(cache_salt(kBase, kKey), cache_salt(kBase, kKey + 1)) << "the key: no client computes another's salt";
  EXPECT_NE(cache_salt({"a", 0, "b", 0}, kKey), cache_salt({"ab", 0, "", 0}, kKey)) << "fields do not run together";
}

TEST(CacheSalt, AGroupAloneIsTheGroupSaltAndNothingIsTheUnsaltedChain) {
  EXPECT_EQ(cache_salt({}, kKey), 0u);
  EXPECT_EQ(cache_salt({"tenant-a"}, kKey), block_pool::salt_for_group("tenant-a", kKey));
  EXPECT_NE(cache_salt({"", 0x11}, kKey), 0u) << "a model alone salts too";
}

TEST(CacheSalt, RequestsDifferingInOneFieldNeverShareABlock) {
  const uint64_t base = cache_salt(kBase, kKey);
  EXPECT_EQ(hit_after(base, base), 32u) << "identical requests share the prompt's full blocks";
  for (const auto& v : one_field_changed()) {
    EXPECT_EQ(hit_after(base, cache_salt(v, kKey)), 0u)
        << v.group << " " << v.model << " " << v.adapter << " " << v.input_hash;
  }
}

TEST(ModelIdentity, FollowsTheBytesNotThePath) {
  synthetic_model_spec spec;
  spec.n_layer = 1;
  spec.n_embd = 64;
  spec.n_head = 2;
  spec.n_head_kv = 1;
  spec.n_ff = 128;
  spec.n_vocab = 300;
  const auto bytes = make_synthetic_model(spec).serialize();
  const uint64_t id = gguf::model_identity(gguf::file::parse(bytes));

  const auto dir = std::filesystem::temp_directory_path() / ("tandem_identity_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "copy.gguf", std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  EXPECT_EQ(gguf::model_identity(gguf::file::open(dir / "copy.gguf")), id) << "a copy elsewhere is the same model";
  std::filesystem::remove_all(dir);

  auto retrained = bytes;  // the same header, other weights: a fine-tune
  retrained[gguf::file::parse(bytes).data_offset()] ^= std::byte{1};
  EXPECT_NE(gguf::model_identity(gguf::file::parse(retrained)), id);

  spec.seed = 2;
  EXPECT_NE(gguf::model_identity(gguf::file::parse(make_synthetic_model(spec).serialize())), id);
  spec.seed = 1;
  spec.name = "another-name";
  EXPECT_NE(gguf::model_identity(gguf::file::parse(make_synthetic_model(spec).serialize())), id);
}
