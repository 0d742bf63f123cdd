#include "net/http/multipart_form.h"

#include <algorithm>
#include <cctype>

#include "net/api_error.h"

namespace tandem::net {
namespace {

api_error bad(const std::string& why) { return api_error(400, "malformed multipart/form-data body: " + why); }

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The value of parameter `key` in a header value ("form-data; name=\"file\"; filename=x").
std::string parameter(std::string_view header, std::string_view key) {
  size_t pos = 0;
  while ((pos = header.find(';', pos)) != std::string_view::npos) {
    ++pos;
    std::string_view rest = trim(header.substr(pos));
    const size_t eq = rest.find('=');
    if (eq == std::string_view::npos) continue;
    if (lower(trim(rest.substr(0, eq))) != key) continue;
    std::string_view v = trim(rest.substr(eq + 1));
    if (!v.empty() && v.front() == '"') {
      std::string out;
      for (size_t i = 1; i < v.size() && v[i] != '"'; ++i) {
        if (v[i] == '\\' && i + 1 < v.size()) ++i;
        out += v[i];
      }
      return out;
    }
    return std::string(v.substr(0, v.find(';')));
  }
  return {};
}

}  // namespace

std::vector<form_part> parse_multipart(std::string_view content_type, std::string_view body, size_t max_parts) {
  if (lower(trim(content_type.substr(0, content_type.find(';')))) != "multipart/form-data") {
    throw api_error(400, "the body must be multipart/form-data (a 'purpose' field and a 'file' part)");
  }
  const std::string boundary = parameter(content_type, "boundary");
  if (boundary.empty() || boundary.size() > 200) throw bad("no usable boundary in Content-Type");
  const std::string delimiter = "--" + boundary;
  size_t pos = body.find(delimiter);
  if (pos == std::string_view::npos) throw bad("the boundary does not occur in the body");
  std::vector<form_part> parts;
  for (;;) {
    pos += delimiter.size();
    if (body.substr(pos, 2) == "--") break;  // the closing delimiter
    if (body.substr(pos, 2) != "\r\n") throw bad("a delimiter is not followed by CRLF");
    pos += 2;
    const size_t head_end = body.find("\r\n\r\n", pos);
    if (head_end == std::string_view::npos) throw bad("a part has no end of headers");
    const std::string_view head = body.substr(pos, head_end - pos);
    const size_t data_begin = head_end + 4;
    const size_t next = body.find("\r\n" + delimiter, data_begin);
    if (next == std::string_view::npos) throw bad("a part is not closed by the boundary");
    if (parts.size() == max_parts) throw bad("more than " + std::to_string(max_parts) + " parts");
    form_part part;
    size_t line_start = 0;
    while (line_start <= head.size()) {
      size_t line_end = head.find("\r\n", line_start);
      if (line_end == std::string_view::npos) line_end = head.size();
      const std::string_view line = head.substr(line_start, line_end - line_start);
      const size_t colon = line.find(':');
      if (colon != std::string_view::npos && lower(trim(line.substr(0, colon))) == "content-disposition") {
        const std::string_view value = line.substr(colon + 1);
        part.name = parameter(value, "name");
        part.filename = parameter(value, "filename");
      }
      line_start = line_end + 2;
    }
    part.data = body.substr(data_begin, next - data_begin);
    parts.push_back(std::move(part));
    pos = next + 2;
  }
  return parts;
}

}  // namespace tandem::net
