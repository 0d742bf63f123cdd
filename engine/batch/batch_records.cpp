#include "engine/batch/batch_records.h"

#include <boost/json.hpp>

namespace tandem::batch {
namespace json = boost::json;

namespace {

constexpr const char* kStatusNames[] = {"validating", "in_progress", "finalizing", "completed",
                                        "failed",     "expired",     "cancelling", "cancelled"};

json::value time_or_null(int64_t t) { return t > 0 ? json::value(t) : json::value(nullptr); }

std::string str(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

int64_t num(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (!v) return 0;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64()) return static_cast<int64_t>(v->get_uint64());
  return 0;
}

json::value errors_json(const batch_record& b) {
  if (b.errors.empty()) return nullptr;
  json::array data;
  for (const auto& e : b.errors) {
    data.push_back(json::object{{"code", e.code},
                                {"message", e.message},
                                {"param", e.param.empty() ? json::value(nullptr) : json::value(e.param)},
                                {"line", e.line >= 0 ? json::value(e.line) : json::value(nullptr)}});
  }
  return json::object{{"object", "list"}, {"data", std::move(data)}};
}

}  // namespace

const char* to_string(batch_status s) { return kStatusNames[static_cast<int>(s)]; }

std::optional<batch_status> parse_status(std::string_view s) {
  for (int i = 0; i < 8; ++i) {
    if (s == kStatusNames[i]) return static_cast<batch_status>(i);
  }
  return std::nullopt;
}

bool is_final(batch_status s) {
  return s == batch_status::completed || s == batch_status::failed || s == batch_status::expired ||
         s == batch_status::cancelled;
}

json::object to_api_json(const file_record& f) {
  return json::object{{"id", f.id},
                      {"object", "file"},
                      {"bytes", f.bytes},
                      {"created_at", f.created_at},
                      {"filename", f.filename},
                      {"purpose", f.purpose},
                      {"status", "processed"},
                      {"status_details", nullptr},
                      {"expires_at", nullptr}};
}

json::object to_api_json(const batch_record& b) {
  const bool final_state = is_final(b.status);
  auto file_or_null = [&](const std::string& id, uint64_t lines) {
    return final_state && lines > 0 ? json::value(id) : json::value(nullptr);
  };
  return json::object{
      {"id", b.id},
      {"object", "batch"},
      {"endpoint", b.endpoint},
      {"errors", errors_json(b)},
      {"input_file_id", b.input_file_id},
      {"completion_window", b.completion_window},
      {"status", to_string(b.status)},
      {"output_file_id", file_or_null(b.output_file_id, b.counts.completed)},
      {"error_file_id", file_or_null(b.error_file_id, b.counts.failed)},
      {"created_at", b.created_at},
      {"in_progress_at", time_or_null(b.in_progress_at)},
      {"expires_at", time_or_null(b.expires_at)},
      {"finalizing_at", time_or_null(b.finalizing_at)},
      {"completed_at", time_or_null(b.completed_at)},
      {"failed_at", time_or_null(b.failed_at)},
      {"expired_at", time_or_null(b.expired_at)},
      {"cancelling_at", time_or_null(b.cancelling_at)},
      {"cancelled_at", time_or_null(b.cancelled_at)},
      {"request_counts",
       json::object{{"total", b.counts.total}, {"completed", b.counts.completed}, {"failed", b.counts.failed}}},
      {"metadata", b.metadata},
  };
}

json::object to_stored_json(const file_record& f) {
  json::object o = to_api_json(f);
  o["tenant"] = f.tenant;
  return o;
}

json::object to_stored_json(const batch_record& b) {
  json::object o = to_api_json(b);
  o["tenant"] = b.tenant;
  o["output_file_id"] = b.output_file_id;
  o["error_file_id"] = b.error_file_id;
  return o;
}

std::optional<file_record> file_from_stored(const json::value& v) {
  if (!v.is_object()) return std::nullopt;
  const auto& o = v.get_object();
  file_record f;
  f.id = str(o, "id");
  f.tenant = str(o, "tenant");
  f.filename = str(o, "filename");
  f.purpose = str(o, "purpose");
  f.bytes = static_cast<uint64_t>(num(o, "bytes"));
  f.created_at = num(o, "created_at");
  if (f.id.empty() || f.tenant.empty()) return std::nullopt;
  return f;
}

std::optional<batch_record> batch_from_stored(const json::value& v) {
  if (!v.is_object()) return std::nullopt;
  const auto& o = v.get_object();
  batch_record b;
  b.id = str(o, "id");
  b.tenant = str(o, "tenant");
  b.endpoint = str(o, "endpoint");
  b.input_file_id = str(o, "input_file_id");
  b.completion_window = str(o, "completion_window");
  const auto status = parse_status(str(o, "status"));
  if (b.id.empty() || b.tenant.empty() || !status) return std::nullopt;
  b.status = *status;
  if (const auto* m = o.if_contains("metadata")) b.metadata = *m;
  b.created_at = num(o, "created_at");
  b.in_progress_at = num(o, "in_progress_at");
  b.expires_at = num(o, "expires_at");
  b.finalizing_at = num(o, "finalizing_at");
  b.completed_at = num(o, "completed_at");
  b.failed_at = num(o, "failed_at");
  b.expired_at = num(o, "expired_at");
  b.cancelling_at = num(o, "cancelling_at");
  b.cancelled_at = num(o, "cancelled_at");
  if (const auto* c = o.if_contains("request_counts"); c && c->is_object()) {
    b.counts.total = static_cast<uint64_t>(num(c->get_object(), "total"));
    b.counts.completed = static_cast<uint64_t>(num(c->get_object(), "completed"));
    b.counts.failed = static_cast<uint64_t>(num(c->get_object(), "failed"));
  }
  if (const auto* e = o.if_contains("errors"); e && e->is_object()) {
    if (const auto* data = e->get_object().if_contains("data"); data && data->is_array()) {
      for (const auto& item : data->get_array()) {
        if (!item.is_object()) continue;
        const auto& io = item.get_object();
        batch_error be{str(io, "code"), str(io, "message"), str(io, "param"), -1};
        if (const auto* l = io.if_contains("line"); l && l->is_int64()) be.line = l->get_int64();
        b.errors.push_back(std::move(be));
      }
    }
  }
  b.output_file_id = str(o, "output_file_id");
  b.error_file_id = str(o, "error_file_id");
  return b;
}

}  // namespace tandem::batch
