// GGUF model files (versions 2 and 3, little-endian): metadata, tensor infos, tensor data.
//
//   +--------------------------------------------------------------+
//   | magic "GGUF" | version u32 | n_tensors u64 | n_kv u64          |
//   | n_kv x  { key: string | type u32 | value }                     |
//   | n_tensors x { name: string | n_dims u32 | dims u64[n_dims]     |
//   |               | type u32 | offset u64 }                        |
//   | padding to `general.alignment` (default 32)                    |
//   | tensor data: each tensor at data_start + offset (aligned)      |
//   +--------------------------------------------------------------+
//   string = len u64 | bytes;  array value = elem type u32 | count u64 | elems
//
// The reader validates everything against the file size before it allocates or indexes, so
// a hostile file gives a gguf::format_error, never a crash or an unbounded allocation.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/gguf/tensor_type.h"
#include "engine/platform/mapped_file.h"

namespace tandem::gguf {

class format_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Metadata value types, numbered as in the file.
enum class value_type : uint32_t {
  uint8 = 0,
  int8 = 1,
  uint16 = 2,
  int16 = 3,
  uint32 = 4,
  int32 = 5,
  float32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  uint64 = 10,
  int64 = 11,
  float64 = 12,
};
std::string_view type_name(value_type t);

struct value;
struct array_value {
  value_type elem_type = value_type::uint8;
  std::vector<value> items;
};

// One metadata value. The variant's index equals the value_type number.
struct value {
  std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool, std::string, array_value, uint64_t,
               int64_t, double>
      data;

  value_type type() const { return static_cast<value_type>(data.index()); }
  // Any integer (or bool) type, as int64; nullopt otherwise or if a uint64 does not fit.
  std::optional<int64_t> as_int() const;
  // Any numeric type, as double.
  std::optional<double> as_float() const;
  std::optional<bool> as_bool() const;
  const std::string* as_string() const;
  const array_value* as_array() const;
  // Short human-readable rendering (arrays abbreviated).
  std::string to_string(size_t max_items = 8) const;
};

struct tensor_info {
  std::string name;
  tensor_type type = tensor_type::f32;
  int n_dims = 0;
  std::array<int64_t, 4> ne{1, 1, 1, 1};  // ne[0] = elements per row (innermost)
  uint64_t offset = 0;                    // from the start of the data section
  size_t nbytes = 0;
  const std::byte* data = nullptr;  // into the mapping (or the parsed buffer)

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
};

class file {
 public:
  // Maps `path` and parses it. Throws format_error (bad content) or std::runtime_error (I/O).
  static file open(const std::filesystem::path& path);
  // Parses bytes owned by the caller, who keeps them alive as long as the file is used.
  static file parse(std::span<const std::byte> bytes);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }
  size_t file_size() const { return bytes_.size(); }
  std::span<const std::byte> bytes() const { return bytes_; }  // the whole file
  // The path open() mapped; empty for parse().
  const std::filesystem::path& path() const { return path_; }

  const std::vector<std::pair<std::string, value>>& metadata() const { return metadata_; }
  const value* find(std::string_view key) const;
  const std::vector<tensor_info>& tensors() const { return tensors_; }
  const tensor_info* find_tensor(std::string_view name) const;

  // Typed look-ups: nullopt if absent; format_error if present with an unfitting type.
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  const array_value* get_array(std::string_view key) const;

 private:
  file() = default;
  void parse_all();

  std::shared_ptr<mapped_file> mapping_;  // null for parse()
  std::filesystem::path path_;
  std::span<const std::byte> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::vector<std::pair<std::string, value>> metadata_;
  std::vector<tensor_info> tensors_;
};

}  // namespace tandem::gguf
