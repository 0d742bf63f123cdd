#include "net/openai/embeddings_request.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <boost/json.hpp>
#include <cstring>

#include "net/openai/openai_request.h"
#include "net/request_fields.h"

namespace tandem::net {
namespace json = boost::json;

namespace {

const json::object& object_of(const json::value& v) {
  if (!v.is_object()) throw api_error(400, "the request body must be a JSON object");
  return v.get_object();
}

std::vector<int32_t> token_ids(const json::array& a, const std::string& field_name) {
  std::vector<int32_t> ids;
  ids.reserve(a.size());
  for (const auto& v : a) {
    if (!v.is_int64() || v.get_int64() < 0 || v.get_int64() > INT32_MAX) bad(field_name, "must hold token ids");
    ids.push_back(static_cast<int32_t>(v.get_int64()));
  }
  if (ids.empty()) bad(field_name, "is empty");
  return ids;
}

void check_count(size_t n, const std::string& name) {
  if (n == 0) bad(name, "must not be empty");
  if (n > kMaxEmbeddingInputs) bad(name, "has " + std::to_string(n) + " entries; at most " +
                                             std::to_string(kMaxEmbeddingInputs) + " are taken");
}

std::string model_of(const json::object& o) {
  const auto* m = field(o, "model");
  if (m && !m->is_string()) bad("model", "must be a string");
  return m ? std::string(m->get_string()) : std::string();
}

}  // namespace

embeddings_call parse_embeddings_request(std::string_view body) {
  const json::value v = parse_json_body(body);
  const auto& o = object_of(v);
  embeddings_call c;
  c.req.embed = true;
  c.model = model_of(o);
  const auto* in = field(o, "input");
  if (!in) bad("input", "is required");
  if (in->is_string()) {
    c.req.embed_texts.emplace_back(in->get_string());
  } else if (in->is_array()) {
    const auto& a = in->get_array();
    check_count(a.size(), "input");
    if (a.front().is_string()) {
      for (size_t i = 0; i < a.size(); ++i) {
        if (!a[i].is_string()) bad("input", "must be all strings or all token ids");
        c.req.embed_texts.emplace_back(a[i].get_string());
      }
    } else if (a.front().is_array()) {
      for (size_t i = 0; i < a.size(); ++i) {
        if (!a[i].is_array()) bad("input", "must be all lists of token ids");
        c.req.embed_tokens.push_back(token_ids(a[i].get_array(), "input[" + std::to_string(i) + "]"));
      }
    } else {
      c.req.embed_tokens.push_back(token_ids(a, "input"));
    }
  } else {
    bad("input", "must be a string, a list of strings, a list of token ids or a list of such lists");
  }
  for (size_t i = 0; i < c.req.embed_texts.size(); ++i) {
    if (c.req.embed_texts[i].empty()) bad("input", "holds an empty string at " + std::to_string(i));
  }
  if (const auto* f = field(o, "encoding_format")) {
    if (!f->is_string() || (f->get_string() != "float" && f->get_string() != "base64")) {
      bad("encoding_format", "must be \"float\" or \"base64\"");
    }
    c.base64 = f->get_string() == "base64";
  }
  if (const auto* d = field(o, "dimensions")) {
    if (!d->is_int64() || d->get_int64() < 1 || d->get_int64() > 1 << 20) bad("dimensions", "must be a positive integer");
    c.req.dimensions = static_cast<uint32_t>(d->get_int64());
  }
  if (const auto* u = field(o, "user"); u && u->is_string()) c.req.session = std::string(u->get_string());
  return c;
}

embeddings_call parse_rerank_request(std::string_view body) {
  const json::value v = parse_json_body(body);
  const auto& o = object_of(v);
  embeddings_call c;
  c.req.embed = true;
  c.req.rerank = true;
  c.model = model_of(o);
  const auto* q = field(o, "query");
  if (!q || !q->is_string()) bad("query", "must be a string");
  c.req.rerank_query = std::string(q->get_string());
  const auto* d = field(o, "documents");
  if (!d || !d->is_array()) bad("documents", "must be a list of strings");
  const auto& a = d->get_array();
  check_count(a.size(), "documents");
  for (size_t i = 0; i < a.size(); ++i) {
    const json::value* text = &a[i];
    if (a[i].is_object()) text = field(a[i].get_object(), "text");  // Cohere's {"text": ...}
    if (!text || !text->is_string()) bad("documents", "must be a list of strings (entry " + std::to_string(i) + ")");
    c.req.embed_texts.emplace_back(text->get_string());
  }
  if (const auto* t = field(o, "top_n")) {
    if (!t->is_int64() || t->get_int64() < 1) bad("top_n", "must be a positive integer");
    c.top_n = static_cast<size_t>(t->get_int64());
  }
  if (const auto* r = field(o, "return_documents")) {
    if (!r->is_bool()) bad("return_documents", "must be true or false");
    c.return_documents = r->get_bool();
  }
  return c;
}

std::string base64_floats(const std::vector<float>& values) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<unsigned char> bytes(values.size() * 4);
  for (size_t i = 0; i < values.size(); ++i) {
    const auto bits = std::bit_cast<uint32_t>(values[i]);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + b] = static_cast<unsigned char>(bits >> (8 * b));  // little-endian
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t n = (uint32_t{bytes[i]} << 16) | (i + 1 < bytes.size() ? uint32_t{bytes[i + 1]} << 8 : 0) |
                       (i + 2 < bytes.size() ? uint32_t{bytes[i + 2]} : 0);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

namespace {

json::object usage(uint32_t prompt_tokens) {
  return json::object{{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}};
}

}  // namespace

std::string embeddings_body(const embeddings_call& call, std::vector<embedding_result> results,
                            uint32_t prompt_tokens, const std::string& served_model) {
  std::sort(results.begin(), results.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
  json::array data;
  data.reserve(results.size());
  for (auto& r : results) {
    json::object item{{"object", "embedding"}, {"index", r.index}};
    if (call.base64) {
      item["embedding"] = base64_floats(r.values);
    } else {
      json::array v;
      v.reserve(r.values.size());
      for (float x : r.values) v.emplace_back(static_cast<double>(x));
      item["embedding"] = std::move(v);
    }
    data.emplace_back(std::move(item));
  }
  return json::serialize(json::object{{"object", "list"},
                                      {"data", std::move(data)},
                                      {"model", call.model.empty() ? served_model : call.model},
                                      {"usage", usage(prompt_tokens)}});
}

std::string rerank_body(const embeddings_call& call, std::vector<embedding_result> results, uint32_t prompt_tokens,
                        const std::string& served_model) {
  // Highest score first; equal scores keep the documents' order.
  std::stable_sort(results.begin(), results.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
  std::stable_sort(results.begin(), results.end(),
                   [](const auto& a, const auto& b) { return a.values.at(0) > b.values.at(0); });
  if (call.top_n > 0 && call.top_n < results.size()) results.resize(call.top_n);
  json::array out;
  for (const auto& r : results) {
    json::object item{{"index", r.index}, {"relevance_score", static_cast<double>(r.values.at(0))}};
    if (call.return_documents) item["document"] = json::object{{"text", call.req.embed_texts.at(r.index)}};
    out.emplace_back(std::move(item));
  }
  return json::serialize(json::object{{"id", "rerank"},
                                      {"model", call.model.empty() ? served_model : call.model},
                                      {"results", std::move(out)},
                                      {"usage", usage(prompt_tokens)}});
}

}  // namespace tandem::net
