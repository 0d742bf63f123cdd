#include "net/batch/batch_routes.h"

#include <spdlog/spdlog.h>

#include <boost/json.hpp>
#include <chrono>

#include "engine/batch/batch_store.h"
#include "engine/model/model_path.h"
#include "net/await_actor.h"
#include "net/batch/batch_runner.h"
#include "net/http/multipart_form.h"
#include "net/server_context.h"
#include "tandem/runtime.h"

namespace tandem::net {
namespace json = boost::json;
namespace asio = boost::asio;

namespace {

constexpr uint64_t kFormSlack = 64 * 1024;               // the form's fields and headers beside the file
constexpr auto kAskTimeout = std::chrono::seconds(120);  // an upload's fsync of 100 MB included

batch_limits limits_of(const runtime& rt) {
  const auto& c = rt.config();
  batch_limits l;
  l.dir = c.batch_dir.empty() ? (tandem_home() / "batches").string() : c.batch_dir;
  l.max_file_bytes = c.batch_max_file_bytes;
  l.max_lines = c.batch_max_lines;
  l.max_tenant_bytes = c.batch_max_tenant_bytes;
  l.max_in_flight = std::max<uint32_t>(1, c.batch_max_in_flight);
  return l;
}

// The queue's answer as a reply, or its error thrown.
http_reply to_reply(batch_reply&& r, const char* content_type = "application/json") {
  if (r.status != 200) throw api_error(r.status, std::move(r.message), std::move(r.param), std::move(r.code));
  return http_reply{200, content_type, std::move(r.body), {}};
}

// The question for await_actor: a message with `args` to the queue, whose reply is the answer.
// (A plain function returning the callable: coroutines here take no by-value arguments.)
template <class... Ts>
auto queue_question(const std::shared_ptr<server_context>& ctx, Ts... args) {
  return [q = ctx->batches, sys = &ctx->sys, ... args = std::move(args)](auto done) mutable {
    sys->spawn([q, done, ... args = std::move(args)](caf::event_based_actor* self) mutable {
      self->request(q, kAskTimeout, std::move(args)...)
          .then([done](batch_reply& r) { done(std::move(r)); },
                [done, self](caf::error& e) {
                  done(batch_reply{503, {}, "the batch queue did not answer: " + self->system().render(e), {}, {}});
                });
    });
  };
}

std::string query_value(std::string_view query, std::string_view key) {
  size_t pos = 0;
  while (pos <= query.size()) {
    size_t end = query.find('&', pos);
    if (end == std::string_view::npos) end = query.size();
    const std::string_view pair = query.substr(pos, end - pos);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) == key)
      return eq == std::string_view::npos ? std::string() : std::string(pair.substr(eq + 1));
    pos = end + 1;
  }
  return {};
}

// A checked upload, ready for the queue; or why not.
struct upload {
  std::optional<api_error> refused;
  std::string filename;
  std::string content;
  uint32_t lines = 0;
};

upload check_upload(const std::string& content_type, const std::string& body, const batch_limits& limits) {
  upload u;
  try {
    const auto parts = parse_multipart(content_type, body);
    const form_part* purpose = nullptr;
    const form_part* file = nullptr;
    for (const auto& p : parts) {
      if (p.name == "purpose") purpose = &p;
      if (p.name == "file") file = &p;
    }
    if (!purpose) throw api_error(400, "'purpose' is required", "purpose");
    if (purpose->data != "batch") {
      throw api_error(400, "purpose must be 'batch': this server keeps files for the Batch API only", "purpose");
    }
    if (!file) throw api_error(400, "'file' is required", "file");
    if (file->data.size() > limits.max_file_bytes) {
      throw api_error(400,
                      "the file is " + std::to_string(file->data.size()) + " bytes; a batch file may be at most " +
                          std::to_string(limits.max_file_bytes),
                      "file", "file_too_large");
    }
    if (auto problem = batch::check_batch_jsonl(file->data, limits.max_lines, u.lines)) {
      throw api_error(400, "the file is not a batch input (JSONL): " + problem->message, "file", "invalid_file");
    }
    u.filename = file->filename.empty() ? "upload.jsonl" : file->filename.substr(0, 255);
    u.content.assign(file->data);
  } catch (const api_error& e) {
    u.refused = e;
  }
  return u;
}

// POST /v1/batches's body, checked into what the queue takes.
batch_create read_create(const std::string& body, const runtime& rt) {
  const json::value v = parse_json_body(body);
  if (!v.is_object()) throw api_error(400, "the body must be a JSON object");
  const auto& o = v.get_object();
  batch_create c;
  auto text = [&](const char* key, bool required) -> std::string {
    const json::value* f = o.if_contains(key);
    if (!f || f->is_null()) {
      if (required) throw api_error(400, std::string("'") + key + "' is required", key);
      return {};
    }
    if (!f->is_string()) throw api_error(400, std::string("'") + key + "' must be a string", key);
    return std::string(f->get_string());
  };
  c.input_file_id = text("input_file_id", true);
  c.endpoint = text("endpoint", true);
  const bool embeddings = rt.config().embeddings;
  if (embeddings || (c.endpoint != "/v1/chat/completions" && c.endpoint != "/v1/completions")) {
    throw api_error(400,
                    embeddings ? "this server serves embeddings, which batches do not run yet"
                               : "endpoint must be /v1/chat/completions or /v1/completions",
                    "endpoint");
  }
  c.completion_window = text("completion_window", true);
  if (c.completion_window != "24h") throw api_error(400, "completion_window must be '24h'", "completion_window");
  if (const json::value* m = o.if_contains("metadata"); m && !m->is_null()) {
    if (!m->is_object() || m->get_object().size() > 16) {
      throw api_error(400, "metadata must be an object of at most 16 string values", "metadata");
    }
    for (const auto& kv : m->get_object()) {
      if (kv.key().size() > 64 || !kv.value().is_string() || kv.value().get_string().size() > 512) {
        throw api_error(400, "metadata keys are at most 64 characters, values strings of at most 512", "metadata");
      }
    }
    c.metadata_json = json::serialize(*m);
  }
  return c;
}

// A list's ?limit=, from 1 to `most`; throws api_error 400.
uint32_t parse_limit(const std::string& text, uint32_t most) {
  try {
    size_t used = 0;
    const long n = std::stol(text, &used);
    if (used == text.size() && n >= 1 && n <= static_cast<long>(most)) return static_cast<uint32_t>(n);
  } catch (const std::exception&) {
  }
  throw api_error(400, "limit must be an integer from 1 to " + std::to_string(most), "limit");
}

api_error wrong_method(std::string_view allowed, std::string_view path) {
  return api_error(405, "use " + std::string(allowed) + " for " + std::string(path));
}

}  // namespace

uint64_t batch_upload_body_limit(const runtime& rt) { return rt.config().batch_max_file_bytes + kFormSlack; }

bool is_batch_upload(std::string_view method, std::string_view path) {
  return method == "POST" && (path == "/v1/files" || path.starts_with("/v1/files?"));
}

void ensure_batch_queue(const std::shared_ptr<server_context>& ctx, const runtime& rt) {
  std::call_once(ctx->batches_once, [&] {
    const batch_limits l = limits_of(rt);
    spdlog::info("Batch API: directory {}, {} request(s) in flight at most", l.dir, l.max_in_flight);
    ctx->batches = spawn_batch_queue(ctx->sys, l, make_batch_runner(ctx, rt));
  });
}

asio::awaitable<void> serve_batch_route(const std::shared_ptr<server_context>& ctx, const runtime& rt,
                                        batch_http_request& req, http_reply& out) {
  ensure_batch_queue(ctx, rt);
  std::string tenant;
  co_await caller_tenant(ctx, rt, req.key, tenant);
  const std::string_view path = req.path;
  const bool get = req.method == "GET" || req.method == "HEAD";
  const bool post = req.method == "POST";
  batch_reply r;

  if (path == "/v1/files" && get) {
    uint32_t limit = 10000;
    if (const std::string text = query_value(req.query, "limit"); !text.empty()) {
      limit = parse_limit(text, 10000);
    }
    auto ask = queue_question(ctx, bq_lsfiles_atom::value, tenant, query_value(req.query, "purpose"),
                              query_value(req.query, "after"), limit);
    co_await await_actor(r, ask);
    out = to_reply(std::move(r));
    co_return;
  }
  if (path == "/v1/files") {
    if (!post) throw wrong_method("GET or POST", path);
    upload u;
    const batch_limits limits = limits_of(rt);
    auto check = [&](auto done) {
      asio::post(ctx->work, [done, &req, limits] { done(check_upload(req.content_type, req.body, limits)); });
    };
    co_await await_actor(u, check);
    req.body = {};  // the upload's bytes live in u.content from here
    if (u.refused) throw *u.refused;
    auto ask = queue_question(ctx, bq_put_atom::value, tenant, std::move(u.filename), std::string("batch"),
                              std::move(u.content), u.lines);
    co_await await_actor(r, ask);
    out = to_reply(std::move(r));
    co_return;
  }
  if (path.starts_with("/v1/files/")) {
    std::string id(path.substr(10));
    bool content = false;
    if (id.ends_with("/content")) {
      id.resize(id.size() - 8);
      content = true;
    }
    if (id.empty() || id.find('/') != std::string::npos) throw api_error(404, "no such endpoint: " + req.path);
    if (req.method == "DELETE" && !content) {
      auto ask = queue_question(ctx, bq_delfile_atom::value, tenant, id);
      co_await await_actor(r, ask);
      out = to_reply(std::move(r));
      co_return;
    }
    if (!get) throw wrong_method(content ? "GET" : "GET or DELETE", path);
    auto ask = queue_question(ctx, bq_file_atom::value, tenant, id, content);
    co_await await_actor(r, ask);
    out = to_reply(std::move(r), content ? "application/jsonl" : "application/json");
    co_return;
  }
  if (path == "/v1/batches") {
    if (post) {
      batch_create c = read_create(req.body, rt);
      c.tenant = tenant;
      auto ask = queue_question(ctx, bq_create_atom::value, std::move(c));
      co_await await_actor(r, ask);
    } else if (get) {
      const std::string limit_text = query_value(req.query, "limit");
      const uint32_t limit = limit_text.empty() ? 20 : parse_limit(limit_text, 100);
      auto ask = queue_question(ctx, bq_list_atom::value, tenant, query_value(req.query, "after"), limit);
      co_await await_actor(r, ask);
    } else {
      throw wrong_method("GET or POST", path);
    }
    out = to_reply(std::move(r));
    co_return;
  }
  if (path.starts_with("/v1/batches/")) {
    std::string id(path.substr(12));
    const bool cancel = id.ends_with("/cancel");
    if (cancel) id.resize(id.size() - 7);
    if (id.empty() || id.find('/') != std::string::npos) throw api_error(404, "no such endpoint: " + req.path);
    if (cancel) {
      if (!post) throw wrong_method("POST", path);
      auto ask = queue_question(ctx, bq_cancel_atom::value, tenant, id);
      co_await await_actor(r, ask);
    } else {
      if (!get) throw wrong_method("GET", path);
      auto ask = queue_question(ctx, bq_get_atom::value, tenant, id);
      co_await await_actor(r, ask);
    }
    out = to_reply(std::move(r));
    co_return;
  }
  throw api_error(404, "no such endpoint: " + req.path);
}

}  // namespace tandem::net
