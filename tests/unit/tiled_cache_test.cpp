// The tiled-weight cache file (engine/model/tiled_cache.h) on a real GGUF file on disk: the
// first open writes it, the next maps it and computes exactly what tiling afresh computes;
// a stale, short or damaged file, or a directory that refuses it, costs a re-tiling and
// nothing else; dead writers' temporary files go.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/gguf/quant_mixture.h"
#include "engine/model/kv_block_allocator.h"
#include "engine/model/model.h"
#include "engine/synthetic/synthetic_model.h"
#include "engine/model/tiled_cache.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

// A Q4_K_M-mixture model (Q4_K, Q6_K and Q8_0 matrices: every tiled record kind but the
// 32-element ones) written to its own directory, removed afterwards.
class TiledCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem-tiled-cache-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    synthetic_model_spec spec;
    spec.n_embd = 256;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 512;
    spec.n_vocab = 512;
    spec.file_type = *gguf::parse_file_type("Q4_K_M");
    const auto bytes = make_synthetic_model(spec).serialize();
    model_path_ = dir_ / "model.gguf";
    std::ofstream(model_path_, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                       static_cast<std::streamsize>(bytes.size()));
    cache_dir_ = dir_ / "tiled";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<model> open(const fs::path& cache_dir, bool tiled = true) {
    model_options o;
    o.n_threads = 2;
    o.tiled_weights = tiled;
    o.tiled_cache_dir = cache_dir;
    return model::open(model_path_, o);
  }

  // Every prompt position's logits, one prefill step.
  static std::vector<float> logits(model& m) {
    kv_pool cache(m.config(), kv_pool_options{16, 64, 0});
    kv_block_allocator allocator(cache.n_blocks());
    std::mt19937 rng(5);
    step_input in;
    seq_step s;
    s.seq = 1;
    for (int i = 0; i < 24; ++i) s.tokens.push_back(static_cast<int32_t>(rng() % 512));
    s.want_all_logits = true;
    allocator.reserve(s.blocks, 24, cache.block_tokens());
    in.seqs.push_back(s);
    step_output out;
    m.forward(in, cache, out);
    return out.logits;
  }

  size_t tmp_files() const {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(cache_dir_)) n += e.path().extension() == ".tmp";
    return n;
  }

  fs::path dir_, model_path_, cache_dir_;
};

TEST_F(TiledCache, WrittenOnceThenMappedWithTheSameLogits) {
  auto fresh = open({});
  if (fresh->tiled_from() == tiled_origin::none) GTEST_SKIP() << "no tiled kernels on this CPU";
  EXPECT_EQ(fresh->tiled_from(), tiled_origin::anonymous);
  const auto expected = logits(*fresh);
  EXPECT_EQ(logits(*open({}, false)), expected);  // the GGUF layout in place: the same bits

  auto writer = open(cache_dir_);
  EXPECT_EQ(writer->tiled_from(), tiled_origin::cache_written);
  EXPECT_EQ(logits(*writer), expected);  // usable while its file is being written
  ASSERT_TRUE(writer->wait_tiled_cache());
  const fs::path file = tiled_cache_file::path_for(cache_dir_, model_path_);
  ASSERT_TRUE(fs::exists(file));
  EXPECT_EQ(tmp_files(), 0u);

  auto reader = open(cache_dir_);
  EXPECT_EQ(reader->tiled_from(), tiled_origin::cache_read);
  EXPECT_EQ(logits(*reader), expected);
  // Two models on one file at once, and the writer's copy still alive beside them.
  auto second_reader = open(cache_dir_);
  EXPECT_EQ(second_reader->tiled_from(), tiled_origin::cache_read);
  EXPECT_EQ(logits(*second_reader), expected);
}

TEST_F(TiledCache, StaleShortOrDamagedFilesAreMadeAgain) {
  auto fresh = open({});
  if (fresh->tiled_from() == tiled_origin::none) GTEST_SKIP() << "no tiled kernels on this CPU";
  const auto expected = logits(*fresh);
  const fs::path file = tiled_cache_file::path_for(cache_dir_, model_path_);
  auto make_and_check = [&](const char* what) {
    auto m = open(cache_dir_);
    EXPECT_EQ(m->tiled_from(), tiled_origin::cache_written) << what;
    EXPECT_EQ(logits(*m), expected) << what;
    ASSERT_TRUE(m->wait_tiled_cache()) << what;
    auto again = open(cache_dir_);
    EXPECT_EQ(again->tiled_from(), tiled_origin::cache_read) << what;
    EXPECT_EQ(logits(*again), expected) << what;
  };
  make_and_check("no file yet");

  // The GGUF changed since (its modification time says so).
  fs::last_write_time(model_path_, fs::last_write_time(model_path_) + std::chrono::hours(1));
  make_and_check("newer GGUF");

  // Cut short (a copy that stopped, a full disk).
  fs::resize_file(file, fs::file_size(file) / 2);
  make_and_check("short file");

  // A header that is not one (another program's file, or a layout version ago).
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f.write("NOTTILED", 8);
  }
  make_and_check("damaged header");
}

TEST_F(TiledCache, ADirectoryThatRefusesTheFileCostsOnlyTheCache) {
  auto fresh = open({});
  if (fresh->tiled_from() == tiled_origin::none) GTEST_SKIP() << "no tiled kernels on this CPU";
  const auto expected = logits(*fresh);
  const fs::path not_a_dir = dir_ / "plain-file";
  std::ofstream(not_a_dir) << "x";
  auto m = open(not_a_dir);
  EXPECT_EQ(m->tiled_from(), tiled_origin::anonymous);
  EXPECT_EQ(logits(*m), expected);
  EXPECT_TRUE(m->wait_tiled_cache());
}

TEST_F(TiledCache, DeadWritersTemporaryFilesAreRemoved) {
  auto fresh = open({});
  if (fresh->tiled_from() == tiled_origin::none) GTEST_SKIP() << "no tiled kernels on this CPU";
  fs::create_directories(cache_dir_);
  const std::string name = tiled_cache_file::path_for(cache_dir_, model_path_).filename().string();
  // pid_max is at most 2^22 on Linux: this writer is dead; the parent process is alive.
  const fs::path dead = cache_dir_ / (name + ".999999999.tmp");
  const fs::path alive = cache_dir_ / (name + "." + std::to_string(::getppid()) + ".tmp");
  std::ofstream(dead) << "partial";
  std::ofstream(alive) << "partial";
  auto m = open(cache_dir_);
  EXPECT_EQ(m->tiled_from(), tiled_origin::cache_written);
  ASSERT_TRUE(m->wait_tiled_cache());
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(alive));
}

TEST_F(TiledCache, FilesOfModelsThatAreGoneOrChangedAreRemoved) {
  auto fresh = open({});
  if (fresh->tiled_from() == tiled_origin::none) GTEST_SKIP() << "no tiled kernels on this CPU";
  fresh.reset();
  // Two more copies of the model at other paths, each with its cache file.
  const fs::path gone = dir_ / "gone.gguf", changed = dir_ / "changed.gguf";
  for (const auto& p : {gone, changed}) {
    fs::copy_file(model_path_, p);
    model_options o;
    o.tiled_cache_dir = cache_dir_;
    auto m = model::open(p, o);
    ASSERT_EQ(m->tiled_from(), tiled_origin::cache_written);
    ASSERT_TRUE(m->wait_tiled_cache());
  }
  const fs::path gone_file = tiled_cache_file::path_for(cache_dir_, gone);
  const fs::path changed_file = tiled_cache_file::path_for(cache_dir_, changed);
  ASSERT_TRUE(fs::exists(gone_file) && fs::exists(changed_file));
  fs::remove(gone);
  fs::last_write_time(changed, fs::last_write_time(changed) + std::chrono::hours(1));
  const fs::path foreign = cache_dir_ / "foreign.tiled";
  std::ofstream(foreign) << "not a cache file";

  auto m = open(cache_dir_);  // creates this model's file, and prunes the others
  EXPECT_EQ(m->tiled_from(), tiled_origin::cache_written);
  ASSERT_TRUE(m->wait_tiled_cache());
  EXPECT_FALSE(fs::exists(gone_file));
  EXPECT_FALSE(fs::exists(changed_file));
  EXPECT_FALSE(fs::exists(foreign));
  EXPECT_TRUE(fs::exists(tiled_cache_file::path_for(cache_dir_, model_path_)));
}

}  // namespace
}  // namespace tandem
