// Parses GGUF v2/v3. Every count and size is checked against the bytes that remain before
// anything is allocated, so the work done is bounded by the file size.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <sstream>
#include <unordered_set>

#include "engine/gguf/gguf.h"

namespace tandem::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr int kMaxDims = 4;
constexpr int kMaxArrayDepth = 4;  // arrays of arrays of ... (none deeper in practice)
constexpr uint64_t kMaxStringBytes = 1ull << 30;

static_assert(std::endian::native == std::endian::little, "GGUF reader assumes a little-endian host");

// Bytes the smallest encoding of one element of `t` takes: a lower bound used to reject
// counts that could not possibly fit in the rest of the file.
uint64_t min_encoded_size(value_type t) {
  switch (t) {
    case value_type::uint8:
    case value_type::int8:
    case value_type::boolean:
      return 1;
    case value_type::uint16:
    case value_type::int16:
      return 2;
    case value_type::uint32:
    case value_type::int32:
    case value_type::float32:
      return 4;
    case value_type::uint64:
    case value_type::int64:
    case value_type::float64:
      return 8;
    case value_type::string:
      return 8;  // length prefix
    case value_type::array:
      return 12;  // element type + count
  }
  return 1;
}

class cursor {
 public:
  explicit cursor(std::span<const std::byte> bytes) : bytes_(bytes) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }

  template <class T>
  T read(const char* what) {
    if (remaining() < sizeof(T)) fail_truncated(what);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const char* what) {
    const auto len = read<uint64_t>(what);
    if (len > remaining() || len > kMaxStringBytes) {
      std::ostringstream os;
      os << "string length " << len << " in " << what << " exceeds the " << remaining()
         << " bytes left in the file (offset " << pos_ << ")";
      throw format_error(os.str());
    }
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

  // Rejects `count` elements of at least `min_size` bytes each that cannot fit.
  void check_count(uint64_t count, uint64_t min_size, const std::string& what) const {
    if (count > remaining() / min_size) {
      std::ostringstream os;
      os << "count " << count << " of " << what << " cannot fit in the " << remaining()
         << " bytes left in the file (offset " << pos_ << ")";
      throw format_error(os.str());
    }
  }

 private:
  [[noreturn]] void fail_truncated(const char* what) const {
    std::ostringstream os;
    os << "file truncated while reading " << what << " at offset " << pos_;
    throw format_error(os.str());
  }

  std::span<const std::byte> bytes_;
  size_t pos_ = 0;
};

value_type read_value_type(cursor& c, const std::string& key) {
  const auto raw = c.read<uint32_t>("value type");
  if (raw > static_cast<uint32_t>(value_type::float64)) {
    throw format_error("unknown metadata value type " + std::to_string(raw) + " for key '" + key + "'");
  }
  return static_cast<value_type>(raw);
}

value read_value(cursor& c, value_type t, const std::string& key, int depth);

array_value read_array(cursor& c, const std::string& key, int depth) {
  if (depth >= kMaxArrayDepth) throw format_error("arrays nested too deeply in key '" + key + "'");
  array_value arr;
  arr.elem_type = read_value_type(c, key);
  const auto count = c.read<uint64_t>("array length");
  c.check_count(count, min_encoded_size(arr.elem_type), "array elements of key '" + key + "'");
  arr.items.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) arr.items.push_back(read_value(c, arr.elem_type, key, depth + 1));
  return arr;
}

value read_value(cursor& c, value_type t, const std::string& key, int depth) {
  value v;
  switch (t) {
    case value_type::uint8:
      v.data = c.read<uint8_t>("u8 value");
      break;
    case value_type::int8:
      v.data = c.read<int8_t>("i8 value");
      break;
    case value_type::uint16:
      v.data = c.read<uint16_t>("u16 value");
      break;
    case value_type::int16:
      v.data = c.read<int16_t>("i16 value");
      break;
    case value_type::uint32:
      v.data = c.read<uint32_t>("u32 value");
      break;
    case value_type::int32:
      v.data = c.read<int32_t>("i32 value");
      break;
    case value_type::float32:
      v.data = c.read<float>("f32 value");
      break;
    case value_type::uint64:
      v.data = c.read<uint64_t>("u64 value");
      break;
    case value_type::int64:
      v.data = c.read<int64_t>("i64 value");
      break;
    case value_type::float64:
      v.data = c.read<double>("f64 value");
      break;
    case value_type::boolean: {
      const auto b = c.read<uint8_t>("bool value");
      if (b > 1) throw format_error("bool value " + std::to_string(b) + " for key '" + key + "'");
      v.data = b != 0;
      break;
    }
    case value_type::string:
      v.data = c.read_string("string value");
      break;
    case value_type::array:
      v.data = read_array(c, key, depth);
      break;
  }
  return v;
}

// a * b into *out, false on overflow of int64.
bool mul_overflows(int64_t a, int64_t b, int64_t* out) { return __builtin_mul_overflow(a, b, out); }

}  // namespace

std::string_view type_name(value_type t) {
  static constexpr std::string_view names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                               "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<size_t>(t);
  return i < std::size(names) ? names[i] : "?";
}

std::optional<int64_t> value::as_int() const {
  return std::visit(
      [](const auto& x) -> std::optional<int64_t> {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) {
          return x ? 1 : 0;
        } else if constexpr (std::is_same_v<T, uint64_t>) {
          if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
          return static_cast<int64_t>(x);
        } else if constexpr (std::is_integral_v<T>) {
          return static_cast<int64_t>(x);
        } else {
          return std::nullopt;
        }
      },
      data);
}

std::optional<double> value::as_float() const {
  return std::visit(
      [](const auto& x) -> std::optional<double> {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
          return static_cast<double>(x);
        else
          return std::nullopt;
      },
      data);
}

std::optional<bool> value::as_bool() const {
  if (const auto* b = std::get_if<bool>(&data)) return *b;
  return std::nullopt;
}

const std::string* value::as_string() const { return std::get_if<std::string>(&data); }
const array_value* value::as_array() const { return std::get_if<array_value>(&data); }

std::string value::to_string(size_t max_items) const {
  if (const auto* s = as_string()) return '"' + *s + '"';
  if (const auto* a = as_array()) {
    std::string out = "[";
    for (size_t i = 0; i < a->items.size() && i < max_items; ++i) {
      if (i) out += ", ";
      out += a->items[i].to_string(max_items);
    }
    if (a->items.size() > max_items) out += ", ... (" + std::to_string(a->items.size()) + " items)";
    return out + "]";
  }
  if (const auto b = as_bool()) return *b ? "true" : "false";
  if (type() == value_type::float32 || type() == value_type::float64) {
    std::ostringstream os;
    os << *as_float();
    return os.str();
  }
  if (type() == value_type::uint64) return std::to_string(std::get<uint64_t>(data));
  return std::to_string(*as_int());
}

file file::open(const std::filesystem::path& path) {
  file f;
  f.mapping_ = std::make_shared<mapped_file>(path);
  f.bytes_ = f.mapping_->bytes();
  f.path_ = path;
  try {
    f.parse_all();
  } catch (const format_error& e) {
    throw format_error(path.string() + ": " + e.what());
  }
  return f;
}

file file::parse(std::span<const std::byte> bytes) {
  file f;
  f.bytes_ = bytes;
  f.parse_all();
  return f;
}

void file::parse_all() {
  cursor c(bytes_);
  if (bytes_.size() < 4) throw format_error("not a GGUF file: too short for the magic number");
  const auto magic = c.read<uint32_t>("magic");
  if (magic != kMagic) throw format_error("not a GGUF file: bad magic number");
  version_ = c.read<uint32_t>("version");
  if (version_ == 1) throw format_error("GGUF version 1 is not supported (only 2 and 3)");
  if (version_ != 2 && version_ != 3) {
    if (__builtin_bswap32(version_) == 2 || __builtin_bswap32(version_) == 3) {
      throw format_error("big-endian GGUF files are not supported");
    }
    throw format_error("unsupported GGUF version " + std::to_string(version_));
  }
  const auto n_tensors = c.read<uint64_t>("tensor count");
  const auto n_kv = c.read<uint64_t>("metadata count");
  // A key/value pair takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor info
  // at least 8 (name length) + 4 (n_dims) + 4 (type) + 8 (offset) bytes.
  c.check_count(n_kv, 13, "metadata entries");
  c.check_count(n_tensors, 24, "tensor infos");

  metadata_.reserve(static_cast<size_t>(n_kv));
  std::unordered_set<std::string> keys;
  for (uint64_t i = 0; i < n_kv; ++i) {
    auto key = c.read_string("metadata key");
    if (!keys.insert(key).second) throw format_error("duplicate metadata key '" + key + "'");
    const auto t = read_value_type(c, key);
    auto v = read_value(c, t, key, 0);
    metadata_.emplace_back(std::move(key), std::move(v));
  }

  if (const value* a = find("general.alignment")) {
    const auto al = a->as_int();
    if (!al || *al <= 0 || !std::has_single_bit(static_cast<uint64_t>(*al)) || *al > (1 << 20)) {
      throw format_error("general.alignment must be a power of two (got " + a->to_string() + ")");
    }
    alignment_ = static_cast<uint64_t>(*al);
  }

  tensors_.reserve(static_cast<size_t>(n_tensors));
  std::unordered_set<std::string> names;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    tensor_info t;
    t.name = c.read_string("tensor name");
    if (!names.insert(t.name).second) throw format_error("duplicate tensor name '" + t.name + "'");
    const auto n_dims = c.read<uint32_t>("tensor dimension count");
    if (n_dims == 0 || n_dims > kMaxDims) {
      throw format_error("tensor '" + t.name + "' has " + std::to_string(n_dims) + " dimensions (1 to 4 allowed)");
    }
    t.n_dims = static_cast<int>(n_dims);
    int64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const auto ne = c.read<uint64_t>("tensor dimension");
      if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          mul_overflows(n_elements, static_cast<int64_t>(ne), &n_elements)) {
        throw format_error("tensor '" + t.name + "' has an invalid or overflowing shape");
      }
      t.ne[d] = static_cast<int64_t>(ne);
    }
    const auto type_id = c.read<uint32_t>("tensor type");
    const auto traits = traits_of(type_id);
    if (!traits) {
      throw format_error("unsupported tensor type " + ggml_type_name(type_id) + " in tensor " + t.name);
    }
    t.type = static_cast<tensor_type>(type_id);
    if (t.ne[0] % traits->block_size != 0) {
      throw format_error("tensor '" + t.name + "': row length " + std::to_string(t.ne[0]) +
                         " is not a multiple of the " + std::string(traits->name) + " block size");
    }
    int64_t nbytes = 0;
    if (mul_overflows(n_elements / traits->block_size, static_cast<int64_t>(traits->block_bytes), &nbytes)) {
      throw format_error("tensor '" + t.name + "': byte size overflows");
    }
    t.nbytes = static_cast<size_t>(nbytes);
    t.offset = c.read<uint64_t>("tensor offset");
    if (t.offset % alignment_ != 0) {
      throw format_error("tensor '" + t.name + "': offset " + std::to_string(t.offset) + " is not aligned to " +
                         std::to_string(alignment_));
    }
    tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t header_end = c.pos();
  data_offset_ = static_cast<size_t>((header_end + alignment_ - 1) / alignment_ * alignment_);
  const uint64_t data_size = data_offset_ <= bytes_.size() ? bytes_.size() - data_offset_ : 0;
  if (!tensors_.empty() && data_offset_ > bytes_.size()) {
    throw format_error("file truncated before the tensor data section");
  }
  for (auto& t : tensors_) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      std::ostringstream os;
      os << "tensor '" << t.name << "' (offset " << t.offset << ", " << t.nbytes
         << " bytes) extends past the end of the file (data section is " << data_size << " bytes)";
      throw format_error(os.str());
    }
    t.data = bytes_.data() + data_offset_ + t.offset;
  }
}

const value* file::find(std::string_view key) const {
  for (const auto& [k, v] : metadata_) {
    if (k == key) return &v;
  }
  return nullptr;
}

const tensor_info* file::find_tensor(std::string_view name) const {
  for (const auto& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

namespace {
[[noreturn]] void wrong_type(std::string_view key, const value& v, const char* wanted) {
  throw format_error("metadata key '" + std::string(key) + "' has type " + std::string(type_name(v.type())) +
                     ", expected " + wanted);
}
}  // namespace

std::optional<std::string> file::get_string(std::string_view key) const {
  const value* v = find(key);
  if (!v) return std::nullopt;
  if (const auto* s = v->as_string()) return *s;
  wrong_type(key, *v, "string");
}

std::optional<int64_t> file::get_int(std::string_view key) const {
  const value* v = find(key);
  if (!v) return std::nullopt;
  if (auto i = v->as_int()) return i;
  wrong_type(key, *v, "integer");
}

std::optional<double> file::get_float(std::string_view key) const {
  const value* v = find(key);
  if (!v) return std::nullopt;
  if (auto d = v->as_float()) return d;
  wrong_type(key, *v, "number");
}

std::optional<bool> file::get_bool(std::string_view key) const {
  const value* v = find(key);
  if (!v) return std::nullopt;
  if (auto b = v->as_bool()) return b;
  wrong_type(key, *v, "bool");
}

const array_value* file::get_array(std::string_view key) const {
  const value* v = find(key);
  if (!v) return nullptr;
  if (const auto* a = v->as_array()) return a;
  wrong_type(key, *v, "array");
}

}  // namespace tandem::gguf
