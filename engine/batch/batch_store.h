// The Batch API's durable store: files and batch records under one directory (--batch-dir),
// written so a crash loses at most the requests in flight.
//
//   <dir>/files/<file_id>.jsonl    a file's content (an upload, or a batch's output / errors)
//   <dir>/files/<file_id>.json     its record (file_record, stored form)
//   <dir>/batches/<batch_id>.json  a batch's record (batch_record, stored form)
//
// Invariants:
// - A record (file or batch) is replaced whole: written to a temporary name, fsynced,
//   renamed over the old one, and the directory fsynced. A reader sees the old or the new.
// - An upload's content is durable before its record: a record always names whole content.
//   Content without a record (a crash between) is removed at load.
// - A batch's results are appended one line at a time to its output or error file, each
//   append fsynced before the request counts as answered. A crash in an append leaves at most
//   one torn last line, which result_log::open cuts off; so every custom_id appears at most
//   once, and a restart runs exactly the lines whose custom_id is in neither file.
//
// Plain C++ (no actors): the batch_queue actor (actors/batch_queue.h) is its one user, on its
// own thread. Errors on disk throw std::runtime_error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "engine/batch/batch_records.h"

namespace tandem::batch {

// Writes `data` to `path` atomically and durably (temporary file, fsync, rename, fsync of the
// directory).
void write_durably(const std::filesystem::path& path, std::string_view data);

// Where one line of a file lies (without its newline).
struct line_span {
  uint64_t offset = 0;
  uint32_t length = 0;
};

// The non-blank lines of `content`, in order.
std::vector<line_span> index_lines(std::string_view content);

// An append-only file of result lines, each ending in '\n' and fsynced.
class result_log {
 public:
  result_log() = default;
  // Opens (creating) `path`: a last line without its newline (a torn append) is cut off, and
  // the custom_id of every whole line is collected.
  explicit result_log(const std::filesystem::path& path);
  ~result_log();
  result_log(result_log&& o) noexcept;
  result_log& operator=(result_log&& o) noexcept;
  result_log(const result_log&) = delete;
  result_log& operator=(const result_log&) = delete;

  // Appends `line` (one JSON object, no newline) and fsyncs; `custom_id` counts as answered
  // only once this returns.
  void append(std::string_view line, const std::string& custom_id);
  const std::unordered_set<std::string>& answered() const { return answered_; }
  uint64_t lines() const { return lines_; }
  uint64_t bytes() const { return bytes_; }

 private:
  int fd_ = -1;
  std::unordered_set<std::string> answered_;
  uint64_t lines_ = 0;
  uint64_t bytes_ = 0;
};

class batch_store {
 public:
  // Creates the directory (and files/, batches/) when missing and locks it (<dir>/lock, an
  // exclusive flock held while the store lives): two servers on one directory would run the
  // same batches twice. Throws when it cannot, or when another process holds the lock.
  explicit batch_store(std::filesystem::path dir);
  ~batch_store();
  batch_store(const batch_store&) = delete;
  batch_store& operator=(const batch_store&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path content_path(const std::string& file_id) const;

  // Every readable record; damaged ones are skipped (counted in skipped()).
  std::vector<file_record> load_files();
  std::vector<batch_record> load_batches();
  size_t skipped() const { return skipped_; }
  // Removes content no one names: an upload that crashed between its content and its record.
  // `keep`: the ids of every file record and of every unfinished batch's output and error.
  void remove_orphans(const std::unordered_set<std::string>& keep);

  // An upload: its content, then its record, each durable.
  void put_file(const file_record& f, std::string_view content);
  // The record alone (a batch's output file, whose content was appended as it ran).
  void put_file_record(const file_record& f);
  void save_batch(const batch_record& b);
  // Removes a file's record and content (a record first: no record names missing content).
  void remove_file(const std::string& file_id);

  std::string read_content(const std::string& file_id) const;
  // One line of a file's content (pread).
  std::string read_line(const std::string& file_id, const line_span& span) const;

 private:
  std::filesystem::path dir_;
  int lock_fd_ = -1;
  size_t skipped_ = 0;
};

// ---- JSONL ----

// Why an upload cannot be a batch's input: the first problem, with its 1-based line.
struct jsonl_problem {
  std::string message;
  int64_t line = 0;
};

// An upload of purpose "batch": every non-blank line a JSON object with a non-empty string
// custom_id (unique in the file), at most `max_lines` of them, at least one. `lines` gets
// their count.
std::optional<jsonl_problem> check_batch_jsonl(std::string_view content, uint32_t max_lines, uint32_t& lines);

// One line of a batch's input, read for running against `endpoint`.
struct input_line {
  std::string custom_id;
  std::string body;  // the request body (JSON text) when runnable
  // Set when the line cannot run: OpenAI's error code ("invalid_url", "invalid_method",
  // "invalid_request") and a message; the line goes to the error file unanswered.
  std::string error_code;
  std::string error_message;
};
input_line read_input_line(std::string_view text, std::string_view endpoint);

// A result line, as OpenAI writes them:
//   {"id": "batch_req_...", "custom_id": ..., "response": {"status_code", "request_id", "body"}, "error": null}
// `body` is JSON text (a response or an error body); non-JSON text is kept as a string.
std::string response_line(std::string_view id, std::string_view custom_id, int status_code, std::string_view request_id,
                          std::string_view body);
//   {"id": ..., "custom_id": ..., "response": null, "error": {"code", "message"}}
std::string error_line(std::string_view id, std::string_view custom_id, std::string_view code,
                       std::string_view message);

}  // namespace tandem::batch
