// engine/integrity/file_sha256.h: the digest of a file read in chunks, the cache keyed by the
// file's identity, and the mismatch check behind --model-sha256.
#include "engine/integrity/file_sha256.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <random>
#include <string>
#include <thread>

namespace tandem {
namespace {

namespace fs = std::filesystem;

class FileSha256 : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_sha256_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
    return p;
  }
  static std::string read_all(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  fs::path dir_;
};

constexpr const char* kAbc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

TEST_F(FileSha256, KnownDigestsOfSmallFiles) {
  EXPECT_EQ(sha256_of_file(write("empty", "")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_of_file(write("abc", "abc")), kAbc);
  // FIPS 180-2's third example: a million 'a'.
  EXPECT_EQ(sha256_of_file(write("million", std::string(1000000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_F(FileSha256, AFileOfManyReadChunksHashesAsItsBytesInOnePiece) {
  std::string bytes(size_t{9} << 20 | 17, '\0');
  std::mt19937 rng(7);
  for (char& c : bytes) c = static_cast<char>(rng());
  unsigned char md[32];
  unsigned int n = 0;
  ASSERT_EQ(EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr), 1);
  std::string expected;
  for (unsigned char b : md) {
    static constexpr char kHex[] = "0123456789abcdef";
    expected += kHex[b >> 4];
    expected += kHex[b & 15];
  }
  EXPECT_EQ(sha256_of_file(write("big", bytes)), expected);
}

TEST_F(FileSha256, HexIsParsedCaseInsensitivelyAndRefusedWhenMalformed) {
  EXPECT_EQ(parse_sha256_hex(" BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD\n"), kAbc);
  EXPECT_THROW(parse_sha256_hex("abc"), std::invalid_argument);
  EXPECT_THROW(parse_sha256_hex(std::string(63, 'a') + "g"), std::invalid_argument);
  EXPECT_THROW(parse_sha256_hex(""), std::invalid_argument);
}

TEST_F(FileSha256, ASecondDigestOfAnUnchangedFileComesFromTheCache) {
  const fs::path model = write("model.gguf", "abc");
  sha256_cache cache(dir_ / "home" / "sha256-cache");
  const file_sha256 first = cache.digest(model);
  EXPECT_EQ(first.hex, kAbc);
  EXPECT_FALSE(first.from_cache);
  ASSERT_TRUE(fs::exists(cache.path()));

  const file_sha256 second = sha256_cache(cache.path()).digest(model);  // a new process would do this
  EXPECT_EQ(second.hex, kAbc);
  EXPECT_TRUE(second.from_cache);

  // The answer really is the cache's: a digest written into its line comes back unread.
  std::string text = read_all(cache.path());
  const std::string fake(64, 'f');
  text.replace(text.find(kAbc), 64, fake);
  std::ofstream(cache.path(), std::ios::trunc) << text;
  EXPECT_EQ(cache.digest(model).hex, fake);
}

TEST_F(FileSha256, AChangedMtimeOrSizeInvalidatesTheCachedDigest) {
  const fs::path model = write("model.gguf", "abc");
  sha256_cache cache(dir_ / "sha256-cache");
  ASSERT_FALSE(cache.digest(model).from_cache);
  ASSERT_TRUE(cache.digest(model).from_cache);

  // Same bytes, another mtime: read again.
  fs::last_write_time(model, fs::last_write_time(model) + std::chrono::seconds(5));
  const file_sha256 touched = cache.digest(model);
  EXPECT_FALSE(touched.from_cache);
  EXPECT_EQ(touched.hex, kAbc);
  EXPECT_TRUE(cache.digest(model).from_cache);

  // Other bytes of another size.
  write("model.gguf", "abcd");
  const file_sha256 grown = cache.digest(model);
  EXPECT_FALSE(grown.from_cache);
  EXPECT_EQ(grown.hex, "88d4266fd4e6338d13b845fcf289579d209c897823b9217da3e161936f031589");

  // Other bytes of the same size with the old mtime put back: ctime (and the size check) still
  // tell, so the stale digest is not used.
  const auto mtime = fs::last_write_time(model);
  ASSERT_TRUE(cache.digest(model).from_cache);
  // File times tick at the kernel's clock granularity (a few ms): let ctime move on.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  write("model.gguf", "abce");
  fs::last_write_time(model, mtime);
  const file_sha256 rewritten = cache.digest(model);
  EXPECT_FALSE(rewritten.from_cache);
  EXPECT_NE(rewritten.hex, grown.hex);
}

TEST_F(FileSha256, MalformedCacheLinesAreIgnoredAndEntriesOfOtherFilesKept) {
  const fs::path a = write("a.gguf", "abc");
  const fs::path b = write("b.gguf", "abcd");
  const fs::path cache_file = dir_ / "sha256-cache";
  std::ofstream(cache_file) << "garbage\n" << std::string(64, 'z') << " 1 2 3 4 5 /x\n\n";
  sha256_cache cache(cache_file);
  EXPECT_FALSE(cache.digest(a).from_cache);
  EXPECT_FALSE(cache.digest(b).from_cache);
  EXPECT_TRUE(cache.digest(a).from_cache);
  EXPECT_TRUE(cache.digest(b).from_cache);
  EXPECT_EQ(read_all(cache_file).find("garbage"), std::string::npos);  // rewritten without it
}

TEST_F(FileSha256, NoCachePathMeansEveryDigestReadsTheFile) {
  const fs::path model = write("model.gguf", "abc");
  sha256_cache none{fs::path()};
  EXPECT_FALSE(none.digest(model).from_cache);
  EXPECT_FALSE(none.digest(model).from_cache);
}

TEST_F(FileSha256, AMismatchNamesBothDigests) {
  const fs::path model = write("model.gguf", "abc");
  sha256_cache cache(dir_ / "sha256-cache");
  const std::string wrong(64, '0');
  try {
    verify_sha256(model, wrong, cache);
    FAIL() << "a wrong digest was accepted";
  } catch (const sha256_mismatch& e) {
    EXPECT_EQ(e.expected, wrong);
    EXPECT_EQ(e.actual, kAbc);
    const std::string what = e.what();
    EXPECT_NE(what.find(wrong), std::string::npos) << what;
    EXPECT_NE(what.find(kAbc), std::string::npos) << what;
    EXPECT_NE(what.find(model.string()), std::string::npos) << what;
  }
  const file_sha256 ok = verify_sha256(model, std::string(kAbc), cache);
  EXPECT_EQ(ok.hex, kAbc);
  EXPECT_THROW(verify_sha256(dir_ / "missing.gguf", kAbc, cache), std::runtime_error);
}

TEST_F(FileSha256, AStaleCachedDigestIsCheckedAgainstTheFileBeforeAMismatchIsReported) {
  const fs::path model = write("model.gguf", "abc");
  const fs::path cache_file = dir_ / "sha256-cache";
  sha256_cache cache(cache_file);
  ASSERT_FALSE(cache.digest(model).from_cache);
  std::string text = read_all(cache_file);
  text.replace(text.find(kAbc), 64, std::string(64, 'e'));
  std::ofstream(cache_file, std::ios::trunc) << text;
  // The cache says eee..., the file says abc's digest: the file wins, and the cache is mended.
  EXPECT_EQ(verify_sha256(model, kAbc, cache).hex, kAbc);
  EXPECT_EQ(cache.digest(model).hex, kAbc);
  EXPECT_TRUE(cache.digest(model).from_cache);
}

}  // namespace
}  // namespace tandem
