// The Batch API's records as plain data (OpenAI's file and batch objects, plus what Tandem
// keeps beside them: the owning tenant, the ids of the output files being written) and
// their JSON: the client's view (to_api_json, OpenAI's field names) and the stored form
// (to_stored_json / *_from_stored, which adds the internal fields). No actors, no sockets.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tandem::batch {

// OpenAI's batch states. A batch moves forward only:
//   validating -> in_progress -> finalizing -> completed
//   validating -> failed                 (the input cannot run: unknown file, no lines)
//   validating | in_progress -> cancelling -> cancelled   (in-flight requests finish first)
//   in_progress -> expired               (completion_window passed)
enum class batch_status { validating, in_progress, finalizing, completed, failed, expired, cancelling, cancelled };

const char* to_string(batch_status s);
std::optional<batch_status> parse_status(std::string_view s);
// completed, failed, expired, cancelled: nothing more runs and the record no longer changes.
bool is_final(batch_status s);

struct file_record {
  std::string id;      // "file-..."
  std::string tenant;  // the owner: no other tenant sees it (internal)
  std::string filename;
  std::string purpose;  // "batch" (uploads), "batch_output" (results and errors)
  uint64_t bytes = 0;
  int64_t created_at = 0;  // unix seconds
};

struct batch_error {
  std::string code;
  std::string message;
  std::string param;  // "" = null
  int64_t line = -1;  // 1-based line of the input file; -1 = null
};

struct request_counts {
  uint64_t total = 0;
  uint64_t completed = 0;  // answered with status 200 (lines of the output file)
  uint64_t failed = 0;     // answered otherwise (lines of the error file)
};

struct batch_record {
  std::string id;  // "batch_..."
  std::string tenant;
  std::string endpoint;  // "/v1/chat/completions", "/v1/completions", "/v1/embeddings"
  std::string input_file_id;
  std::string completion_window = "24h";
  batch_status status = batch_status::validating;
  boost::json::value metadata;  // object or null, as the client gave it
  int64_t created_at = 0;
  int64_t in_progress_at = 0;  // 0 = null (for every *_at)
  int64_t expires_at = 0;
  int64_t finalizing_at = 0;
  int64_t completed_at = 0;
  int64_t failed_at = 0;
  int64_t expired_at = 0;
  int64_t cancelling_at = 0;
  int64_t cancelled_at = 0;
  request_counts counts;
  std::vector<batch_error> errors;  // why validation failed
  // The output and error files, named at creation and appended to while the batch runs
  // (internal until the batch is final: the client sees output_file_id / error_file_id then,
  // null for one holding no line).
  std::string output_file_id;
  std::string error_file_id;
};

// The client's view: OpenAI's file object / batch object.
boost::json::object to_api_json(const file_record& f);
boost::json::object to_api_json(const batch_record& b);

// The stored form: the client's fields plus the internal ones. *_from_stored returns none for
// a record it cannot read (a damaged file is skipped, not fatal).
boost::json::object to_stored_json(const file_record& f);
boost::json::object to_stored_json(const batch_record& b);
std::optional<file_record> file_from_stored(const boost::json::value& v);
std::optional<batch_record> batch_from_stored(const boost::json::value& v);

}  // namespace tandem::batch
