#include "engine/batch/batch_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tandem::batch {
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const std::string& what, const fs::path& p) {
  throw std::runtime_error(what + " " + p.string() + ": " + std::strerror(errno));
}

void write_all(int fd, std::string_view data, const fs::path& p) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write", p);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The custom_id of a stored result line; "" when the line is not one.
std::string custom_id_of(std::string_view line) {
  boost::system::error_code ec;
  const json::value v = json::parse(line, ec);
  if (ec || !v.is_object()) return {};
  const json::value* id = v.get_object().if_contains("custom_id");
  return id && id->is_string() ? std::string(id->get_string()) : std::string();
}

}  // namespace

void write_durably(const fs::path& path, std::string_view data) {
  const fs::path tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) fail("cannot create", tmp);
  try {
    write_all(fd, data, tmp);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    fail("cannot fsync", tmp);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename onto", path);
  fsync_dir(path.parent_path());
}

std::vector<line_span> index_lines(std::string_view content) {
  std::vector<line_span> out;
  size_t pos = 0;
  while (pos < content.size()) {
    size_t end = content.find('\n', pos);
    if (end == std::string_view::npos) end = content.size();
    size_t e = end;
    if (e > pos && content[e - 1] == '\r') --e;
    const std::string_view line = content.substr(pos, e - pos);
    if (line.find_first_not_of(" \t") != std::string_view::npos) {
      out.push_back(line_span{pos, static_cast<uint32_t>(e - pos)});
    }
    pos = end + 1;
  }
  return out;
}

// ---- result_log ----

result_log::result_log(const fs::path& path) {
  std::string text;
  if (fs::exists(path)) text = slurp(path);
  // A torn append: cut back to the last newline, durably, before anything is appended.
  const size_t keep = text.empty() ? 0 : text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd_ < 0) fail("cannot open", path);
  if (keep < text.size()) {
    if (::ftruncate(fd_, static_cast<off_t>(keep)) != 0 || ::fsync(fd_) != 0) fail("cannot truncate", path);
    text.resize(keep);
  }
  for (const auto& span : index_lines(text)) {
    std::string id = custom_id_of(std::string_view(text).substr(span.offset, span.length));
    ++lines_;
    if (!id.empty()) answered_.insert(std::move(id));
  }
  bytes_ = text.size();
}

result_log::~result_log() {
  if (fd_ >= 0) ::close(fd_);
}

result_log::result_log(result_log&& o) noexcept
    : fd_(o.fd_), answered_(std::move(o.answered_)), lines_(o.lines_), bytes_(o.bytes_) {
  o.fd_ = -1;
}

result_log& result_log::operator=(result_log&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
    answered_ = std::move(o.answered_);
    lines_ = o.lines_;
    bytes_ = o.bytes_;
  }
  return *this;
}

void result_log::append(std::string_view line, const std::string& custom_id) {
  if (fd_ < 0) throw std::runtime_error("result log not open");
  std::string whole(line);
  whole += '\n';
  write_all(fd_, whole, "result log");  // O_APPEND: one write, at the end
  if (::fsync(fd_) != 0) fail("cannot fsync", "result log");
  answered_.insert(custom_id);
  ++lines_;
  bytes_ += whole.size();
}

// ---- batch_store ----

batch_store::batch_store(fs::path dir) : dir_(std::move(dir)) {
  std::error_code ec;
  fs::create_directories(dir_ / "files", ec);
  if (!ec) fs::create_directories(dir_ / "batches", ec);
  if (ec) throw std::runtime_error("cannot create the batch directory " + dir_.string() + ": " + ec.message());
  const fs::path lock = dir_ / "lock";
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0) fail("cannot open", lock);
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd_);
    lock_fd_ = -1;
    throw std::runtime_error("the batch directory " + dir_.string() + " is in use by another process");
  }
}

batch_store::~batch_store() {
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

fs::path batch_store::content_path(const std::string& file_id) const { return dir_ / "files" / (file_id + ".jsonl"); }

std::vector<file_record> batch_store::load_files() {
  std::vector<file_record> out;
  for (const auto& entry : fs::directory_iterator(dir_ / "files")) {
    if (entry.path().extension() != ".json") continue;
    boost::system::error_code ec;
    std::optional<file_record> f;
    try {
      const json::value v = json::parse(slurp(entry.path()), ec);
      if (!ec) f = file_from_stored(v);
    } catch (const std::exception&) {
    }
    if (!f || f->id + ".json" != entry.path().filename().string()) {
      ++skipped_;
      continue;
    }
    out.push_back(std::move(*f));
  }
  return out;
}

void batch_store::remove_orphans(const std::unordered_set<std::string>& keep) {
  std::vector<fs::path> gone;
  for (const auto& entry : fs::directory_iterator(dir_ / "files")) {
    const auto& p = entry.path();
    const bool tmp = p.extension() == ".tmp";
    if ((p.extension() == ".jsonl" && !keep.contains(p.stem().string())) || tmp) gone.push_back(p);
  }
  std::error_code ec;
  for (const auto& p : gone) fs::remove(p, ec);
}

std::vector<batch_record> batch_store::load_batches() {
  std::vector<batch_record> out;
  for (const auto& entry : fs::directory_iterator(dir_ / "batches")) {
    if (entry.path().extension() != ".json") continue;
    boost::system::error_code ec;
    std::optional<batch_record> b;
    try {
      const json::value v = json::parse(slurp(entry.path()), ec);
      if (!ec) b = batch_from_stored(v);
    } catch (const std::exception&) {
    }
    if (!b || b->id + ".json" != entry.path().filename().string()) {
      ++skipped_;
      continue;
    }
    out.push_back(std::move(*b));
  }
  return out;
}

void batch_store::put_file(const file_record& f, std::string_view content) {
  write_durably(content_path(f.id), content);
  put_file_record(f);
}

void batch_store::put_file_record(const file_record& f) {
  write_durably(dir_ / "files" / (f.id + ".json"), json::serialize(to_stored_json(f)));
}

void batch_store::save_batch(const batch_record& b) {
  write_durably(dir_ / "batches" / (b.id + ".json"), json::serialize(to_stored_json(b)));
}

void batch_store::remove_file(const std::string& file_id) {
  std::error_code ec;
  fs::remove(dir_ / "files" / (file_id + ".json"), ec);
  fsync_dir(dir_ / "files");
  fs::remove(content_path(file_id), ec);
}

std::string batch_store::read_content(const std::string& file_id) const {
  const fs::path p = content_path(file_id);
  if (!fs::exists(p)) return {};
  return slurp(p);
}

std::string batch_store::read_line(const std::string& file_id, const line_span& span) const {
  const fs::path p = content_path(file_id);
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open", p);
  std::string out(span.length, '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::pread(fd, out.data() + got, out.size() - got, static_cast<off_t>(span.offset + got));
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      ::close(fd);
      throw std::runtime_error("cannot read " + p.string());
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  return out;
}

}  // namespace tandem::batch
