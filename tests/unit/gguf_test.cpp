// GGUF reader and writer: round trips of every value type, the default model, and hostile
// files (each must give gguf::format_error: never a crash, never an unbounded allocation).
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/gguf/quantize.h"
#include "engine/model/model_config.h"
#include "engine/model/model_path.h"
#include "engine/synthetic/synthetic_model.h"

using namespace tandem;
using bytes_t = std::vector<std::byte>;

namespace {

bytes_t tensor_bytes(tensor_type type, int64_t cols, int64_t rows, float seed) {
  std::vector<float> row(static_cast<size_t>(cols));
  bytes_t out(row_bytes(type, cols) * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < cols; ++i)
      row[static_cast<size_t>(i)] = std::sin(seed + 0.37f * static_cast<float>(i + r * cols));
    quantize_row(type, row.data(), cols, out.data() + static_cast<size_t>(r) * row_bytes(type, cols));
  }
  return out;
}

// A small valid file with one tensor of each supported type.
gguf::writer small_writer() {
  gguf::writer w;
  w.set_string("general.architecture", "test");
  w.set_u32("test.count", 7);
  for (auto t : {tensor_type::f32, tensor_type::f16, tensor_type::bf16, tensor_type::q8_0, tensor_type::q4_0,
                 tensor_type::q4_1}) {
    const std::string name = "t." + std::string(traits_of(t).name);
    w.add_tensor(name, t, {64, 3}, tensor_bytes(t, 64, 3, 1.0f));
  }
  return w;
}

gguf::file parse(const bytes_t& b) { return gguf::file::parse(b); }

template <class T>
void poke(bytes_t& b, size_t at, T v) {
  ASSERT_LE(at + sizeof(T), b.size());
  std::memcpy(b.data() + at, &v, sizeof(T));
}

// Offset just past the (length-prefixed) occurrence of `s` in the file.
size_t after_string(const bytes_t& b, const std::string& s) {
  for (size_t i = 8; i + s.size() <= b.size(); ++i) {
    uint64_t len;
    std::memcpy(&len, b.data() + i - 8, 8);
    if (len == s.size() && std::memcmp(b.data() + i, s.data(), s.size()) == 0) return i + s.size();
  }
  ADD_FAILURE() << "string not found: " << s;
  return 0;
}

void expect_error(const bytes_t& b, const std::string& fragment) {
  try {
    parse(b);
    FAIL() << "expected a format_error containing '" << fragment << "'";
  } catch (const gguf::format_error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << "message: " << e.what();
  }
}

// Layout of the header: magic(0) version(4) n_tensors(8) n_kv(16) first key(24).
constexpr size_t kVersionAt = 4, kTensorsAt = 8, kKvAt = 16, kFirstKeyAt = 24;

}  // namespace

TEST(GgufWriter, RoundTripsEveryValueType) {
  gguf::writer w(64);
  w.set("u8", gguf::value{uint8_t{200}});
  w.set("i8", gguf::value{int8_t{-100}});
  w.set("u16", gguf::value{uint16_t{60000}});
  w.set("i16", gguf::value{int16_t{-30000}});
  w.set("u32", gguf::value{uint32_t{4000000000u}});
  w.set("i32", gguf::value{int32_t{-2000000000}});
  w.set("f32", gguf::value{1.5f});
  w.set("bool", gguf::value{true});
  w.set("str", gguf::value{std::string("héllo")});
  w.set("u64", gguf::value{uint64_t{1} << 60});
  w.set("i64", gguf::value{int64_t{-(int64_t{1} << 60)}});
  w.set("f64", gguf::value{2.25});
  w.set_string_array("strs", {"a", "", "ccc"});
  gguf::array_value nested{gguf::value_type::array, {}};
  nested.items.push_back(
      gguf::value{gguf::array_value{gguf::value_type::int32, {gguf::value{int32_t{1}}, gguf::value{int32_t{2}}}}});
  nested.items.push_back(gguf::value{gguf::array_value{gguf::value_type::int32, {}}});
  w.set("nested", gguf::value{nested});
  w.add_tensor("x", tensor_type::q4_1, {64, 2}, tensor_bytes(tensor_type::q4_1, 64, 2, 0.5f));

  const auto b = w.serialize();
  const auto f = parse(b);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(*f.get_int("u8"), 200);
  EXPECT_EQ(*f.get_int("i8"), -100);
  EXPECT_EQ(*f.get_int("u16"), 60000);
  EXPECT_EQ(*f.get_int("i16"), -30000);
  EXPECT_EQ(*f.get_int("u32"), 4000000000LL);
  EXPECT_EQ(*f.get_int("i32"), -2000000000);
  EXPECT_EQ(*f.get_float("f32"), 1.5);
  EXPECT_EQ(*f.get_bool("bool"), true);
  EXPECT_EQ(*f.get_string("str"), "héllo");
  EXPECT_EQ(*f.get_int("u64"), int64_t{1} << 60);
  EXPECT_EQ(*f.get_int("i64"), -(int64_t{1} << 60));
  EXPECT_EQ(*f.get_float("f64"), 2.25);
  const auto* strs = f.get_array("strs");
  ASSERT_NE(strs, nullptr);
  ASSERT_EQ(strs->items.size(), 3u);
  EXPECT_EQ(*strs->items[2].as_string(), "ccc");
  const auto* n = f.get_array("nested");
  ASSERT_NE(n, nullptr);
  ASSERT_EQ(n->items.size(), 2u);
  EXPECT_EQ(n->items[0].as_array()->items[1].as_int(), 2);
  EXPECT_TRUE(n->items[1].as_array()->items.empty());
  EXPECT_THROW((void)f.get_string("u8"), gguf::format_error);  // wrong type is an error, not a guess
  EXPECT_FALSE(f.get_int("absent").has_value());

  const auto* t = f.find_tensor("x");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, tensor_type::q4_1);
  EXPECT_EQ(t->ne[0], 64);
  EXPECT_EQ(t->ne[1], 2);
  EXPECT_EQ(t->nbytes, 2 * 40u);
  const auto expected = tensor_bytes(tensor_type::q4_1, 64, 2, 0.5f);
  EXPECT_EQ(std::memcmp(t->data, expected.data(), expected.size()), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) - reinterpret_cast<uintptr_t>(b.data()), f.data_offset());
}

TEST(GgufWriter, EveryTensorTypeRoundTrips) {
  const auto b = small_writer().serialize();
  const auto f = parse(b);
  ASSERT_EQ(f.tensors().size(), 6u);
  for (const auto& t : f.tensors()) {
    EXPECT_EQ(t.offset % f.alignment(), 0u) << t.name;
    EXPECT_EQ(t.nbytes, row_bytes(t.type, 64) * 3) << t.name;
    const auto expected = tensor_bytes(t.type, 64, 3, 1.0f);
    EXPECT_EQ(std::memcmp(t.data, expected.data(), expected.size()), 0) << t.name;
  }
}

TEST(GgufWriter, WriteStreamsTheSameBytesAsSerialize) {
  const auto w = small_writer();
  const auto path = std::filesystem::temp_directory_path() / "tandem_gguf_writer_test.gguf";
  w.write(path);
  const auto f = gguf::file::open(path);
  EXPECT_EQ(f.file_size(), w.serialize().size());
  EXPECT_EQ(f.tensors().size(), 6u);
  std::filesystem::remove(path);
}

TEST(GgufReader, ReadsTheDefaultModel) {
  const auto path = default_model_path();
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing: run `make model`";
  const auto f = gguf::file::open(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.tensors().size(), 272u);
  EXPECT_EQ(*f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_array("tokenizer.ggml.tokens")->items.size(), 49152u);
  int q4_1 = 0, q8_0 = 0, f32 = 0;
  for (const auto& t : f.tensors()) {
    q4_1 += t.type == tensor_type::q4_1;
    q8_0 += t.type == tensor_type::q8_0;
    f32 += t.type == tensor_type::f32;
  }
  EXPECT_EQ(q4_1, 210);
  EXPECT_EQ(q8_0, 1);
  EXPECT_EQ(f32, 61);

  const auto c = read_model_config(f);
  EXPECT_EQ(c.n_layer, 30u);
  EXPECT_EQ(c.n_embd, 576u);
  EXPECT_EQ(c.n_head, 9u);
  EXPECT_EQ(c.n_head_kv, 3u);
  EXPECT_EQ(c.head_dim, 64u);
  EXPECT_EQ(c.n_ff, 1536u);
  EXPECT_EQ(c.n_vocab, 49152u);
  EXPECT_EQ(c.n_ctx_train, 8192u);
  EXPECT_FLOAT_EQ(c.rope_freq_base, 100000.0f);
  EXPECT_NEAR(c.rms_eps, 1e-5f, 1e-9f);
  EXPECT_TRUE(c.tied_output);
  EXPECT_EQ(c.kv_bytes_per_token(2), 2u * 30 * 192 * 2);
}

TEST(GgufReader, DefaultModelPathResolution) {
  EXPECT_EQ(resolve_model_path("default"), default_model_path());
  EXPECT_EQ(resolve_model_path(""), default_model_path());
  try {
    resolve_model_path("/nonexistent/model.gguf");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf"), std::string::npos);
  }
}

TEST(GgufHostile, BadMagic) {
  auto b = small_writer().serialize();
  b[0] = std::byte{'X'};
  expect_error(b, "bad magic");
  expect_error(bytes_t{}, "too short");
  expect_error(bytes_t(3, std::byte{'G'}), "too short");
}

TEST(GgufHostile, Versions) {
  auto b = small_writer().serialize();
  poke<uint32_t>(b, kVersionAt, 1);
  expect_error(b, "version 1 is not supported");
  poke<uint32_t>(b, kVersionAt, 4);
  expect_error(b, "unsupported GGUF version 4");
  poke<uint32_t>(b, kVersionAt, 0x03000000);
  expect_error(b, "big-endian");
  poke<uint32_t>(b, kVersionAt, 2);
  EXPECT_NO_THROW(parse(b));  // v2 has the same layout as v3 for little-endian files
}

TEST(GgufHostile, TruncationAnywhere) {
  const auto full = small_writer().serialize();
  // Every prefix that cuts into the header, keys, values, tensor infos or tensor data must
  // fail cleanly. (Only the padding after the last tensor may be missing.)
  const auto f = parse(full);
  size_t data_end = 0;
  for (const auto& t : f.tensors()) data_end = std::max<size_t>(data_end, f.data_offset() + t.offset + t.nbytes);
  ASSERT_LE(full.size() - data_end, 31u);
  for (size_t n = 0; n < data_end; ++n) {
    const bytes_t prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW(parse(prefix), gguf::format_error) << "prefix of " << n << " bytes";
  }
  EXPECT_NO_THROW(parse(full));
}

TEST(GgufHostile, AbsurdCounts) {
  auto b = small_writer().serialize();
  poke<uint64_t>(b, kKvAt, std::numeric_limits<uint64_t>::max());
  expect_error(b, "metadata entries");
  b = small_writer().serialize();
  poke<uint64_t>(b, kTensorsAt, uint64_t{1} << 62);
  expect_error(b, "tensor infos");
}

TEST(GgufHostile, HugeStringLength) {
  auto b = small_writer().serialize();
  poke<uint64_t>(b, kFirstKeyAt, uint64_t{1} << 40);
  expect_error(b, "string length");
  // The value of the first key ("general.architecture" = "test"): its length field.
  b = small_writer().serialize();
  const size_t value_len_at = after_string(b, "general.architecture") + 4;
  poke<uint64_t>(b, value_len_at, std::numeric_limits<uint64_t>::max());
  expect_error(b, "string length");
}

TEST(GgufHostile, HugeArrayCountAndDeepNesting) {
  gguf::writer w;
  w.set_string_array("arr", {"x", "y"});
  auto b = w.serialize();
  const size_t count_at = after_string(b, "arr") + 4 + 4;  // value type, element type
  poke<uint64_t>(b, count_at, uint64_t{1} << 61);
  expect_error(b, "array elements");

  // Arrays nested five deep.
  gguf::value v{gguf::array_value{gguf::value_type::int32, {}}};
  for (int i = 0; i < 5; ++i) v = gguf::value{gguf::array_value{gguf::value_type::array, {v}}};
  gguf::writer deep;
  deep.set("deep", v);
  expect_error(deep.serialize(), "nested too deeply");
}

TEST(GgufHostile, BadValueTypes) {
  gguf::writer w;
  w.set_u32("k", 1);
  auto b = w.serialize();
  const size_t type_at = after_string(b, "k");
  poke<uint32_t>(b, type_at, 13);
  expect_error(b, "unknown metadata value type 13");

  gguf::writer wb;
  wb.set_bool("flag", true);
  b = wb.serialize();
  b[after_string(b, "flag") + 4] = std::byte{2};
  expect_error(b, "bool value 2");
}

TEST(GgufHostile, DuplicateKeysAndTensors) {
  gguf::writer w;
  w.set_u32("aaaa", 1);
  w.set_u32("bbbb", 2);
  auto b = w.serialize();
  std::memcpy(b.data() + after_string(b, "bbbb") - 4, "aaaa", 4);
  expect_error(b, "duplicate metadata key 'aaaa'");

  gguf::writer wt;
  wt.add_tensor("tt_a", tensor_type::f32, {4}, bytes_t(16));
  wt.add_tensor("tt_b", tensor_type::f32, {4}, bytes_t(16));
  b = wt.serialize();
  std::memcpy(b.data() + after_string(b, "tt_b") - 4, "tt_a", 4);
  expect_error(b, "duplicate tensor name 'tt_a'");
}

TEST(GgufHostile, BadTensorShapes) {
  const auto base = small_writer().serialize();
  const size_t ndims_at = after_string(base, "t.F32");
  auto b = base;
  poke<uint32_t>(b, ndims_at, 0);
  expect_error(b, "has 0 dimensions");
  b = base;
  poke<uint32_t>(b, ndims_at, 5);
  expect_error(b, "has 5 dimensions");
  b = base;
  poke<uint64_t>(b, ndims_at + 4, 0);  // ne[0] = 0
  expect_error(b, "invalid or overflowing shape");
  b = base;
  poke<uint64_t>(b, ndims_at + 4, uint64_t{1} << 40);  // ne[0] * ne[1] * ... overflows int64? not yet
  poke<uint64_t>(b, ndims_at + 12, uint64_t{1} << 40);
  expect_error(b, "invalid or overflowing shape");
  b = base;
  poke<uint64_t>(b, ndims_at + 4, std::numeric_limits<uint64_t>::max());
  expect_error(b, "invalid or overflowing shape");
  b = base;
  const size_t q_ndims_at = after_string(base, "t.Q4_1");
  poke<uint64_t>(b, q_ndims_at + 4, 48);  // not a multiple of the 32-element block
  expect_error(b, "not a multiple of the Q4_1 block size");
  b = base;  // byte size overflow: the element count fits int64 but 4 bytes each do not
  poke<uint64_t>(b, ndims_at + 4, uint64_t{1} << 62);
  poke<uint64_t>(b, ndims_at + 12, 1);
  expect_error(b, "byte size overflows");
}

TEST(GgufHostile, UnsupportedTensorTypeIsNamed) {
  auto b = small_writer().serialize();
  const size_t type_at = after_string(b, "t.Q8_0") + 4 + 2 * 8;
  poke<uint32_t>(b, type_at, 16);  // IQ2_XXS
  expect_error(b, "unsupported tensor type IQ2_XXS in tensor t.Q8_0");
  poke<uint32_t>(b, type_at, 15);  // Q8_K: a ggml type, but activations only
  expect_error(b, "unsupported tensor type Q8_K in tensor t.Q8_0");
  poke<uint32_t>(b, type_at, 999);
  expect_error(b, "unsupported tensor type type 999 in tensor t.Q8_0");
}

TEST(GgufHostile, BadOffsetsAndAlignment) {
  const auto base = small_writer().serialize();
  const size_t offset_at = after_string(base, "t.Q4_0") + 4 + 2 * 8 + 4;
  auto b = base;
  poke<uint64_t>(b, offset_at, 3);
  expect_error(b, "not aligned");
  b = base;
  poke<uint64_t>(b, offset_at, uint64_t{1} << 40);
  expect_error(b, "extends past the end of the file");
  b = base;
  poke<uint64_t>(b, offset_at, std::numeric_limits<uint64_t>::max() - 31);  // offset + size wraps
  expect_error(b, "extends past the end of the file");
  b = base;  // the last tensor's data cut short
  b.resize(b.size() - 40);
  expect_error(b, "extends past the end of the file");

  gguf::writer w;
  w.set_u32("general.alignment", 48);
  expect_error(w.serialize(), "power of two");
  gguf::writer w0;
  w0.set_u32("general.alignment", 0);
  expect_error(w0.serialize(), "power of two");
}

TEST(GgufHostile, RandomCorruptionNeverCrashes) {
  // Flip random bytes of a valid file many times: every outcome is a parse or a format_error.
  const auto base = small_writer().serialize();
  std::mt19937 rng(42);
  int errors = 0;
  for (int i = 0; i < 3000; ++i) {
    auto b = base;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) b[rng() % 200] = static_cast<std::byte>(rng());
    try {
      const auto f = parse(b);
      for (const auto& t : f.tensors()) {
        ASSERT_LE(t.data + t.nbytes, b.data() + b.size()) << "tensor data must stay inside the file";
      }
    } catch (const gguf::format_error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 100);
}

TEST(ModelConfig, RejectsOtherArchitecturesByName) {
  synthetic_model_spec s;
  auto w = make_synthetic_model(s);
  w.set_string("general.architecture", "gpt2");
  const auto b = w.serialize();
  try {
    read_model_config(parse(b));
    FAIL();
  } catch (const gguf::format_error& e) {
    EXPECT_NE(std::string(e.what()).find("unsupported model architecture 'gpt2'"), std::string::npos) << e.what();
  }
}

TEST(ModelConfig, SyntheticShapesAndTying) {
  synthetic_model_spec s;
  s.n_layer = 3;
  s.n_embd = 96;
  s.n_head = 6;
  s.n_head_kv = 2;
  s.n_ff = 160;
  s.n_vocab = 300;
  s.tied_output = false;
  s.weight_type = tensor_type::q8_0;
  const auto b = make_synthetic_model(s).serialize();
  const auto f = parse(b);
  const auto c = read_model_config(f);
  EXPECT_EQ(c.n_layer, 3u);
  EXPECT_EQ(c.head_dim, 16u);
  EXPECT_EQ(c.kv_dim(), 32u);
  EXPECT_EQ(c.n_vocab, 300u);
  EXPECT_FALSE(c.tied_output);
  EXPECT_EQ(f.find_tensor("blk.2.ffn_down.weight")->type, tensor_type::q8_0);

  s.tied_output = true;
  EXPECT_TRUE(read_model_config(parse(make_synthetic_model(s).serialize())).tied_output);
}

TEST(ModelConfig, MissingAndInconsistentKeys) {
  auto w = make_synthetic_model({});
  w.set_u32("llama.attention.head_count_kv", 3);  // 4 heads are not a multiple of 3
  EXPECT_THROW(read_model_config(parse(w.serialize())), gguf::format_error);

  auto w2 = make_synthetic_model({});
  w2.set_u32("llama.feed_forward_length", 999);  // tensors say 256
  try {
    read_model_config(parse(w2.serialize()));
    FAIL();
  } catch (const gguf::format_error& e) {
    EXPECT_NE(std::string(e.what()).find("blk.0.ffn_gate.weight"), std::string::npos) << e.what();
  }
}

TEST(Quantize, RoundTripErrorIsWithinTheTypesStep) {
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(256);
  for (auto& v : x) v = n(rng);
  struct bound {
    tensor_type t;
    float max_abs;
  };
  for (auto [t, max_abs] :
       {bound{tensor_type::f32, 0.0f}, bound{tensor_type::f16, 2e-3f}, bound{tensor_type::bf16, 2e-2f},
        bound{tensor_type::q8_0, 0.02f}, bound{tensor_type::q4_0, 0.35f}, bound{tensor_type::q4_1, 0.25f}}) {
    bytes_t q(row_bytes(t, 256));
    std::vector<float> y(256);
    quantize_row(t, x.data(), 256, q.data());
    dequantize_row(t, q.data(), 256, y.data());
    float worst = 0;
    for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
    EXPECT_LE(worst, max_abs) << traits_of(t).name;
  }
}
