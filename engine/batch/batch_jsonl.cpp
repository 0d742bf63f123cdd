// The JSONL of the Batch API: checking an upload, reading one input line for its endpoint,
// and writing result lines (declared in batch_store.h).
#include <boost/json.hpp>
#include <unordered_set>

#include "engine/batch/batch_store.h"

namespace tandem::batch {
namespace json = boost::json;

namespace {

// JSON text of at most this depth: a line is parsed whole, so a hostile nesting is refused
// early instead of recursing (Boost.JSON's default is 32; requests need far less).
json::parse_options line_options() {
  json::parse_options o;
  o.max_depth = 64;
  return o;
}

}  // namespace

std::optional<jsonl_problem> check_batch_jsonl(std::string_view content, uint32_t max_lines, uint32_t& lines) {
  lines = 0;
  std::unordered_set<std::string> ids;
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos < content.size()) {
    size_t end = content.find('\n', pos);
    if (end == std::string_view::npos) end = content.size();
    ++line_no;
    std::string_view line = content.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    if (++lines > max_lines) {
      return jsonl_problem{"the file has more than " + std::to_string(max_lines) + " requests", line_no};
    }
    boost::system::error_code ec;
    const json::value v = json::parse(line, ec, {}, line_options());
    if (ec) return jsonl_problem{"line " + std::to_string(line_no) + " is not valid JSON: " + ec.message(), line_no};
    if (!v.is_object()) return jsonl_problem{"line " + std::to_string(line_no) + " is not a JSON object", line_no};
    const json::value* id = v.get_object().if_contains("custom_id");
    if (!id || !id->is_string() || id->get_string().empty()) {
      return jsonl_problem{"line " + std::to_string(line_no) + " has no custom_id (a non-empty string)", line_no};
    }
    if (id->get_string().size() > 512) {
      return jsonl_problem{"line " + std::to_string(line_no) + ": custom_id is longer than 512 characters", line_no};
    }
    if (!ids.insert(std::string(id->get_string())).second) {
      return jsonl_problem{"line " + std::to_string(line_no) + " repeats custom_id '" + std::string(id->get_string()) +
                               "': each must be unique in the file",
                           line_no};
    }
  }
  if (lines == 0) return jsonl_problem{"the file holds no requests", 1};
  return std::nullopt;
}

input_line read_input_line(std::string_view text, std::string_view endpoint) {
  input_line out;
  boost::system::error_code ec;
  const json::value v = json::parse(text, ec, {}, line_options());
  if (ec || !v.is_object()) {
    out.error_code = "invalid_json_line";
    out.error_message = "the line is not a JSON object";
    return out;
  }
  const auto& o = v.get_object();
  if (const auto* id = o.if_contains("custom_id"); id && id->is_string()) out.custom_id = id->get_string();
  const json::value* method = o.if_contains("method");
  const json::value* url = o.if_contains("url");
  const json::value* body = o.if_contains("body");
  if (!method || !method->is_string() || method->get_string() != "POST") {
    out.error_code = "invalid_method";
    out.error_message = "method must be POST";
  } else if (!url || !url->is_string() || url->get_string() != endpoint) {
    out.error_code = "invalid_url";
    out.error_message = "url must be the batch's endpoint, " + std::string(endpoint);
  } else if (!body || !body->is_object()) {
    out.error_code = "invalid_request";
    out.error_message = "body must be a JSON object (the request for " + std::string(endpoint) + ")";
  } else {
    out.body = json::serialize(*body);
  }
  return out;
}

std::string response_line(std::string_view id, std::string_view custom_id, int status_code, std::string_view request_id,
                          std::string_view body) {
  boost::system::error_code ec;
  json::value b = json::parse(body, ec);
  if (ec) b = json::string(body);
  return json::serialize(json::object{
      {"id", id},
      {"custom_id", custom_id},
      {"response", json::object{{"status_code", status_code}, {"request_id", request_id}, {"body", std::move(b)}}},
      {"error", nullptr}});
}

std::string error_line(std::string_view id, std::string_view custom_id, std::string_view code,
                       std::string_view message) {
  return json::serialize(json::object{{"id", id},
                                      {"custom_id", custom_id},
                                      {"response", nullptr},
                                      {"error", json::object{{"code", code}, {"message", message}}}});
}

}  // namespace tandem::batch
